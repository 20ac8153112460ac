"""N `/bin/true` subjobs in ONE Slurm pilot, submit -> master completed, against the same
subjobs on Local with the same number of cores, in interleaved rounds.

    eval "$(bash scripts/start-slurm.sh)"
    python scripts/bench/bench_pilot.py [N] [--rounds R] [--cores C]

Each round submits a new job to a pilot (``Slurm(pilot=Pilot(cores=C))``) and then the
same job to ``Local`` (``max_concurrent`` = C), in one session with its monitor running as
a user's would (Slurm asked at most every 0.5 s), and times ``submit()`` until ``wait()``
returns "completed". The sbatch calls of each pilot are counted (1 is the goal). The ratio
printed last is the median of the rounds' pilot/Local ratios. The pilot's time includes
its wait in the Slurm queue and the start of its runner inside the allocation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    from ganga_like import ArgSplitter, Executable, Job, Local, Pilot, Slurm, config
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_slurm import slurm_commands

    if not slurm_commands.ping():
        sys.exit(
            f"no Slurm controller answers (SLURM_CONF={os.environ.get('SLURM_CONF')}); "
            'start one with: eval "$(bash scripts/start-slurm.sh)"'
        )
    cores = args.cores

    config.Local.max_concurrent = cores
    config.Slurm.poll_interval = 0.5
    gangadir = Path(tempfile.mkdtemp(prefix="bench-pilot-")) / "gangadir"
    open_session(Settings(gangadir=gangadir))
    slurm_commands.scontrol_show_partitions()  # warm the client (first-call costs are not ours)

    def run(backend: Any) -> tuple[float, float, int]:
        j = Job(
            application=Executable(exe="/bin/true"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(args.n)]),
            backend=backend,
        )
        before = slurm_commands.RUNNER.counts["sbatch"]
        started = time.perf_counter()
        j.submit()
        submitted = time.perf_counter() - started
        status = j.wait(timeout=1800)
        wall = time.perf_counter() - started
        if status != "completed":
            sys.exit(f"job {j.id} ended {status}")
        return wall, submitted, slurm_commands.RUNNER.counts["sbatch"] - before

    ratios = []
    print(f"{args.n} subjobs of /bin/true, {cores} cores, {args.rounds} round(s)")
    for number in range(1, args.rounds + 1):
        pilot, pilot_submit, sbatch = run(Slurm(pilot=Pilot(cores=cores, walltime="30")))
        local, local_submit, _ = run(Local())
        ratios.append(pilot / local)
        print(
            f"round {number}: pilot {pilot:.2f} s (submit() {pilot_submit:.2f} s, {sbatch} "
            f"sbatch), Local {local:.2f} s (submit() {local_submit:.2f} s), "
            f"ratio {pilot / local:.2f}x"
        )
    close_session()
    print(f"median ratio {statistics.median(ratios):.2f}x (budget <= 1.5x)")


if __name__ == "__main__":
    main()
