"""``ganga jobs`` on 1,000 jobs as a whole process, against ``python -c "import ZODB"``.

    python scripts/bench/bench_listing.py [--rounds 5] [--before SRC]

Each round runs, interleaved so machine noise hits all alike, and prints each as a ratio to
the import measured in the same round:

* ``import ZODB``     ``python -c "import ZODB"``, the reference;
* ``(a) unchanged``   ``ganga jobs`` right after another ``ganga jobs``, nothing changed
                      between (the repository's server running): the jobs-table cache;
* ``(b) changed``     ``ganga jobs`` after another process changed one thing since the last
                      listing (in turn: a job renamed, a new job, a job removed), the
                      server running: the jobs-table server (started by the first
                      listing of the repository) answers;
* ``(c) created``     the first ``ganga jobs`` on a repository whose 1,000 jobs another
                      process has just created (its server still running, no listing
                      before: no jobs-table server yet);
* ``(d) starts``      ``ganga jobs`` after a change when the server has left: the command
                      starts it.

With ``--before SRC`` (a checkout's source tree, e.g. ``git archive main ganga_like plugins
| tar -x -C SRC``) the four cases run again with that code (``PYTHONPATH``), in the same
rounds. Budgets: (a)-(c) <= 1.5x, (d) <= 3x. Wall times are medians, with the command's own
CPU (its process alone: not the repository's or the jobs-table server's) as a ratio to the
import's CPU beside them; a fresh repository is built for each round of (c) (about 3 s of
CPU each, not timed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli import build, run

CHANGES = (
    "from ganga_like import jobs\njobs(3).name = 'renamed-' + str(len(jobs))\n",
    "from ganga_like import Executable, Job\nJob(name='added', application=Executable())\n",
    "from ganga_like import jobs\njobs[len(jobs) // 2].remove()\n",
)


def stop_server(gangadir: Path, env: dict[str, str]) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from ganga_like.repository.zeo.shared import stop_server\n"
        "stop_server(Path(sys.argv[1]) / 'repository')\n"
    )
    subprocess.run([sys.executable, "-c", code, str(gangadir)], env=env, check=True, cwd="/")


def change(gangadir: Path, env: dict[str, str], which: int) -> None:
    code = CHANGES[which % len(CHANGES)]
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd="/")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another checkout's source tree")
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="bench-listing-"))
    base = dict(os.environ)
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    codes = {"": base}
    if args.before:
        src = args.before.resolve()
        codes[" (before)"] = dict(base, PYTHONPATH=f"{src}{os.pathsep}{src / 'plugins'}")
    ganga = str(Path(sys.executable).with_name("ganga"))
    reference = [sys.executable, "-c", "import ZODB"]
    dirs = {}
    for label, env in codes.items():  # one repository of 1,000 jobs per code, kept
        dirs[label] = top / f"kept{len(dirs)}"
        build(dirs[label], env)
        run([ganga, "jobs"], dict(env, GANGA_DIR=str(dirs[label])))
    times: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    cpu_ratios: dict[str, list[float]] = {}

    def note(name: str, measured: tuple[float, float], ref: tuple[float, float]) -> None:
        times.setdefault(name, []).append(measured[0])
        ratios.setdefault(name, []).append(measured[0] / ref[0])
        cpu_ratios.setdefault(name, []).append(measured[1] / ref[1])

    for n in range(args.rounds):
        refs = [run(reference, base) for _ in range(3)]
        ref = (statistics.median(r[0] for r in refs), statistics.median(r[1] for r in refs))
        times.setdefault("import ZODB", []).append(ref[0])
        times.setdefault("import ZODB CPU", []).append(ref[1])
        for label, env in codes.items():
            kept = dict(env, GANGA_DIR=str(dirs[label]))
            run([ganga, "jobs"], kept)
            note(f"(a) unchanged{label}", run([ganga, "jobs"], kept), ref)
            change(dirs[label], kept, n)
            note(f"(b) changed{label}", run([ganga, "jobs"], kept), ref)
            change(dirs[label], kept, n + 1)
            stop_server(dirs[label], kept)
            note(f"(d) starts{label}", run([ganga, "jobs"], kept), ref)
            fresh = top / f"fresh{n}{len(label)}"
            build(fresh, env)
            note(f"(c) created{label}", run([ganga, "jobs"], dict(env, GANGA_DIR=str(fresh))), ref)
            stop_server(fresh, env)
            shutil.rmtree(fresh, ignore_errors=True)
    load = os.getloadavg()
    print(f"{args.rounds} rounds, load average {load[0]:.2f} / {load[1]:.2f}, {top}")
    print(
        f"{'import ZODB':24s} wall median {statistics.median(times['import ZODB']) * 1000:6.1f} ms"
        f"   CPU median {statistics.median(times['import ZODB CPU']) * 1000:6.1f} ms"
    )
    for name in sorted(ratios):
        shown = " ".join(f"{r:.2f}" for r in ratios[name])
        print(
            f"{name:24s} wall median {statistics.median(times[name]) * 1000:6.1f} ms   "
            f"ratio median {statistics.median(ratios[name]):.2f}x  (rounds {shown})   "
            f"CPU ratio median {statistics.median(cpu_ratios[name]):.2f}x"
        )
    for label in codes:
        stop_server(dirs[label], codes[label])


if __name__ == "__main__":
    main()
