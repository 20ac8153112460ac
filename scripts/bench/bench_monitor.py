"""CPU the monitor spends applying 10,000 subjob status changes in one cycle.

    python scripts/bench/bench_monitor.py [N]

Submits N `/bin/true` subjobs on Local with the monitoring thread off, waits until the runner
has finished them all, then runs ONE monitoring cycle by hand: it reads the journal, moves
every subjob submitted -> running -> completed (two transitions each), updates the master's
counter and the active index, and commits. Prints the cycle's CPU time and per change.

Then it submits N `/bin/sleep` subjobs, which stay queued behind the concurrency limit, and
times cycles that find nothing new: the cost of following N subjobs, paid on every cycle
while a job runs.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 10_000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-monitor-")) / "gangadir"
    from ganga_like import ArgSplitter, Executable, Job
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_local.backend import JOURNAL, runner_dir
    from ganga_like_local.runner import client as runner_client

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
