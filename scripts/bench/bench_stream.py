"""A streaming map of N subjobs on the Local backend, against the same two stages run by
hand one after the other.

    python scripts/bench/bench_stream.py [N] [--streamed-only]

Stage one is N subjobs that each write one ``.root`` file; stage two reads each file in a
subjob of its own. Streamed: ``JobOutput(one, "*.root", each=True)`` submitted just before
stage one, so each stage-two subjob is made and submitted as its file's subjob completes. By
hand: stage one is submitted and waited for, then stage two is submitted over its files
(``GangaDataset`` and ``DatasetSplitter(files_per_subjob=1)``) and waited for.

Prints both end-to-end times (submit to the last subjob's end) and, for the streamed run,
each stage-two subjob's delay from its upstream subjob's recorded end to its own
submission and to its start, in seconds and in the monitor's poll cycles (the run's wall
time over the cycles its monitor made): median, 95th percentile and worst.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TIMEOUT = 6 * 3600.0


def _stage_one(n: int) -> Any:
    from ganga_like import ArgSplitter, Executable, Job, LocalFile

    return Job(
        name="produce",
        application=Executable(exe="/bin/sh"),
        outputfiles=[LocalFile("*.root")],
        splitter=ArgSplitter(args=[["-c", f"echo {i} > part.root"] for i in range(n)]),
    )


def streamed(n: int) -> tuple[float, Any, int]:
    """Wall seconds of the streamed map, its downstream job, the monitor's cycles."""
    from ganga_like import Executable, Job, JobOutput
    from ganga_like.runtime.session import current_session

    monitor = current_session().monitor
    one = _stage_one(n)
    two = Job(
        name="consume",
        application=Executable(exe="/bin/sh", args=["-c", "cat $GANGA_INPUTDATA"]),
        inputdata=JobOutput(one, "*.root", each=True),
    )
    cycles, started = monitor.cycles, time.perf_counter()
    two.submit()  # first: it waits for every subjob of one, from the first to end
    one.submit()
    assert two.wait(timeout=TIMEOUT) == "completed", two.status
    return time.perf_counter() - started, two, monitor.cycles - cycles


def by_hand(n: int) -> float:
    """Wall seconds of the two stages run one after the other."""
    from ganga_like import DatasetSplitter, Executable, GangaDataset, Job

    one = _stage_one(n)
    started = time.perf_counter()
    one.submit()
    assert one.wait(timeout=TIMEOUT) == "completed", one.status
    files = [str(Path(sj.outputdir) / "part.root") for sj in one.subjobs]
    two = Job(
        name="consume by hand",
        application=Executable(exe="/bin/sh", args=["-c", "cat $GANGA_INPUTDATA"]),
        inputdata=GangaDataset(files=files),
        splitter=DatasetSplitter(files_per_subjob=1),
    )
    two.submit()
    assert two.wait(timeout=TIMEOUT) == "completed", two.status
    return time.perf_counter() - started


def delays(two: Any) -> tuple[list[float], list[float]]:
    """Per downstream subjob: seconds from its upstream subjob's end to its submission,
    and to its start."""
    from ganga_like import jobs

    to_submit, to_start = [], []
    for sj in two.subjobs:
        up_id, _, up_sub = sj.inputdata.source.partition(".")
        ended = jobs(int(up_id)).subjobs[int(up_sub)].time["completed"]
        times = sj.time
        to_submit.append((times["submitting"] - ended).total_seconds())
        to_start.append((times["running"] - ended).total_seconds())
    return to_submit, to_start


def _shown(values: list[float], cycle: float) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    median = statistics.median(ordered)
    return (
        f"median {median:.2f} s ({median / cycle:.1f} cycles), 95% {p95:.2f} s "
        f"({p95 / cycle:.1f}), worst {ordered[-1]:.2f} s ({ordered[-1] / cycle:.1f})"
    )


def main() -> None:
    sizes = [a for a in sys.argv[1:] if a.isdigit()]
    n = int(sizes[0]) if sizes else 10_000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-stream-")) / "gangadir"
    os.environ["GANGA_DIR"] = str(gangadir)
    from ganga_like.runtime.session import current_session
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    session = current_session()
    wall, two, cycles = streamed(n)
    cycle = wall / max(cycles, 1)
    print(f"streamed, {n} + {n} subjobs: {wall:.1f} s end to end ({cycles} monitor cycles)")
    to_submit, to_start = delays(two)
    print(f"  upstream end -> downstream submitted: {_shown(to_submit, cycle)}")
    print(f"  upstream end -> downstream running:   {_shown(to_start, cycle)}")
    if "--streamed-only" not in sys.argv:
        hand = by_hand(n)
        print(f"by hand, stage one then stage two: {hand:.1f} s ({hand / wall:.2f}x the streamed)")
    session.close()
    runner_client.stop(runner_dir(gangadir))


if __name__ == "__main__":
    main()
