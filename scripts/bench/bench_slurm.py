"""Submit a 1,000-subjob job to Slurm and monitor it: wall time and Slurm commands used.

    eval "$(bash scripts/start-slurm.sh)"
    python scripts/bench/bench_slurm.py [N] [--run]

Prints the wall time of submit() and the Slurm commands it ran (one sbatch is the goal),
then, with monitoring driven by hand, the commands and wall time of one poll cycle while
N subjobs are active (at most one squeue and one sacct is the goal). The subjobs sleep, so
they stay active; they are cancelled at the end, in one scancel. With --run they run
`true` instead and the time until all N completed is printed too.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 1000
    run = "--run" in sys.argv
    gangadir = Path(tempfile.mkdtemp(prefix="bench-slurm-")) / "gangadir"
    from ganga_like import ArgSplitter, Executable, Job, Slurm
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_slurm import commands

    if not commands.ping():
        sys.exit(
            f"no Slurm controller answers (SLURM_CONF={os.environ.get('SLURM_CONF')}); "
            'start one with: eval "$(bash scripts/start-slurm.sh)"'
        )
    # The monitor is driven by hand below, so each cycle can be measured.
    session = open_session(Settings(gangadir=gangadir, monitoring=False))

    exe = "/bin/true" if run else "/bin/sleep"
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[str(i)] if run else ["600"] for i in range(n)]),
        backend=Slurm(),
    )
    commands.scontrol_show_partitions()  # warm the client (first-call costs are not ours)
    before = commands.COMMAND_COUNTS.copy()
    started = time.perf_counter()
    j.submit()
    submit_wall = time.perf_counter() - started
    used = dict(commands.COMMAND_COUNTS - before)
    print(f"submit() of {n} subjobs: {submit_wall:.2f} s wall; Slurm commands: {used}")
    script = next((gangadir / "workspace" / str(j.id) / "slurm").glob("*.sh"))
    print(f"batch script: {script.stat().st_size / 1024:.0f} KiB, array {j.backend.id}")

    # The poll reports only changes; the first cycle reports every subjob once.
    monitor = session.monitor
    for label in ("first cycle (every subjob reported)", "steady cycle"):
        time.sleep(5.1)  # the backend's poll interval (5 s by default)
        before = commands.COMMAND_COUNTS.copy()
        cpu = monitor.cpu_seconds
        started = time.perf_counter()
        result = monitor.run_once()
        wall = time.perf_counter() - started
        used = dict(commands.COMMAND_COUNTS - before)
        print(
            f"{label}: {result.polled} active, {result.changed} changed, {wall:.2f} s wall, "
            f"{monitor.cpu_seconds - cpu:.2f} s CPU; Slurm commands: {used}"
        )

    if run:
        started = time.perf_counter()
        while j.status not in ("completed", "failed"):
            time.sleep(5.1)
            monitor.run_once()
            session.refresh()
        print(f"all {n} {j.status} {time.perf_counter() - started:.0f} s after the first cycles")
    else:
        before = commands.COMMAND_COUNTS.copy()
        started = time.perf_counter()
        j.kill()
        print(
            f"kill() of {n} subjobs: {time.perf_counter() - started:.2f} s wall; Slurm "
            f"commands: {dict(commands.COMMAND_COUNTS - before)}"
        )
    session.close()


if __name__ == "__main__":
    main()
