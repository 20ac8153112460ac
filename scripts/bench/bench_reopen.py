"""Reopen a repository of 1,000 jobs (one of them with 10,000 subjobs) in a fresh process.

    python scripts/bench/bench_reopen.py [GANGADIR]

Builds the repository once (in GANGADIR, default a temp dir): the big job really runs
/bin/true on Local through the real submit path, the 999 others are created and left new.
Then it starts fresh processes that
  1. open the repository and print the jobs table (time inside the process),
  2. iterate all 10,000 subjob statuses,
  3. report peak RSS with the 10,000-subjob job loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURE = r"""
import resource, time
t0 = time.perf_counter()
from ganga_like import jobs
t_import = time.perf_counter()
text = repr(jobs)
t_table = time.perf_counter()
big = jobs(0)
statuses = {}
for sj in big.subjobs:
    statuses[sj.status] = statuses.get(sj.status, 0) + 1
t_iter = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"rows printed: {text.count(chr(10)) - 2}")
print(f"import ganga_like: {t_import - t0:.3f} s")
print(f"open repository + jobs table (1,000 jobs): {t_table - t_import:.3f} s")
print(f"iterate 10,000 subjob statuses: {t_iter - t_table:.3f} s {statuses}")
print(f"peak RSS with the 10,000-subjob job loaded: {rss:.0f} MB")
"""


def build(gangadir: Path) -> None:
    os.environ["GANGA_DIR"] = str(gangadir)
    from ganga_like import ArgSplitter, Executable, Job
    from ganga_like.runtime.session import close_session

    big = Job(
        name="big",
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(10_000)]),
    )
    big.submit()
    for i in range(999):
        Job(name=f"small-{i}", application=Executable(exe="/bin/true", args=[str(i)]))
    big.wait(timeout=3600)
    close_session()


def main() -> None:
    gangadir = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(tempfile.mkdtemp(prefix="bench-reopen-")) / "gangadir"
    )
    if not (gangadir / "repository" / "Data.fs").exists():
        started = time.perf_counter()
        build(gangadir)
        print(f"built in {time.perf_counter() - started:.1f} s: {gangadir}")
    env = dict(os.environ, GANGA_DIR=str(gangadir))
    for attempt in range(3):
        print(f"--- fresh process {attempt + 1}")
        out = subprocess.run(
            [sys.executable, "-c", MEASURE], env=env, capture_output=True, text=True, check=True
        )
        print(out.stdout, end="")


if __name__ == "__main__":
    main()
