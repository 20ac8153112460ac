"""The gangadir's default Dask cluster: ``python -m ganga_like_dask.cluster_process``.

    python -m ganga_like_dask.cluster_process GANGADIR [--n-workers N]
        [--threads-per-worker T] [--idle-exit S] [--ready-fd FD]

Started detached by a session (:mod:`.default_cluster`), with the session's interpreter and
import path. Runs a LocalCluster whose scheduler listens on ``tls://127.0.0.1`` with a
certificate made here, writes ``<gangadir>/dask/cluster.json`` once it listens, answers
``ready ADDRESS`` (or ``error MESSAGE``) on ``--ready-fd``, and exits once it has held no
task and seen no new client for ``--idle-exit`` seconds, or on SIGTERM/SIGINT (then the
programs still running on its workers are stopped, not left behind).

Its workers are started by multiprocessing, which imports this module again in them (as
``__mp_main__``): nothing runs at import, so a user's script is never imported there.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ganga_like.detached import send_ready_line
from ganga_like.private import make_private_dirs, write_private
from ganga_like_dask import task
from ganga_like_dask.default_cluster import (
    RECORD_NAME,
    USE_LOCK,
    cluster_dir,
    credential_paths,
    read_record,
)

log = logging.getLogger("ganga_like.dask_cluster")

IDLE_CHECK = 0.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ganga_like_dask.cluster_process")
    parser.add_argument("gangadir", type=Path)
    parser.add_argument("--n-workers", type=int, default=2)
    parser.add_argument("--threads-per-worker", type=int, default=1)
    parser.add_argument("--idle-exit", type=float, default=60.0)
    parser.add_argument("--ready-fd", type=int, default=-1)
    args = parser.parse_args(argv)
    os.umask(0o077)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(process)d %(levelname)s %(name)s %(message)s",
    )
    log.setLevel(logging.INFO)
    # Not every client that comes and goes: the log would grow with each poll.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        cluster = _start(args.n_workers, args.threads_per_worker)
    except Exception as exc:  # tell the waiting session, and leave a traceback in the log
        log.exception("the Dask cluster failed to start")
        send_ready_line(args.ready_fd, f"error {type(exc).__name__}: {exc}")
        return 1
    gangadir = args.gangadir.resolve()
    try:
        _write_record(gangadir, cluster)
        log.info("ready %s (pid %d)", cluster.scheduler_address, os.getpid())
        send_ready_line(args.ready_fd, f"ready {cluster.scheduler_address}")
        reason = _serve(gangadir, cluster, args.idle_exit, stopping)
        log.info("leaving (%s)", reason)
    finally:
        _close(gangadir, cluster)
    return 0


def _start(n_workers: int, threads_per_worker: int) -> Any:
    from distributed import LocalCluster, Security

    security = Security.temporary()  # type: ignore[no-untyped-call]
    return LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        processes=True,
        host="127.0.0.1",
        protocol="tls://",
        security=security,
        dashboard_address=None,
    )


def _write_record(gangadir: Path, cluster: Any) -> None:
    directory = cluster_dir(gangadir)
    make_private_dirs(directory)
    # The client's credentials as files of their own: a Security given their text keeps
    # them in temporary files that go at interpreter exit, under a monitor still polling.
    cert, key = credential_paths(gangadir, os.getpid())
    write_private(cert, cluster.security.tls_client_cert.encode())
    write_private(key, cluster.security.tls_client_key.encode())
    record = {
        "pid": os.getpid(),
        "address": cluster.scheduler_address,
        "cert": str(cert),
        "key": str(key),
        "environ": dict(os.environ),
    }
    tmp = directory / f".{RECORD_NAME}.{os.getpid()}"
    write_private(tmp, json.dumps(record).encode())
    os.replace(tmp, directory / RECORD_NAME)


def _serve(gangadir: Path, cluster: Any, idle_exit: float, stopping: threading.Event) -> str:
    """Until stopped, or idle for ``idle_exit`` seconds: no task held, no new client."""
    last_active = time.monotonic()
    seen: frozenset[str] = frozenset()
    while not stopping.wait(IDLE_CHECK):
        tasks, clients = _snapshot(cluster)
        now = time.monotonic()
        if tasks or clients != seen:
            last_active, seen = now, clients
        elif now - last_active >= idle_exit and _leave_if_idle(gangadir, cluster):
            return "idle"
    return "stop requested"


def _snapshot(cluster: Any) -> tuple[int, frozenset[str]]:
    """The scheduler's task count and client ids, read on its own event loop."""
    from distributed.utils import sync

    scheduler = cluster.scheduler

    async def read() -> tuple[int, frozenset[str]]:
        return len(scheduler.tasks), frozenset(scheduler.clients)

    result: tuple[int, frozenset[str]] = sync(cluster.loop, read)
    return result


def _leave_if_idle(gangadir: Path, cluster: Any) -> bool:
    """Take the use lock (no session is submitting) and, if no task came meanwhile, take
    the record away: from then on, sessions start a new cluster.

    The use lock is then held from the decision to leave until the process exits (its
    descriptor is never closed): a session that wants the cluster meanwhile waits, then
    finds no record and starts a new one."""
    fd = os.open(cluster_dir(gangadir) / USE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    if _snapshot(cluster)[0]:
        os.close(fd)
        return False
    _forget_record(gangadir)
    return True  # ``fd`` stays open, holding the lock, until the process exits


def _forget_record(gangadir: Path) -> None:
    record = read_record(gangadir)
    if record is not None and record.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(cluster_dir(gangadir) / RECORD_NAME)
    for path in credential_paths(gangadir, os.getpid()):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _close(gangadir: Path, cluster: Any) -> None:
    """Stop the programs still running on the workers (in process groups of their own,
    they would outlive them), then the cluster."""
    _forget_record(gangadir)
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # workers leaving is expected
    from distributed import Client

    with (
        contextlib.suppress(Exception),
        Client(cluster, timeout=10, set_as_default=False) as client,  # type: ignore[no-untyped-call]
    ):
        client.run(task.kill_all)
    with contextlib.suppress(Exception):
        cluster.close(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
