"""The repository on PostgreSQL against the default mode (the repository's own server on
a Unix socket), in one run, rounds interleaved.

    eval "$(bash scripts/start-postgres.sh)"
    python scripts/bench/bench_postgres.py [--rounds R] [--subjobs N] [--jobs J]

Each round, for each mode in turn, in a fresh gangadir (and, for PostgreSQL, a fresh
database of the server ``$GANGA_TEST_POSTGRES`` names), fresh processes measure:
  1. single commit latency: 200 renames of a job, each its own transaction (median);
  2. submit of one job of N subjobs (default 10,000) on Local, /bin/true: the time of
     ``submit()`` (the job is killed right after; running it is not what is measured);
  3. listing J jobs (default 1,000) from a second session: a new process opens the
     repository and prints the jobs table (time inside the process, import excluded).
Prints every round and the medians.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]

COMMITS = r"""
import time
from ganga_like import Job
j = Job(name="c")
times = []
for i in range(200):
    t = time.perf_counter()
    j.name = f"c{i}"
    times.append(time.perf_counter() - t)
times.sort()
print("commit", times[len(times) // 2])
"""

SUBMIT = r"""
import sys, time
from ganga_like import ArgSplitter, Executable, Job
n = int(sys.argv[1])
j = Job(application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]))
t = time.perf_counter()
j.submit()
print("submit", time.perf_counter() - t)
j.kill()
"""

MAKE_JOBS = r"""
import sys
from ganga_like import Job
for i in range(int(sys.argv[1])):
    Job(name=f"l{i}")
"""

LIST = r"""
import time
from ganga_like import jobs
t = time.perf_counter()
text = repr(jobs)
print("list", time.perf_counter() - t, text.count(chr(10)))
"""


def run(code: str, env: dict[str, str], *args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    found: dict[str, float] = {}
    for line in done.stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in ("commit", "submit", "list"):
            found[words[0]] = float(words[1])
    return found


def database(server: str) -> str:
    name = f"ganga_bench_{secrets.token_hex(4)}"
    subprocess.run(["psql", server, "-qc", f'CREATE DATABASE "{name}"'], check=True)
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


def drop(server: str, url: str) -> None:
    name = urlsplit(url).path[1:]
    subprocess.run(
        ["psql", server, "-qc", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'], check=False
    )


def one_round(mode: str, server: str, work: Path, subjobs: int, jobs: int) -> dict[str, float]:
    gangadir = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=work))
    env = {
        **os.environ,
        "GANGA_DIR": str(gangadir / "gangadir"),
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'plugins'}",
        "XDG_CACHE_HOME": str(gangadir / "cache"),
    }
    env.pop("GANGA_REPOSITORY", None)
    url = ""
    if mode == "postgresql":
        url = database(server)
        env["GANGA_REPOSITORY"] = url
    try:
        found = run(COMMITS, env)
        found.update(run(SUBMIT, env, str(subjobs)))
        run(MAKE_JOBS, env, str(jobs))
        found.update(run(LIST, env))
    finally:
        subprocess.run(
            [sys.executable, "-m", "ganga_like.cli", "monitor", "stop"], env=env, check=False
        )
        if url:
            drop(server, url)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subjobs", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    args = parser.parse_args()
    server = os.environ.get("GANGA_TEST_POSTGRES", "")
    if not server:
        raise SystemExit('no PostgreSQL: eval "$(bash scripts/start-postgres.sh)" first')
    results: dict[str, list[dict[str, float]]] = {"default": [], "postgresql": []}
    with tempfile.TemporaryDirectory(prefix="bench-postgres-") as work:
        for r in range(args.rounds):
            for mode in ("default", "postgresql") if r % 2 == 0 else ("postgresql", "default"):
                found = one_round(mode, server, Path(work), args.subjobs, args.jobs)
                results[mode].append(found)
                print(f"round {r + 1} {mode:10}", found, flush=True)
    print(f"\nmedians of {args.rounds} rounds")
    print(
        f"{'':12}{'commit (ms)':>14}{f'submit {args.subjobs} (s)':>20}{f'list {args.jobs} (s)':>18}"
    )
    for mode, rows in results.items():
        med = {k: statistics.median(row[k] for row in rows) for k in ("commit", "submit", "list")}
        print(f"{mode:12}{med['commit'] * 1000:14.2f}{med['submit']:20.2f}{med['list']:18.3f}")


if __name__ == "__main__":
    main()
