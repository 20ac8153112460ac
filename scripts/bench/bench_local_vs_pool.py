"""1,000 `/bin/echo` subjobs on Local, from submit() to master completed, against a plain
Python subprocess pool of the same concurrency, in the same run; plus CPU per subjob.

    python scripts/bench/bench_local_vs_pool.py [N] [--rounds R]

Each of the R rounds (default 3) times the pool and then a new job, so that both meet the
same state of the machine (file creation costs on some disks vary by 10x from one minute to
the next: see ``fs_probe.py``, whose figure each round prints first); the ratio printed last
is the median of the rounds' ratios.  Nothing is deleted, for the same reason.  CPU per
subjob counts the submitting process (with its monitor thread), the runner and the
repository's server, and the submitting process's threads apart; the echo processes
themselves are printed apart too (they cost the same in both).  Run from outside a checkout
with ``PYTHONPATH=SRC:SRC/plugins`` it measures the code in SRC (an older commit's too).
The share of the machine's CPU left idle during each (from /proc/stat, Linux only) tells a
run held back by waiting from one held back by work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from fs_probe import describe


def cpu_ticks() -> tuple[int, int] | None:
    """(idle, total) clock ticks of the whole machine so far, or None without /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + fields[4], sum(fields)  # idle + iowait


def idle_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> str:
    if before is None or after is None or after[1] == before[1]:
        return "n/a"
    return f"{100 * (after[0] - before[0]) / (after[1] - before[1]):.0f}%"


def plain_pool(n: int, workers: int, outdir: Path) -> float:
    """The reference: a thread per slot, each task a directory of its own holding its
    stdout and stderr, written by ``subprocess``."""

    def run(i: int) -> int:
        taskdir = os.path.join(outdir, str(i))
        os.mkdir(taskdir)
        with (
            open(os.path.join(taskdir, "stdout"), "wb") as out,
            open(os.path.join(taskdir, "stderr"), "wb") as err,
        ):
            return subprocess.run(["/bin/echo", str(i)], stdout=out, stderr=err).returncode

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        codes = list(pool.map(run, range(n)))
    assert not any(codes)
    return time.perf_counter() - started


def cpu_of(process: psutil.Process | None, children: bool = False) -> float:
    """User + system CPU seconds of a process itself (or of its reaped children)."""
    if process is None:
        return 0.0
    times = process.cpu_times()
    if children:
        return float(times.children_user + times.children_system)
    return float(times.user + times.system)


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system, as the kernel counts them) of each living thread of
    this process, with its role: the main thread (submit() and wait()), the monitor, the
    repository client's I/O thread, or other."""
    roles = {}
    for thread in threading.enumerate():
        name = thread.name
        role = (
            "main"
            if thread is threading.main_thread()
            else "monitor"
            if "monitor" in name
            else "client I/O"
            if "zeo client networking" in name
            else "other"
        )
        roles[thread.native_id] = role
    return {
        thread.id: (roles.get(thread.id, "other"), thread.user_time + thread.system_time)
        for thread in psutil.Process().threads()
    }


def thread_cpu_since(before: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU per role spent since ``before`` by the threads living now (a thread that
    ended meanwhile, such as the pool's, is not counted)."""
    spent = dict.fromkeys(("main", "monitor", "client I/O", "other"), 0.0)
    for tid, (role, cpu) in thread_cpu().items():
        spent[role] += cpu - before.get(tid, (role, 0.0))[1]
    return spent


def repository_server(gangadir: Path) -> psutil.Process | None:
    """The repository's server process (default mode), None when embedded: the pid its
    ``zeo.pid`` names (read here, so that the script also measures older checkouts)."""
    try:
        pid = int((gangadir / "repository" / "zeo.pid").read_text().split()[0])
        return psutil.Process(pid)
    except (OSError, ValueError, IndexError, psutil.Error):
        return None


def runner_functions() -> tuple[Any, Any, Any]:
    """runner_dir, runner_pid and stop, from wherever the code measured keeps them (the
    runner was a module of the Local plugin before it became a plugin of its own)."""
    from ganga_like_local.backend import runner_dir

    try:
        from ganga_like_runner.client import runner_pid, stop
    except ImportError:
        from ganga_like_local.runner.launch import (  # type: ignore[no-redef]
            runner_pid,
            stop,
        )
    return runner_dir, runner_pid, stop


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--skip-pool", action="store_true", help="the job alone: its CPU per subjob, no ratio"
    )
    args = parser.parse_args()
    n = args.n
    workers = os.cpu_count() or 1
    tmp = Path(tempfile.mkdtemp(prefix="bench-local-"))
    os.environ["GANGA_DIR"] = str(tmp / "gangadir")
    from ganga_like import ArgSplitter, Executable, Job, Local, config
    from ganga_like.runtime.session import close_session, current_session

    runner_dir, runner_pid, stop_runner = runner_functions()

    session = current_session()
    # The runner must outlive the pool's turn (100,000 echoes take a minute or more), or
    # the next round's job would start a new one and its CPU would go uncounted.
    config["Local"]["idle_exit"] = 3600
    # Start the runner before timing, as a user's second job would find it running.
    warm = Job(application=Executable(exe="/bin/true"), backend=Local())
    warm.submit()
    warm.wait(timeout=60)
    rdir = runner_dir(tmp / "gangadir")
    runner = psutil.Process(runner_pid(rdir))
    server = repository_server(tmp / "gangadir")
    me = psutil.Process()
    import ganga_like

    print(f"subjobs: {n}, concurrency: {workers}; code: {Path(ganga_like.__file__).parent.parent}")
    ratios, own_per_subjob = [], []
    for round_number in range(1, args.rounds + 1):
        outdir = tmp / f"pool-{round_number}"
        outdir.mkdir()
        print(f"round {round_number}: {describe(tmp)}")
        ticks0, pool_cpu0 = cpu_ticks(), cpu_of(me)
        pool_wall = float("nan") if args.skip_pool else plain_pool(n, workers, outdir)
        pool_idle = idle_share(ticks0, cpu_ticks())
        pool_cpu = cpu_of(me) - pool_cpu0

        threads0 = thread_cpu()
        cpu0 = {"submit": cpu_of(me), "runner": cpu_of(runner), "server": cpu_of(server)}
        runner_system0 = runner.cpu_times().system
        children0 = cpu_of(runner, children=True)
        cycles0 = session.monitor.cycles
        j = Job(
            application=Executable(exe="/bin/echo"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
            backend=Local(),
        )
        ticks0 = cpu_ticks()
        started = time.perf_counter()
        j.submit()
        status = j.wait(timeout=3600)
        ganga_wall = time.perf_counter() - started
        job_idle = idle_share(ticks0, cpu_ticks())
        spent = {
            "submit": cpu_of(me) - cpu0["submit"],
            "runner": cpu_of(runner) - cpu0["runner"],
            "server": cpu_of(server) - cpu0["server"],
        }
        children = cpu_of(runner, children=True) - children0
        runner_system = runner.cpu_times().system - runner_system0
        assert status == "completed", status
        threads = thread_cpu_since(threads0)
        # The monitor thread's CPU as the kernel counts it: the monitor's own count of its
        # cycles adds a cycle once it is over, after the commit that wait() returns on, so
        # the last cycle (a large share when cycles are few and long) would be missing.
        monitor_cpu = threads["monitor"]
        cycles = session.monitor.cycles - cycles0
        own = sum(spent.values())
        own_per_subjob.append(1000 * own / n)
        ratios.append(ganga_wall / pool_wall)
        print(
            f"round {round_number}: plain subprocess pool {pool_wall:.2f} s wall; "
            f"ganga_like Local, submit->completed {ganga_wall:.2f} s wall; "
            f"ratio {ganga_wall / pool_wall:.2f}"
        )
        print(
            f"  CPU per subjob: submitting process + monitor {1000 * spent['submit'] / n:.2f} ms "
            f"(monitor {1000 * monitor_cpu / n:.2f}), runner {1000 * spent['runner'] / n:.2f} ms "
            f"({1000 * runner_system / n:.2f} of it in the kernel), "
            f"repository server {1000 * spent['server'] / n:.2f} ms, "
            f"total {1000 * own / n:.2f} ms; the pool's own {1000 * pool_cpu / n:.2f} ms "
            f"(the echo processes themselves: {1000 * children / n:.2f} ms); "
            f"monitor: {cycles} cycles"
        )
        print(
            "  the submitting process's threads, CPU per subjob: "
            + ", ".join(f"{role} {1000 * cpu / n:.2f} ms" for role, cpu in threads.items())
        )
        print(f"  CPU left idle: pool {pool_idle}, ganga_like {job_idle}")
    print(
        f"the project's CPU per subjob: median {statistics.median(own_per_subjob):.2f} ms "
        f"(rounds {', '.join(f'{v:.2f}' for v in own_per_subjob)})"
    )
    print(f"ratio: {statistics.median(ratios):.2f} (median of {len(ratios)} rounds)")
    close_session()
    stop_runner(rdir)


if __name__ == "__main__":
    main()
