"""CPU the monitor spends applying 10,000 subjob status changes in one cycle.

    python scripts/bench/bench_monitor.py [N]
    python scripts/bench/bench_monitor.py --active [N,N,...] [--before CHECKOUT]

Submits N `/bin/true` subjobs on Local with the monitoring thread off, waits until the runner
has finished them all, then runs ONE monitoring cycle by hand: it reads the journal, moves
every subjob submitted -> running -> completed (two transitions each), updates the master's
counter and the active index, and commits. Prints the cycle's CPU time and per change.

Then it submits N `/bin/sleep` subjobs, which stay queued behind the concurrency limit, and
times cycles that find nothing new: the cost of following N subjobs, paid on every cycle
while a job runs.

``--active`` measures what following many subjobs costs (default N = 1,000, 10,000 and
100,000, each in a fresh process): one job of N subjobs on Local with max_concurrent 2,
whose first 200 run `sleep 0.3` and the rest `sleep 900`, so that N stay active throughout.
It reports the monitor thread's CPU per status change while the 200 short ones end (cycles
every 50 ms, as the monitoring thread runs them) and per cycle once nothing changes, and of
the cycle after another session (here the session's own connection) killed one of them
(median of 10).
``--passes`` times, in an empty repository, each pass the lease holder runs after every
cycle (the workflows' callbacks, waiting jobs, throttles) and a whole cycle that finds
nothing: what monitoring costs before any job exists.
``--before CHECKOUT`` also runs it on the code of another checkout (e.g. a `git worktree`
of main) and prints both.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHORT = 200  # subjobs that end quickly while the rest stay active


def active(n: int) -> None:
    """One line of figures for N followed subjobs (run in its own process)."""
    gangadir = Path(tempfile.mkdtemp(prefix="bench-monitor-")) / "gangadir"
    from ganga_like import ArgSplitter, Executable, Job, config
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    config.Local.max_concurrent = 2
    config.Local.idle_exit = 60
    session = open_session(Settings(gangadir=gangadir, monitoring=False))
    monitor = session.monitor
    args = [["0.3"]] * SHORT + [["900"]] * (n - SHORT)
    j = Job(application=Executable(exe="/bin/sleep"), splitter=ArgSplitter(args=args))
    started = time.perf_counter()
    j.submit()
    submit_s = time.perf_counter() - started
    first = monitor.run_once()  # reads the whole active index: timed on its own
    first_cpu = monitor.cpu_seconds
    cpu0, finished = monitor.cpu_seconds, 0
    deadline = time.monotonic() + 600
    while first.finished + finished < SHORT and time.monotonic() < deadline:
        finished += monitor.run_once().finished
        time.sleep(0.05)
    for _ in range(3):
        monitor.run_once()  # the last started events
        time.sleep(0.05)
    # Each short subjob ended after the first cycle went running, then completed.
    changes = max(2 * finished, 1)
    per_change = (monitor.cpu_seconds - cpu0) / changes
    cycles = 20
    cpu0 = monitor.cpu_seconds
    for _ in range(cycles):
        monitor.run_once()
        time.sleep(0.05)
    quiet = (monitor.cpu_seconds - cpu0) / cycles
    # Another connection (the session's) kills one subjob: the next cycle must notice it.
    after_other = []
    for i in range(10):
        j.subjobs[n - 1 - i].kill()
        cpu0 = monitor.cpu_seconds
        monitor.run_once()
        after_other.append(monitor.cpu_seconds - cpu0)
    assert monitor.view.backends["Local"].get(j.id, n - 1) is None
    other_cpu = statistics.median(after_other)
    print(
        f"N={n:>7,}: quiet cycle {1000 * quiet:8.2f} ms CPU; "
        f"{1000 * per_change:6.2f} ms CPU per status change ({changes} changes); "
        f"first cycle {1000 * first_cpu:.0f} ms CPU; "
        f"after another session killed 1: {1000 * other_cpu:.2f} ms CPU; submit {submit_s:.0f} s",
        flush=True,
    )
    runner_client.stop(runner_dir(gangadir))  # its running tasks are left running:
    close_session()
    for proc in Path("/proc").iterdir():  # end them (every process working in the gangadir)
        try:
            if proc.name.isdigit() and (proc / "cwd").readlink().is_relative_to(gangadir):
                os.kill(int(proc.name), 15)
        except OSError:
            pass


def passes(rounds: int = 400) -> None:
    """CPU per call of each pass after the cycle, and of a whole cycle, with no job."""
    import ganga_like.runtime.workflow.driver  # noqa: F401 (registers the workflows' passes)
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings

    gangadir = Path(tempfile.mkdtemp(prefix="bench-monitor-")) / "gangadir"
    monitor = open_session(Settings(gangadir=gangadir, monitoring=False)).monitor
    for _ in range(50):
        monitor.run_once()  # warmed up: connections open, lease held
    for name, run in monitor._passes:
        cpu0 = time.thread_time()
        for _ in range(rounds):
            run()
        print(f"pass {name}: {1e6 * (time.thread_time() - cpu0) / rounds:.0f} us CPU")
    cpu0 = time.thread_time()
    for _ in range(rounds):
        monitor.run_once()
    print(f"a cycle with no job: {1e6 * (time.thread_time() - cpu0) / rounds:.0f} us CPU")
    close_session()


def compare(sizes: list[int], before: str | None) -> None:
    here = Path(__file__).resolve()
    runs = [("after", os.environ.copy())]
    if before:
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(
            [before, os.path.join(before, "plugins"), env.get("PYTHONPATH", "")]
        )
        runs.insert(0, ("before", env))
    for label, env in runs:
        print(f"{label}:", flush=True)
        for n in sizes:
            subprocess.run([sys.executable, str(here), "--active-one", str(n)], env=env, check=True)


def main() -> None:
    if "--active-one" in sys.argv:
        active(int(sys.argv[sys.argv.index("--active-one") + 1]))
        return
    if "--passes" in sys.argv:
        passes()
        return
    if "--active" in sys.argv:
        rest = sys.argv[sys.argv.index("--active") + 1 :]
        sizes = [1_000, 10_000, 100_000]
        if rest and not rest[0].startswith("--"):
            sizes = [int(x) for x in rest[0].split(",")]
        before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
        compare(sizes, before)
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 10_000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-monitor-")) / "gangadir"
    from ganga_like import ArgSplitter, Executable, Job
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_local.backend import JOURNAL, runner_dir
    from ganga_like_runner import client as runner_client

    session = open_session(Settings(gangadir=gangadir, monitoring=False))
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
    )
    j.submit()
    journal = session.repo.workspace / str(j.id) / JOURNAL
    while True:
        events, _ = runner_client.read_events(journal, 0) if journal.exists() else ([], 0)
        if sum(e.event in ("completed", "failed") for e in events) >= n:
            break
        time.sleep(0.5)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if "--profile" in sys.argv:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        result = profile.runcall(session.monitor.run_once)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    else:
        result = session.monitor.run_once()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert j.status == "completed", j.status
    transitions = sum(len(sj.history) - 1 for sj in j.subjobs)
    print(
        f"one cycle: {result.changed} backend reports applied, {n} subjobs, "
        f"{transitions} status changes"
    )
    print(
        f"CPU {cpu:.2f} s: {1e6 * cpu / transitions:.0f} us per status change "
        f"(10,000 changes: {1e4 * cpu / transitions:.2f} s); wall {wall:.2f} s"
    )
    idle_cycle(session, n)
    close_session()
    runner_client.stop(runner_dir(gangadir))


def idle_cycle(session: Any, n: int, cycles: int = 20) -> None:
    """CPU of a cycle that finds nothing new while ``n`` subjobs are followed."""
    from ganga_like import ArgSplitter, Executable, Job

    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["600"] for _ in range(n)]),
    )
    j.submit()
    time.sleep(0.5)
    session.monitor.run_once()  # takes the "started" events of the first subjobs
    cpu0 = time.process_time()
    for _ in range(cycles):
        session.monitor.run_once()
    cpu = (time.process_time() - cpu0) / cycles
    print(f"a cycle with {n} subjobs followed and nothing new: {1000 * cpu:.2f} ms CPU")
    j.kill()


if __name__ == "__main__":
    main()
