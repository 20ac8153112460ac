"""The Grid Engine backend: its size against Slurm's, and 1,000 subjobs on a real Grid
Engine, as bench_slurm.py measures Slurm.

    eval "$(bash scripts/start-sge.sh)"
    python scripts/bench/bench_sge.py [N] [--run]
    python scripts/bench/bench_sge.py --lines

--lines: the lines of the SGE plugin against the Slurm plugin's (all of it, and without
its pilot), every line of each file and the non-blank ones.

Without --run: the wall time of submit() of N subjobs and the Grid Engine commands it ran
(one qsub is the goal), then, with monitoring driven by hand, the commands and wall time
of one poll cycle while N subjobs are active (one qstat is the goal), then kill() (one
qdel). The subjobs sleep, so they stay active.

With --run, end to end as a user sees it: N subjobs running `/bin/true`, the monitor
thread on with the default settings, the wall time from just before submit() until wait()
returns with all N completed, against the span Grid Engine itself reports for the array
(qacct's first start_time to last end_time, in whole seconds), and the commands used.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 1000
    if "--lines" in sys.argv:
        lines()
        return
    if subprocess.run(["qstat"], capture_output=True, timeout=60).returncode != 0:
        sys.exit(
            'no Grid Engine qmaster answers; start one with: eval "$(bash scripts/start-sge.sh)"'
        )
    gangadir = Path(tempfile.mkdtemp(prefix="bench-sge-")) / "gangadir"
    if "--run" in sys.argv:
        end_to_end(n, gangadir)
    else:
        cycles(n, gangadir)


def _count(paths: list[Path]) -> tuple[int, int]:
    texts = [p.read_text().splitlines() for p in paths]
    return sum(map(len, texts)), sum(1 for t in texts for line in t if line.strip())


def lines() -> None:
    sge = sorted((ROOT / "plugins" / "ganga_like_sge").glob("*.py"))
    slurm = sorted((ROOT / "plugins" / "ganga_like_slurm").glob("*.py"))
    base = sorted((ROOT / "ganga_like" / "batch").glob("*.py"))
    for label, paths in (
        ("SGE plugin", sge),
        ("Slurm plugin", slurm),
        ("Slurm plugin without its pilot", [p for p in slurm if not p.name.startswith("pilot")]),
        ("batch base (shared)", base),
    ):
        total, non_blank = _count(paths)
        print(f"{label}: {total} lines ({non_blank} non-blank) in {len(paths)} files")
    for path in sge:
        print(f"  {path.name}: {_count([path])[0]}")


def cycles(n: int, gangadir: Path) -> None:
    """submit() and two poll cycles, driven by hand so each can be measured; then kill()."""
    from ganga_like import SGE, ArgSplitter, Executable, Job
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_sge.scheduler import SCHEDULER

    session = open_session(Settings(gangadir=gangadir, monitoring=False))
    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["600"] for _ in range(n)]),
        backend=SGE(),
    )
    before = SCHEDULER.counts.copy()
    started = time.perf_counter()
    j.submit()
    submit_wall = time.perf_counter() - started
    print(
        f"submit() of {n} subjobs: {submit_wall:.2f} s wall; Grid Engine commands: "
        f"{dict(SCHEDULER.counts - before)}"
    )
    monitor = session.monitor
    for label in ("first cycle (every subjob reported)", "steady cycle"):
        time.sleep(5.1)  # the backend's longest gap between queries (poll_interval, 5 s)
        before = SCHEDULER.counts.copy()
        cpu = monitor.cpu_seconds
        started = time.perf_counter()
        result = monitor.run_once()
        wall = time.perf_counter() - started
        print(
            f"{label}: {result.polled} active, {result.changed} changed, {wall:.2f} s wall, "
            f"{monitor.cpu_seconds - cpu:.2f} s CPU; commands: {dict(SCHEDULER.counts - before)}"
        )
    before = SCHEDULER.counts.copy()
    started = time.perf_counter()
    j.kill()
    print(
        f"kill() of {n} subjobs: {time.perf_counter() - started:.2f} s wall; commands: "
        f"{dict(SCHEDULER.counts - before)}"
    )
    session.close()


def end_to_end(n: int, gangadir: Path) -> None:
    """submit() -> all completed with the monitor thread on, against Grid Engine's span."""
    from ganga_like import SGE, ArgSplitter, Executable, Job
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_sge.scheduler import SCHEDULER

    session = open_session(Settings(gangadir=gangadir))
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
        backend=SGE(),
    )
    before = SCHEDULER.counts.copy()
    started, started_at = time.perf_counter(), time.time()
    j.submit()
    submitted = time.perf_counter() - started
    status = j.wait(timeout=3600)
    wall = time.perf_counter() - started
    seen_at = time.time()
    used = dict(SCHEDULER.counts - before)
    array = j.backend.id
    session.close()
    if status != "completed":
        sys.exit(f"the job ended {status}, not completed")
    output = subprocess.run(
        ["qacct", "-j", array], capture_output=True, text=True, check=True
    ).stdout
    starts = [_when(t) for t in re.findall(r"^start_time\s+(.+?)\s*$", output, re.MULTILINE)]
    ends = [_when(t) for t in re.findall(r"^end_time\s+(.+?)\s*$", output, re.MULTILINE)]
    if len(ends) < n:
        sys.exit(f"qacct lists {len(ends)} ended tasks of {n}")
    span = max(ends) - min(starts)
    print(
        f"{n} subjobs, submit -> all completed: {wall:.1f} s wall (submit() {submitted:.2f} s); "
        f"Grid Engine's span, first start_time -> last end_time: {span:.0f} s; ratio "
        f"{wall / span:.2f}x; first start {min(starts) - started_at:.1f} s after submit() "
        f"began, completion seen {seen_at - max(ends):.1f} s after the last end (qacct: "
        f"whole seconds); commands: {used}; {SCHEDULER.label} array {array}"
    )


def _when(text: str) -> float:
    return time.mktime(time.strptime(text, "%a %b %d %H:%M:%S %Y"))


if __name__ == "__main__":
    main()
