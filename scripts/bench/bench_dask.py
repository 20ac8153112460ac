"""N `/bin/echo` subjobs on ``Dask()``, from submit() to master completed, against a plain
``client.map`` of the same tasks on the same cluster, in the same run.

    python scripts/bench/bench_dask.py [N] [--rounds R] [--job-first]

The cluster is the gangadir's own, as ``Dask()`` starts it (``config Dask.n_workers``
workers of ``Dask.threads_per_worker`` threads, a scheduler on ``tls://127.0.0.1``), started
once before timing; the plain map connects to it with the credentials it leaves in the
gangadir. Each round times (a) ``client.map`` of a function doing what a subjob must do at
least, running ``/bin/echo`` in a subprocess with its stdout and stderr written to files in
a directory of its own, gathered to the end, and (b) a job of N ``/bin/echo`` subjobs, from
``submit()`` to the master completed as the session's monitor thread records it; the ratio
printed last is the median of the rounds' ratios. Per round: CPU of this process (the client
side: the map's client, or the session with its monitor), of the scheduler and of the
workers (with the processes they started), the monitor's cycles, and the load average.
With ``--task-map``, each round also maps the backend's own task function (what runs on a
worker for a subjob: the claim of its start at the scheduler, the watchdog, stdout and
stderr back in the result): the worker side of the job without the session's part
(holding the keys, polling, writing the outcomes); and maps it again with the claim left
out on the workers (``unclaimed``): what the claim of each start at the scheduler costs.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil


def echo_task(i: int, base: str) -> int:
    """What a subjob must do at least: a directory of its own, the program's stdout and
    stderr in files there."""
    work = tempfile.mkdtemp(prefix=f"{i}-", dir=base)
    with (
        open(os.path.join(work, "stdout"), "wb") as out,
        open(os.path.join(work, "stderr"), "wb") as err,
    ):
        return subprocess.run(
            ["/bin/echo", str(i)], cwd=work, stdout=out, stderr=err, check=False
        ).returncode


class Meter:
    """CPU seconds of this process, of the cluster's scheduler process and of its workers
    (every descendant, with the children they reaped)."""

    def __init__(self, scheduler_pid: int) -> None:
        self.me = psutil.Process()
        self.scheduler = psutil.Process(scheduler_pid)
        self.workers = self.scheduler.children(recursive=True)

    @staticmethod
    def _cpu(process: psutil.Process, children: bool) -> float:
        try:
            t = process.cpu_times()
        except psutil.NoSuchProcess:
            return 0.0
        own = t.user + t.system
        return own + (t.children_user + t.children_system if children else 0.0)

    def read(self) -> tuple[float, float, float]:
        return (
            self._cpu(self.me, False),
            self._cpu(self.scheduler, False),
            sum(self._cpu(w, True) for w in self.workers),
        )


def claims_on(on: bool, dask_worker: Any = None) -> None:
    """On a worker: the backend's task claims its programs' starts (``on``) or not (to
    measure what the claim costs; never so outside this benchmark)."""
    from ganga_like_dask import task

    real = vars(task).setdefault("_real_claim", task._claim)
    task._claim = real if on else (lambda key, start: lambda: None)  # type: ignore[assignment]


def timed(meter: Meter, run: Callable[[], Any]) -> tuple[float, tuple[float, ...]]:
    before = meter.read()
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    after = meter.read()
    return wall, tuple(a - b for a, b in zip(after, before, strict=True))


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--job-first", action="store_true", help="the job before the map")
    parser.add_argument(
        "--task-map", action="store_true", help="also a map of the backend's own task"
    )
    args = parser.parse_args()
    n = args.n
    tmp = Path(tempfile.mkdtemp(prefix="bench-dask-"))
    os.environ["GANGA_DIR"] = str(tmp / "gangadir")
    from distributed import Client

    from ganga_like import ArgSplitter, Dask, Executable, Job, config
    from ganga_like.runtime.session import close_session, current_session
    from ganga_like_dask import default_cluster

    session = current_session()
    config["Dask"]["idle_exit"] = 3600
    # Start the cluster before timing, as a user's second job would find it running.
    warm = Job(application=Executable(exe="/bin/true"), backend=Dask())
    warm.submit()
    assert warm.wait(timeout=300) == "completed"
    record = default_cluster.alive_record(tmp / "gangadir")
    assert record is not None
    client = Client(record.address, security=record.security(), set_as_default=False)
    info = client.scheduler_info()
    threads = sum(w["nthreads"] for w in info["workers"].values())
    meter = Meter(record.pid)
    print(
        f"subjobs: {n}, cluster: {len(info['workers'])} workers, {threads} threads "
        f"({record.address}), cores: {os.cpu_count()}"
    )

    def plain_map(base: Path) -> None:
        futures = client.map(echo_task, range(n), base=str(base), pure=False)
        codes = client.gather(futures)
        assert not any(codes)
        del futures

    def task_map(claim: bool = True) -> None:
        """The backend's own task (claim, watchdog, files back in the result) in a plain
        map: what the worker side costs, without holding, polling or writing outcomes;
        without ``claim``, the claim left out."""
        from ganga_like_dask import task

        client.run(claims_on, claim)

        token = f"{time.monotonic_ns()}"
        payloads = [
            {
                "key": f"bench-{token}-{i}",
                "argv": ["/bin/echo", str(i)],
                "env": {},
                "inputs": [],
                "output_patterns": [],
            }
            for i in range(n)
        ]
        futures = client.map(task.run, payloads, key=[p["key"] for p in payloads], pure=False)
        results = client.gather(futures)
        assert all(r["state"] == "completed" for r in results)
        del futures
        client.run(claims_on, True)

    def job() -> None:
        j = Job(
            application=Executable(exe="/bin/echo"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
            backend=Dask(),
        )
        started = time.perf_counter()
        j.submit()
        job.submitted = time.perf_counter() - started  # type: ignore[attr-defined]
        status = j.wait(timeout=3600)
        assert status == "completed", status

    ratios = []
    for number in range(1, args.rounds + 1):
        base = tmp / f"map-{number}"
        base.mkdir()
        cycles0, monitor0 = session.monitor.cycles, session.monitor.cpu_seconds
        order = ["job", "map"] if args.job_first else ["map", "job"]
        if args.task_map:
            order += ["task", "unclaimed"]
        figures: dict[str, tuple[float, tuple[float, ...], str]] = {}
        for what in order:
            before = load()
            run = {
                "job": job,
                "task": task_map,
                "unclaimed": functools.partial(task_map, False),
                "map": functools.partial(plain_map, base),
            }
            wall, cpu = timed(meter, run[what])
            figures[what] = (wall, cpu, before)
        cycles = session.monitor.cycles - cycles0
        monitor_cpu = session.monitor.cpu_seconds - monitor0
        map_wall, job_wall = figures["map"][0], figures["job"][0]
        ratios.append(job_wall / map_wall)
        print(
            f"round {number}: client.map {map_wall:.2f} s; ganga_like Dask, submit->completed "
            f"{job_wall:.2f} s (submit() {job.submitted:.2f} s); "  # type: ignore[attr-defined]
            f"ratio {job_wall / map_wall:.2f}"
            + (
                f"; the backend's task in a plain map {figures['task'][0]:.2f} s, ratio "
                f"{figures['task'][0] / map_wall:.2f}"
                if "task" in figures
                else ""
            )
            + (
                f"; without its claim {figures['unclaimed'][0]:.2f} s, ratio "
                f"{figures['unclaimed'][0] / map_wall:.2f}"
                if "unclaimed" in figures
                else ""
            )
        )
        for what in order:
            wall, (mine, sched, workers), before = figures[what]
            print(
                f"  {what:9}: CPU ms per task: client process {1000 * mine / n:.2f}, "
                f"scheduler {1000 * sched / n:.2f}, workers (+ what they ran) "
                f"{1000 * workers / n:.2f}; total {(mine + sched + workers) / wall:.2f} "
                f"cores over the wall; load before {before}"
            )
        print(f"  monitor: {cycles} cycles, {monitor_cpu:.2f} s CPU")
    print(f"ratio: {statistics.median(ratios):.2f} (median of {len(ratios)} rounds); load {load()}")
    client.close()
    close_session()
    default_cluster.stop_cluster(tmp / "gangadir")


if __name__ == "__main__":
    main()
