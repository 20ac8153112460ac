"""Start-up of ``import ganga_like`` and of ``ganga jobs``, against plain Python and the floor.

    python scripts/bench/bench_cli.py [GANGADIR] [--rounds 11] [--compare SRC ...]

Each round starts, interleaved so machine noise hits all alike:

* ``python -c pass``                   the interpreter alone;
* ``python -c "import ganga_like"``    the package (budget: <= 60 ms CPU);
* ``import the GPI``                    ``import ganga_like.gpi.export``: every GPI module
                                       and what they import, as a script's first use of
                                       ``Job`` or ``jobs`` pays;
* ``ganga jobs > /dev/null``           the whole command (budget: <= 0.15 s wall);
* ``floor``                            python + ZODB/ZEO imports + opening the repository
                                       as ``ganga jobs`` does (a ZEO client of the
                                       repository's server, which ``ganga jobs`` just
                                       started if it had gone idle, with a persistent client
                                       cache), then with ``+ load`` every job record too;
* with ``--compare SRC`` (repeatable), ``ganga jobs`` and the GPI's import again with the
  ``ganga_like`` (and plugins) of another checkout, e.g.
  ``git archive main ganga_like plugins | tar -x -C SRC``.

GANGADIR is a repository built by ``bench_reopen.py`` (1,000 jobs, one with 10,000
subjobs); without it one of 1,000 new jobs is built in a temporary directory. Prints per
command the medians of wall time and of CPU time (user + system of the child, from
``wait4``). Python's byte-code cache must be warm: set ``PYTHONDONTWRITEBYTECODE`` aside or
run ``python -m compileall ganga_like plugins`` once first, or every start compiles.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = r"""
import os, sys
from pathlib import Path
import ZODB
from ZEO.cache import ClientCache
from ZEO.ClientStorage import ClientStorage
repo = Path(sys.argv[1]) / "repository"
cache = None
for slot in range(8):  # the first free slot, as the repository does
    try:
        cache = ClientCache(str(repo / "zeo-cache" / f"slot-{slot}.zec"), 100 << 20)
        break
    except Exception:
        continue
storage = ClientStorage(str(repo / "zeo.sock"), cache=cache, wait_timeout=5)
db = ZODB.DB(storage, cache_size=100_000)
conn = db.open()
jobs = conn.root()["jobs"]
if "--load" in sys.argv:
    for job in jobs.values():
        job._p_activate()
conn.close()
db.close()
"""

# Every GPI module (export imports the others) and what they import; checks that the
# modules came from where PYTHONPATH says, so a comparison compares what it claims.
GPI = (
    "import os, ganga_like.gpi.export as m\n"
    "src = os.environ.get('PYTHONPATH', '').split(os.pathsep)[0]\n"
    "assert not src or m.__file__.startswith(src), m.__file__\n"
)


def build(gangadir: Path, env: dict[str, str] | None = None) -> None:
    """1,000 jobs made in ``gangadir`` by a process of the code ``env`` names (ours by
    default)."""
    code = (
        "from ganga_like import Executable, Job\n"
        "for i in range(1000):\n"
        "    Job(name=f'bench{i}', application=Executable(exe='true'))\n"
    )
    env = dict(env or os.environ, GANGA_DIR=str(gangadir))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd="/")


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run, output discarded."""
    start = time.perf_counter()
    # Not from the checkout: ``python -c`` puts the working directory first on sys.path,
    # which would shadow the ganga_like a comparison puts on PYTHONPATH.
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, cwd="/")
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gangadir", nargs="?", type=Path)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], help="another checkout's source tree"
    )
    args = parser.parse_args()
    gangadir = args.gangadir or Path(tempfile.mkdtemp(prefix="bench-cli-")) / "gangadir"
    if not (gangadir / "repository" / "Data.fs").exists():
        build(gangadir)
    env = dict(os.environ, GANGA_DIR=str(gangadir))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    ganga = Path(sys.executable).with_name("ganga")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import ganga_like": [sys.executable, "-c", "import ganga_like"],
        "import the GPI": [sys.executable, "-c", GPI],
        "ganga jobs": [str(ganga), "jobs"],
        "floor (open)": [sys.executable, "-c", FLOOR, str(gangadir)],
        "floor (open + load jobs)": [sys.executable, "-c", FLOOR, str(gangadir), "--load"],
    }
    envs = {name: env for name in commands}
    for src in args.compare:
        other = dict(env, PYTHONPATH=f"{src.resolve()}{os.pathsep}{src.resolve() / 'plugins'}")
        commands[f"ganga jobs ({src})"] = [str(ganga), "jobs"]
        commands[f"import the GPI ({src})"] = [sys.executable, "-c", GPI]
        envs[f"ganga jobs ({src})"] = envs[f"import the GPI ({src})"] = other
    for name, argv in commands.items():  # warm-up: byte-code and disk caches, the server
        run(argv, envs[name])
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, argv in commands.items():
            w, c = run(argv, envs[name])
            wall[name].append(w)
            cpu[name].append(c)
    print(f"{args.rounds} rounds, load average {os.getloadavg()[0]:.2f}, {gangadir}")
    for name in commands:
        print(
            f"{name:40s} wall median {statistics.median(wall[name]) * 1000:6.1f} ms  "
            f"min {min(wall[name]) * 1000:6.1f}   CPU median "
            f"{statistics.median(cpu[name]) * 1000:6.1f} ms"
        )
    base = statistics.median(cpu["python -c pass"])
    print(
        f"import ganga_like over python -c pass: "
        f"{(statistics.median(cpu['import ganga_like']) - base) * 1000:.1f} ms CPU"
    )


if __name__ == "__main__":
    main()
