"""What one refresh of ``ganga top`` costs in a repository of 1,000 jobs and 10,000
subjobs, while another process changes it.

    python scripts/bench/bench_top.py [--jobs 1000] [--masters 10] [--subjobs 1000]

Builds, through the model and registry directly, ``--jobs`` top-level jobs: ``--masters``
masters of ``--subjobs`` subjobs each, still running (a fifth of their subjobs ended), and
the rest unsplit jobs that completed long ago. Then, in a fresh process with a session in
the default (shared) mode, times what ``ganga top``'s reading thread does each pass (a
round trip to the server, a new transaction, the board, the number of jobs): the first
pass, and passes after another process moved ten subjobs of each master on (its commit
seen by the reader); then the stats of the one job open on the screen (a master: one
pass over its subjobs); and, for comparison, reading every job's row as ``ganga jobs`` does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURE = r"""
import statistics, subprocess, sys, time
from pathlib import Path
from ganga_like.runtime.session import open_session, close_session
from ganga_like.runtime.settings import Settings
from ganga_like.runtime.stats import job_stats
from ganga_like.commands.top_source import read_board
from ganga_like.gpi.job_table import job_row

gangadir, masters, mover = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
session = open_session(Settings(gangadir=Path(gangadir), monitoring=False))

def one_pass():
    t0 = time.perf_counter()
    rows, total = read_board(session, time.time(), 600.0, set())
    return time.perf_counter() - t0, rows, total

took, rows, total = one_pass()
print(f"first pass: {1000 * took:7.1f} ms  ({len(rows)} rows of {total} jobs)")
passes = []
for step in range(5):
    subprocess.run(mover + [str(step)], check=True)  # another process commits a change
    took, rows, _ = one_pass()
    passes.append(took)
ms = [1000 * t for t in passes]
print(f"pass after another process's commit: median {statistics.median(ms):.1f} ms, "
      f"max {max(ms):.1f} ms (5 passes)")
quiet = [one_pass()[0] * 1000 for _ in range(20)]
print(f"pass with nothing changed: median {statistics.median(quiet):.2f} ms (20 passes)")
master = session.registry().get(rows[0].job_id)
for label in ("first", "again"):
    t0 = time.perf_counter()
    s = job_stats([master], "job")
    print(f"stats of the open job ({s.total} subjobs), {label}: "
          f"{1000 * (time.perf_counter() - t0):.1f} ms")
t0 = time.perf_counter()
every = [job_row(j) for j in session.registry().jobs.values()]
print(f"for comparison, every job's row (ganga jobs' read): "
      f"{1000 * (time.perf_counter() - t0):.1f} ms ({len(every)} rows)")
close_session()
"""

# Another process: moves ten more subjobs of each running master from running to
# completed, in one commit (as a monitor cycle would).
MOVE = r"""
import sys, time
from pathlib import Path
from ganga_like.model.status import Status
from ganga_like.runtime.session import open_session, close_session
from ganga_like.runtime.settings import Settings

gangadir, ids = sys.argv[1], [int(i) for i in sys.argv[2].split(",")]
session = open_session(Settings(gangadir=Path(gangadir), monitoring=False))
registry = session.registry()
for job_id in ids:
    master = registry.get(job_id)
    running = [sj for sj in master.iter_subjobs() if sj.status == "running"][:10]
    for sj in running:
        sj.change_status(Status.COMPLETED, "bench: completed", when=time.time())
session.repo.commit()
close_session()
"""


def build(gangadir: Path, jobs: int, masters: int, subjobs: int) -> list[int]:
    from ganga_like.model.job import Job
    from ganga_like.model.status import Status
    from ganga_like.repository.connection import Repository

    repo = Repository(gangadir)
    registry = repo.registry()
    tm = repo.connection().transaction_manager
    now = time.time()
    for i in range(jobs - masters):
        job = Job(name=f"done-{i}")
        registry.add(job)
        for status in (Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETED):
            job.change_status(status, "bench", when=now - 86400 + i)
        registry.reindex(job)
        if i % 200 == 0:
            tm.commit()
    live = []
    for m in range(masters):
        master = Job(name=f"running-{m}")
        registry.add(master)
        master.change_status(Status.SUBMITTING, "bench", when=now - 600)
        children = [Job.new_subjob(master, i) for i in range(subjobs)]
        for sj in children:
            sj.backend = master.backend
        master.attach_subjobs(children)
        for i, sj in enumerate(children):
            sj.change_status(Status.SUBMITTED, "Local: submitted", when=now - 600)
            if i < subjobs // 2:
                sj.change_status(Status.RUNNING, "Local: running", when=now - 500)
            if i < subjobs // 5:
                sj.change_status(Status.COMPLETED, "Local: completed", when=now - 400 + i / 10)
        master.change_status(Status.SUBMITTED, "bench", when=now - 600)
        registry.reindex(master)
        tm.commit()
        live.append(master.id)
    repo.close()
    return live


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--masters", type=int, default=10)
    parser.add_argument("--subjobs", type=int, default=1000)
    args = parser.parse_args()
    gangadir = Path(tempfile.mkdtemp(prefix="bench-top-")) / "gangadir"
    started = time.perf_counter()
    live = build(gangadir, args.jobs, args.masters, args.subjobs)
    print(
        f"built {args.jobs} jobs, {args.masters} running masters of {args.subjobs} subjobs, "
        f"in {time.perf_counter() - started:.1f} s"
    )
    env = dict(os.environ, GANGA_DIR=str(gangadir))
    ids = ",".join(map(str, live))
    mover = [sys.executable, "-c", MOVE, str(gangadir)]
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(gangadir), str(args.masters), *mover, ids],
        env=env,
        capture_output=True,
        text=True,
    )
    print(out.stdout, end="")
    if out.returncode:
        print(out.stderr, end="", file=sys.stderr)
        raise SystemExit(out.returncode)


if __name__ == "__main__":
    main()
