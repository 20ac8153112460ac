"""A real Dask cluster for tests: a ``dask scheduler`` and two ``dask worker`` processes on
localhost, on a free port, started with this interpreter (so that the workers import this
checkout's ``ganga_like_dask``)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .waiting import wait_for


@dataclass
class DaskCluster:
    directory: Path
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        info = json.loads((self.directory / "scheduler.json").read_text())
        return str(info["address"])

    def stop(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(10)


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _written(info: Path) -> bool:
    """Whether the scheduler has written its file whole (it is not written atomically: a
    loaded machine shows it empty or cut for a moment)."""
    try:
        return "address" in json.loads(info.read_text())
    except (OSError, ValueError):
        return False


def start_cluster(n_workers: int = 2, nthreads: int = 2, nanny: bool = False) -> DaskCluster:
    """Start a scheduler and ``n_workers`` workers; return once every worker is connected.
    With ``nanny``, each worker runs under a nanny that starts a new one when it dies;
    without, a killed worker stays dead."""
    directory = Path(tempfile.mkdtemp(prefix="ganga_like-dask-"))
    info = directory / "scheduler.json"
    scheduler = _spawn(
        [
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(info),
        ],
        directory / "scheduler.log",
    )
    cluster = DaskCluster(directory, scheduler)
    try:
        wait_for(lambda: _written(info), 60, "the Dask scheduler to start")
        for n in range(n_workers):
            cluster.workers.append(
                _spawn(
                    [
                        "distributed.cli.dask_worker",
                        "--scheduler-file",
                        str(info),
                        "--nthreads",
                        str(nthreads),
                        "--no-dashboard",
                        "--nanny" if nanny else "--no-nanny",
                        "--name",
                        f"w{n}",
                    ],
                    directory / f"worker{n}.log",
                )
            )
        from distributed import Client

        with Client(cluster.address, timeout=30) as client:
            client.wait_for_workers(n_workers, timeout=60)
    except BaseException:
        cluster.stop()
        raise
    return cluster


_shared: DaskCluster | None = None


def start_shared_cluster() -> DaskCluster:
    """The cluster the conformance suite's Dask case uses, started once per test process;
    a worker a test kills is replaced by its nanny."""
    global _shared
    if _shared is None:
        _shared = start_cluster(nanny=True)
        atexit.register(_shared.stop)
    return _shared


def kill_keys(address: str, keys: list[str]) -> None:
    """Cancel ``keys`` and kill their programs (what a test left running)."""
    if not keys:
        return
    from distributed import Client

    from ganga_like_dask import scheduler_side, task

    with Client(address, timeout=10) as client:
        client.run_on_scheduler(scheduler_side.cancel, keys)
        client.run(task.kill_keys, keys)
