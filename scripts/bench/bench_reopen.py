"""Reopen a repository of 1,000 jobs (one of them with many subjobs) in a fresh process.

    python scripts/bench/bench_reopen.py [GANGADIR] [--subjobs N] [--rounds R] [--before CHECKOUT]

Builds the repository once (in GANGADIR, default a temp dir): the big job (N subjobs,
default 10,000) really runs /bin/true on Local through the real submit path and is waited
for; above 10,000 subjobs it is killed right after submit() instead (its subjobs end
``killed``: what is measured is reading them, not running them). The 999 others are
created and left new. Then, R times (default 3), fresh processes that
  1. open the repository and print the jobs table (time inside the process),
  2. read every subjob's status (``[s.status for s in j.subjobs]``),
  3. report peak RSS.
``--before CHECKOUT`` runs the same in turn on the code of another checkout, on a copy of
the repository (each keeps its own client cache), and prints the medians of both.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
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
statuses = [s.status for s in big.subjobs]
t_iter = time.perf_counter()
counts = {}
for label in statuses:
    counts[label] = counts.get(label, 0) + 1
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"rows printed: {text.count(chr(10)) - 2}")
print(f"import ganga_like: {t_import - t0:.3f} s")
print(f"open repository + jobs table: {t_table - t_import:.3f} s")
print(f"read {len(statuses):,} subjob statuses: {t_iter - t_table:.3f} s {counts}")
print(f"peak RSS: {rss:.0f} MB")
"""


def build(gangadir: Path, n: int) -> None:
    os.environ["GANGA_DIR"] = str(gangadir)
    from ganga_like import ArgSplitter, Executable, Job
    from ganga_like.runtime.session import close_session

    big = Job(
        name="big",
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
    )
    started, cpu = time.perf_counter(), time.process_time()
    big.submit()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"submit() of {n:,} subjobs: {time.perf_counter() - started:.1f} s wall, "
        f"{time.process_time() - cpu:.1f} s CPU; peak RSS {rss:.0f} MB",
        flush=True,
    )
    if n > 10_000:
        big.kill()
    for i in range(999):
        Job(name=f"small-{i}", application=Executable(exe="/bin/true", args=[str(i)]))
    big.wait(timeout=3600)
    close_session()


def run(gangadir: Path, env: dict[str, str]) -> dict[str, float]:
    env = dict(env, GANGA_DIR=str(gangadir))
    out = subprocess.run(  # not run from a checkout: `-c` puts the cwd first on sys.path
        [sys.executable, "-c", MEASURE],
        env=env,
        cwd=gangadir.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print(out, end="", flush=True)
    figures = {}
    for label, pattern in (
        ("table", r"jobs table: ([\d.]+)"),
        ("statuses", r"statuses: ([\d.]+)"),
        ("rss", r"peak RSS: ([\d.]+)"),
    ):
        found = re.search(pattern, out)
        if found:
            figures[label] = float(found.group(1))
    return figures


def option(name: str, default: str | None) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> None:
    n = int(option("--subjobs", "10000") or 10_000)
    rounds = int(option("--rounds", "3") or 3)
    before = option("--before", None)
    positional = [a for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("--")]
    positional = [a for a in positional if sys.argv[sys.argv.index(a) - 1][:2] != "--"]
    gangadir = (
        Path(positional[0])
        if positional
        else Path(tempfile.mkdtemp(prefix="bench-reopen-")) / "gangadir"
    )
    if not (gangadir / "repository" / "Data.fs").exists():
        started = time.perf_counter()
        build(gangadir, n)
        print(f"built in {time.perf_counter() - started:.1f} s: {gangadir}", flush=True)
    variants = [("after", gangadir, os.environ.copy())]
    if before:
        copy = gangadir.parent / (gangadir.name + "-before")
        if not copy.exists():
            copy.mkdir()
            for name in ("Data.fs", "Data.fs.index"):
                (copy / "repository").mkdir(exist_ok=True)
                shutil.copy2(gangadir / "repository" / name, copy / "repository" / name)
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(
            [before, os.path.join(before, "plugins"), env.get("PYTHONPATH", "")]
        )
        variants.insert(0, ("before", copy, env))
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in variants}
    for attempt in range(rounds):
        for label, directory, env in variants:
            print(f"--- {label}, fresh process {attempt + 1}", flush=True)
            results[label].append(run(directory, env))
    for label, figures in results.items():
        medians = {
            key: statistics.median(f[key] for f in figures if key in f)
            for key in ("table", "statuses", "rss")
        }
        print(
            f"{label}: median open + table {medians['table']:.3f} s, statuses "
            f"{medians['statuses']:.3f} s, peak RSS {medians['rss']:.0f} MB"
        )


if __name__ == "__main__":
    main()
