"""Submit a 1,000-subjob job to Slurm and monitor it: wall time and Slurm commands used.

    eval "$(bash scripts/start-slurm.sh)"
    python scripts/bench/bench_slurm.py [N] [--run [--fixed]]

Prints the wall time of submit() and the Slurm commands it ran (one sbatch is the goal),
then, with monitoring driven by hand, the commands and wall time of one poll cycle while
N subjobs are active (at most one squeue and one sacct is the goal). The subjobs sleep, so
they stay active; they are cancelled at the end, in one scancel.

With --run, end to end as a user sees it: N subjobs running `/bin/true`, the monitor
thread on with the default settings, the wall time from just before submit() until wait()
returns with all N completed, against the span Slurm itself reports for the array
(sacct's first Start to last End, in whole seconds), and the Slurm commands used. With
--fixed the controller is asked every poll_interval whatever changes (min_poll_interval =
poll_interval: the rule before the adaptive gap), for comparison.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 1000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-slurm-")) / "gangadir"
    from ganga_like_slurm import slurm_commands

    if not slurm_commands.ping():
        sys.exit(
            f"no Slurm controller answers (SLURM_CONF={os.environ.get('SLURM_CONF')}); "
            'start one with: eval "$(bash scripts/start-slurm.sh)"'
        )
    if "--run" in sys.argv:
        end_to_end(n, gangadir, fixed="--fixed" in sys.argv)
    else:
        cycles(n, gangadir)


def cycles(n: int, gangadir: Path) -> None:
    """submit() and two poll cycles, driven by hand so each can be measured; then kill()."""
    from ganga_like import ArgSplitter, Executable, Job, Slurm
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_slurm import slurm_commands

    session = open_session(Settings(gangadir=gangadir, monitoring=False))
    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["600"] for _ in range(n)]),
        backend=Slurm(),
    )
    slurm_commands.scontrol_show_partitions()  # warm the client (first-call costs are not ours)
    before = slurm_commands.RUNNER.counts.copy()
    started = time.perf_counter()
    j.submit()
    submit_wall = time.perf_counter() - started
    used = dict(slurm_commands.RUNNER.counts - before)
    print(f"submit() of {n} subjobs: {submit_wall:.2f} s wall; Slurm commands: {used}")
    script = next((gangadir / "workspace" / str(j.id) / "slurm").glob("*.sh"))
    print(f"batch script: {script.stat().st_size / 1024:.0f} KiB, array {j.backend.id}")

    # The poll reports only changes; the first cycle reports every subjob once.
    monitor = session.monitor
    for label in ("first cycle (every subjob reported)", "steady cycle"):
        time.sleep(5.1)  # the backend's longest gap between queries (poll_interval, 5 s)
        before = slurm_commands.RUNNER.counts.copy()
        cpu = monitor.cpu_seconds
        started = time.perf_counter()
        result = monitor.run_once()
        wall = time.perf_counter() - started
        used = dict(slurm_commands.RUNNER.counts - before)
        print(
            f"{label}: {result.polled} active, {result.changed} changed, {wall:.2f} s wall, "
            f"{monitor.cpu_seconds - cpu:.2f} s CPU; Slurm commands: {used}"
        )

    before = slurm_commands.RUNNER.counts.copy()
    started = time.perf_counter()
    j.kill()
    print(
        f"kill() of {n} subjobs: {time.perf_counter() - started:.2f} s wall; Slurm "
        f"commands: {dict(slurm_commands.RUNNER.counts - before)}"
    )
    session.close()


def end_to_end(n: int, gangadir: Path, fixed: bool) -> None:
    """submit() -> all completed with the monitor thread on, against Slurm's own span."""
    from ganga_like import ArgSplitter, Executable, Job, Slurm, config
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_slurm import slurm_commands

    if fixed:
        config.Slurm.min_poll_interval = config.Slurm.poll_interval
    session = open_session(Settings(gangadir=gangadir))
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
        backend=Slurm(),
    )
    slurm_commands.scontrol_show_partitions()  # warm the client (first-call costs are not ours)
    trace = _trace_commands(slurm_commands.RUNNER)
    before = slurm_commands.RUNNER.counts.copy()
    monitor = session.monitor
    cycles, cpu = monitor.cycles, monitor.cpu_seconds
    started, started_at = time.perf_counter(), time.time()
    j.submit()
    submitted = time.perf_counter() - started
    status = j.wait(timeout=3600)
    wall = time.perf_counter() - started
    seen_at = time.time()
    used = dict(slurm_commands.RUNNER.counts - before)
    del slurm_commands.RUNNER.run  # the trace ends: the span's sacct below is ours
    cycles, cpu = monitor.cycles - cycles, monitor.cpu_seconds - cpu
    array = j.backend.id
    session.close()
    if status != "completed":
        sys.exit(f"the job ended {status}, not completed")
    rows = slurm_commands.sacct([array]).values()
    starts = [_when(r.start) for r in rows if r.start]
    ends = [_when(r.end) for r in rows if r.end]
    if len(ends) < n:
        sys.exit(f"sacct lists {len(ends)} ended elements of {n}")
    span = max(ends) - min(starts)
    print(
        f"{n} subjobs, submit -> all completed: {wall:.1f} s wall (submit() {submitted:.2f} s); "
        f"Slurm's span, first Start -> last End: {span:.0f} s; ratio {wall / span:.2f}x; "
        f"first Start {min(starts) - started_at:.1f} s after submit() began, completion seen "
        f"{seen_at - max(ends):.1f} s after the last End (sacct: whole seconds); "
        f"Slurm commands: {used}"
    )
    polls = sum(1 for call in trace if call[0] == "squeue")
    print(
        f"monitor: {cycles} cycles, {cpu:.1f} s CPU; {polls} polls (one squeue each), "
        f"per poll: {_per_poll(trace, polls)}"
    )
    _print_tail(trace, started_at, max(ends))


Call = tuple[str, float, float, int, str]  # program, start, seconds, output bytes, ids


def _trace_commands(runner: Any) -> list[Call]:
    """Record each command the runner runs: program, wall start, seconds, output bytes."""
    calls: list[Call] = []
    run = runner.run

    def traced(args: Any, **kwargs: Any) -> Any:
        began = time.time()
        result = run(args, **kwargs)
        asked = next((a[7:] for a in args if a.startswith("--jobs=")), "")
        calls.append((args[0], began, time.time() - began, len(result.stdout or ""), asked))
        return result

    runner.run = traced
    return calls


def _per_poll(trace: list[Call], polls: int) -> str:
    """Calls and seconds per poll, by program."""
    parts = []
    for program in sorted({call[0] for call in trace}):
        mine = [call for call in trace if call[0] == program]
        seconds = sum(call[2] for call in mine)
        parts.append(
            f"{program} {len(mine) / max(polls, 1):.2f} calls, {seconds / len(mine):.2f} s each "
            f"({max(call[3] for call in mine) / 1024:.0f} KiB output at most)"
        )
    return "; ".join(parts)


def _print_tail(trace: list[Call], began: float, last_end: float) -> None:
    """The commands around the last End: what the end waited for."""
    for program, at, seconds, size, asked in trace:
        if at > last_end - 12:
            print(
                f"  {program:7s} at {at - last_end:+6.1f} s from the last End "
                f"({at - began:7.1f} s after submit), {seconds:.2f} s, {size:,} bytes; "
                f"asked: {_shortened(asked)}"
            )


def _shortened(asked: str) -> str:
    ids = asked.split(",")
    return asked if len(ids) <= 3 else f"{','.join(ids[:3])},... ({len(ids)} ids)"


def _when(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


if __name__ == "__main__":
    main()
