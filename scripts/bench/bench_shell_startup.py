"""Time to the first prompt: the ``ganga`` shell against plain ``ipython``, same run.

Both are started in a pseudo-terminal, as a user would, with the same IPython profile
directory (warmed up once so neither pays for creating it) and timed from spawn until
their input prompt is drawn. The ganga shell opens a repository holding ``--jobs`` jobs
(default 0; created once, before timing) so the effect of the banner's counts shows.

    python scripts/bench/bench_shell_startup.py [--runs 15] [--jobs 0] [--floor]

Prints, for each, the wall time to the prompt (median, min, max) and the CPU time the
process had used when its prompt appeared (from /proc; unlike wall time it does not grow
when other work loads the machine), then the ganga/ipython ratios (budget: <= 1.3).
``--floor`` adds, in the same rounds, plain IPython started by a script that first opens
the repository as ganga does (no GPI, monitor, banner or extension): what any shell on
this repository pays.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pexpect

ESC = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"
PROMPTS = {"ipython": rf"In {ESC}\[{ESC}1{ESC}\]", "ganga": rf"ganga {ESC}\[{ESC}1{ESC}\]"}
PROMPTS["floor"] = PROMPTS["ipython"]
FLOOR = (
    "from ganga_like.repository.connection import Repository\n"
    "from ganga_like.runtime.settings import configured_settings\n"
    "s = configured_settings()\n"
    "repo = Repository(s.gangadir, s.repository_mode, options=s.storage_options())\n"
    "from IPython import start_ipython\n"
    "start_ipython(argv=[])\n"
    "repo.close()\n"
)


def command(name: str, extra: list[str]) -> list[str]:
    if name == "floor":
        return [sys.executable, "-c", FLOOR]
    script = Path(sys.executable).with_name(name)
    if script.exists():
        return [str(script), *extra]
    module = "IPython" if name == "ipython" else "ganga_like.cli"
    return [sys.executable, "-m", module, *extra]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_to_prompt(name: str, env: dict[str, str], extra: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) from spawn to the first prompt."""
    argv = command(name, extra if name == "ganga" else [])
    start = time.perf_counter()
    child = pexpect.spawn(
        argv[0], argv[1:], env=env, encoding="utf-8", timeout=60, dimensions=(40, 120)
    )
    try:
        child.expect(PROMPTS[name])
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(child.pid)
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return elapsed, cpu


def make_jobs(n: int, env: dict[str, str]) -> None:
    if n <= 0:
        return
    code = (
        "from ganga_like import *\n"
        f"for i in range({n}):\n"
        "    Job(name=f'bench{i}', application=Executable(exe='true'))\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--floor", action="store_true", help="time the floor script too")
    parser.add_argument("ganga_args", nargs="*", help="extra ganga options, after --")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-shell-"))
    env = dict(
        os.environ,
        GANGA_DIR=str(tmp / "gangadir"),
        XDG_CONFIG_HOME=str(tmp / "xdg"),
        IPYTHONDIR=str(tmp / "ipython"),
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm-256color",
    )
    names = [name for name in PROMPTS if args.floor or name != "floor"]
    try:
        make_jobs(args.jobs, env)
        for name in names:  # warm-up: profile dir, history database, disk caches
            time_to_prompt(name, env, args.ganga_args)
        wall: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(args.runs):
            for name in names:  # interleaved, so machine noise hits all alike
                w, c = time_to_prompt(name, env, args.ganga_args)
                wall[name].append(w)
                cpu[name].append(c)
        for name in names:
            w, c = wall[name], cpu[name]
            print(
                f"{name:8s} wall median {statistics.median(w):.3f} s  min {min(w):.3f}  "
                f"max {max(w):.3f}   CPU median {statistics.median(c):.3f} s  "
                f"({len(w)} runs)"
            )
        median = statistics.median(wall["ganga"]) / statistics.median(wall["ipython"])
        best = min(wall["ganga"]) / min(wall["ipython"])
        on_cpu = statistics.median(cpu["ganga"]) / statistics.median(cpu["ipython"])
        print(
            f"ratio ganga/ipython: wall medians {median:.2f}, wall minima {best:.2f}, "
            f"CPU medians {on_cpu:.2f}   (jobs in repository: {args.jobs})"
        )
        if args.floor:
            floor_wall = statistics.median(wall["floor"]) / statistics.median(wall["ipython"])
            floor_cpu = statistics.median(cpu["floor"]) / statistics.median(cpu["ipython"])
            print(
                f"ratio floor/ipython: wall medians {floor_wall:.2f}, CPU medians {floor_cpu:.2f}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
