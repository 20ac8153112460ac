"""``j.time`` (``Job.times()``) of an in-memory master of many subjobs.

    python scripts/bench/bench_times.py [--subjobs N] [--rounds R] [--before CHECKOUT]

A master of N subjobs (default 100,000), built with the model alone (no repository, a
controlled clock): every subjob submitted, run and ended, one in ten failed then
resubmitted and completed. Each fresh process builds it, then times ``times()`` 7 times
and prints the median. ``--before CHECKOUT`` runs the same on the ``ganga_like`` of another
checkout, interleaved round by round (R rounds, default 3), and prints the medians of both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

MEASURE = r"""
import statistics, sys, time, types
from unittest import mock

from ganga_like.model import job as job_module
from ganga_like.model.job import Job
from ganga_like.model.status import Status

n = int(sys.argv[1])
clock = [1_800_000_000.0]


def now():
    clock[0] += 0.001
    return clock[0]


with mock.patch.object(job_module, "_time", types.SimpleNamespace(time=now)):
    m = Job()
    m.change_status(Status.SUBMITTING, "user: submit")
    subs = [Job.new_subjob(m, i) for i in range(n)]
    m.attach_subjobs(subs)
    for sj in subs:
        sj.change_status(Status.SUBMITTED, "user: submit")
    m.change_status(Status.SUBMITTED, "user: submit")
    for i, sj in enumerate(subs):
        sj.change_status(Status.RUNNING, "backend")
        sj.change_status(Status.FAILED if i % 10 == 0 else Status.COMPLETED, "backend")
    m.indexed_as(m.current_status().label)
    m.log_event("user: resubmit")
    for sj in subs[::10]:
        for s in (Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETED):
            sj.change_status(s, "backend")
    m.indexed_as(m.current_status().label)
runs = []
for _ in range(7):
    t0 = time.perf_counter()
    m.times()
    runs.append(time.perf_counter() - t0)
print(statistics.median(runs) * 1000)
"""


def _run(checkout: Path | None, subjobs: int) -> float:
    env = dict(os.environ)
    if checkout is not None:  # its ganga_like first on the path
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(subjobs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjobs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout, measured in turn")
    args = parser.parse_args()
    sides: dict[str, list[float]] = {"after": []}
    if args.before is not None:
        sides["before"] = []
    for round_ in range(args.rounds):
        order = list(sides) if round_ % 2 == 0 else list(reversed(sides))  # neither always first
        for side in order:
            checkout = args.before if side == "before" else None
            sides[side].append(_run(checkout, args.subjobs))
            print(f"round {round_ + 1} {side}: {sides[side][-1]:.1f} ms", flush=True)
    for side, times in sides.items():
        shown = ", ".join(f"{ms:.1f}" for ms in times)
        print(f"{side}: median {statistics.median(times):.1f} ms of {shown}")
    with open("/proc/loadavg") as load:
        print("load:", load.read().strip())


if __name__ == "__main__":
    main()
