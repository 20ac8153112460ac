"""The gangadir's default Dask cluster, seen from a session: find it, start it, stop it.

``Dask()`` with no address runs on one LocalCluster per gangadir, in a detached process of
its own (:mod:`.cluster_process`), so that its jobs outlive the session that submitted them,
as Local jobs outlive theirs. It is started on demand by the first submission that needs it,
with this interpreter and ``sys.path``, shared by every session of the gangadir, and exits
once it has held no task for ``Dask.idle_exit`` seconds. Files in ``<gangadir>/dask/``
(0700; each file 0600):

``cluster.json``      ``pid``, ``address`` (``tls://127.0.0.1:PORT``), where the TLS
                      certificate and key a client needs are, the environment its workers
                      started with
``tls-PID.pem``, ``tls-PID.key``  that certificate and key
``cluster.lock``      flock held while a session looks for the cluster or starts one
``cluster.use.lock``  flock held shared by a session while it submits, and exclusively by
                      a cluster that leaves, so that it never leaves under a submission
``cluster.log``       the cluster's log

Its scheduler speaks TLS with a certificate it makes at start and writes only into that
directory: without those files (the user's own) no one can connect to it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganga_like.errors import BackendError
from ganga_like.private import make_private_dirs

__all__ = [
    "ClusterRecord",
    "alive_record",
    "cluster_dir",
    "credential_paths",
    "ensure_cluster",
    "environment_change",
    "in_use",
    "stop_cluster",
]

DIR_NAME = "dask"
RECORD_NAME = "cluster.json"
SPAWN_LOCK = "cluster.lock"
USE_LOCK = "cluster.use.lock"
LOG_NAME = "cluster.log"
HELPER_MODULE = "ganga_like_dask.cluster_process"
# Longest wait for a new cluster to say it is ready: its workers are processes that each
# import distributed, which takes seconds on a loaded machine.
START_PATIENCE = 180.0
# Longest wait for a lock: a cluster that leaves holds the use lock while it closes.
LOCK_PATIENCE = 60.0


@dataclass(frozen=True)
class ClusterRecord:
    """What ``cluster.json`` says of the live cluster."""

    pid: int
    address: str
    cert: str  # the paths of the client's certificate and key
    key: str
    environ: dict[str, str]

    def security(self) -> Any:
        """The ``distributed`` Security a client of this cluster needs."""
        from distributed import Security

        return Security(  # type: ignore[no-untyped-call]
            require_encryption=True,
            tls_ca_file=self.cert,
            tls_client_cert=self.cert,
            tls_client_key=self.key,
        )


def cluster_dir(gangadir: Path) -> Path:
    return Path(gangadir) / DIR_NAME


def credential_paths(gangadir: Path, pid: int) -> tuple[Path, Path]:
    """Where the cluster process ``pid`` keeps the client's TLS certificate and key."""
    directory = cluster_dir(gangadir)
    return directory / f"tls-{pid}.pem", directory / f"tls-{pid}.key"


def _forget_dead_credentials(gangadir: Path) -> None:
    """Remove the credentials of cluster processes that are gone (killed: they could not)."""
    for path in cluster_dir(gangadir).glob("tls-*.*"):
        pid = path.name.split("-", 1)[1].split(".", 1)[0]
        if pid.isdigit() and not is_helper(int(pid), gangadir):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def read_record(gangadir: Path) -> ClusterRecord | None:
    """What ``cluster.json`` says (None: no such file, or not one of ours)."""
    try:
        data = json.loads((cluster_dir(gangadir) / RECORD_NAME).read_text())
        return ClusterRecord(
            int(data["pid"]),
            str(data["address"]),
            str(data["cert"]),
            str(data["key"]),
            {str(k): str(v) for k, v in dict(data["environ"]).items()},
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_helper(pid: int, gangadir: Path) -> bool:
    """Whether ``pid`` is the live cluster process of ``gangadir`` (not a zombie, not a
    reused pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    args = [os.fsdecode(a) for a in raw.split(b"\0")]
    if HELPER_MODULE not in args:
        return False  # a zombie (empty) or another program that got the pid
    position = args.index(HELPER_MODULE) + 1
    return position < len(args) and Path(args[position]).resolve() == Path(gangadir).resolve()


def alive_record(gangadir: Path) -> ClusterRecord | None:
    """The record of the gangadir's cluster if its process is alive (None: none runs)."""
    record = read_record(gangadir)
    if record is None or not is_helper(record.pid, gangadir):
        return None
    return record


@contextlib.contextmanager
def _flock(path: Path, kind: int, what: str) -> Iterator[None]:
    from ganga_like.detached import flock_within

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if not flock_within(fd, kind, LOCK_PATIENCE):
            raise BackendError(
                f"the Dask cluster of {path.parent.parent} has been busy {what} for "
                f"{LOCK_PATIENCE:.0f} s; see {path.parent / LOG_NAME}"
            )
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def in_use(gangadir: Path) -> Iterator[None]:
    """Held while a session submits to the cluster: a cluster that is idle does not leave
    meanwhile (it takes this lock exclusively before it leaves)."""
    directory = cluster_dir(gangadir)
    make_private_dirs(directory)
    with _flock(directory / USE_LOCK, fcntl.LOCK_SH, "leaving"):
        yield


def ensure_cluster(
    gangadir: Path, n_workers: int, threads_per_worker: int, idle_exit: float
) -> ClusterRecord:
    """The live cluster of ``gangadir``, started when none runs (a dead one's record is
    replaced). The worker counts apply to a cluster started here; a running one is used
    as it is."""
    directory = cluster_dir(gangadir)
    make_private_dirs(directory)
    with _flock(directory / SPAWN_LOCK, fcntl.LOCK_EX, "starting"):
        record = alive_record(gangadir)
        if record is not None:
            return record
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / RECORD_NAME)  # a dead cluster's
        _forget_dead_credentials(gangadir)
        _start(gangadir, n_workers, threads_per_worker, idle_exit)
        record = alive_record(gangadir)
        if record is None:
            raise BackendError(
                f"the Dask cluster of {gangadir} said it was ready but left no record; "
                f"see {directory / LOG_NAME}: {_last_log_line(directory)}"
            )
        return record


def _start(gangadir: Path, n_workers: int, threads_per_worker: int, idle_exit: float) -> None:
    from ganga_like.detached import HelperNotReady, reap_when_it_exits, start_detached

    directory = cluster_dir(gangadir)
    argv = [
        sys.executable,
        "-m",
        HELPER_MODULE,
        str(Path(gangadir).resolve()),
        "--n-workers",
        str(n_workers),
        "--threads-per-worker",
        str(threads_per_worker),
        "--idle-exit",
        str(idle_exit),
    ]
    try:
        # The directory holding this package goes first on its import path, so that the
        # cluster and its workers run this very code.
        started = start_detached(
            argv,
            directory / LOG_NAME,
            ready_timeout=START_PATIENCE,
            first_on_path=Path(__file__).resolve().parents[1],
        )
    except HelperNotReady as exc:
        reap_when_it_exits(exc.proc)  # gone once it exits, never a zombie
        raise BackendError(
            f"the Dask cluster of {gangadir} did not start: {exc.reason}; see "
            f"{directory / LOG_NAME}: {_last_log_line(directory)}"
        ) from None
    reap_when_it_exits(started.proc)
    kind, _, rest = (started.ready_line or "").partition(" ")
    if kind != "ready":
        raise BackendError(f"the Dask cluster of {gangadir} did not start: {rest or kind}")


def _last_log_line(directory: Path) -> str:
    try:
        lines = (directory / LOG_NAME).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def environment_change(record: ClusterRecord) -> dict[str, Any]:
    """How this process's environment differs from the one the cluster's workers started
    with: what a program run there needs to see this session's (as Local programs do)."""
    here = dict(os.environ)
    return {
        "set": {k: v for k, v in here.items() if record.environ.get(k) != v},
        "unset": [k for k in record.environ if k not in here],
    }


def stop_cluster(gangadir: Path, timeout: float = 30.0) -> bool:
    """Ask the gangadir's cluster to exit (the programs it runs end with it); True if one
    ran. Raises TimeoutError if it is still there after ``timeout`` seconds."""
    from ganga_like.detached import stop_detached

    record = alive_record(gangadir)
    if record is None:
        return False
    pid = record.pid
    if not stop_detached(pid, lambda: is_helper(pid, gangadir), timeout):
        raise TimeoutError(f"the Dask cluster {pid} of {gangadir} did not exit in {timeout} s")
    return True
