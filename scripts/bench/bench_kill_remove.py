"""j.kill() of a just-submitted N-subjob Local job and j.remove() of a completed one.

    python scripts/bench/bench_kill_remove.py [N] [--rounds R] [--only kill|remove]

kill: N subjobs that would each sleep 600 s are submitted (two run, the rest wait in the
runner's queue), then ``j.kill()`` is timed; after it returns, how long the runner keeps
working (its CPU time still growing, sampled every 0.2 s, until it stays flat for 1 s)
and how much CPU it spends meanwhile; also the CPU it spent during the call (the kill
request reaches it at the start of the call: what is left "after" depends on how long the
call took) and how much of it all was the kernel's (creating files on a slow file system).
remove: N ``/bin/true`` subjobs run to completion, then ``j.remove()`` is timed, and apart
from it the time until the workspace is deleted (the removed workspace gone from
``workspace/``, and ``workspace/.removed`` empty, when the code deletes it behind).  Each
round does both on new jobs; the load is printed with each round.  Compare two checkouts
by running this script with each on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import psutil

REMOVED_DIR = ".removed"


def runner_process(gangadir: Path) -> psutil.Process:
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    pid = runner_client.runner_pid(runner_dir(gangadir))
    assert pid is not None, "no runner"
    return psutil.Process(pid)


def cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def kernel_cpu(proc: psutil.Process) -> float:
    """System time alone: file creation on a slow file system shows here, not in user."""
    return float(proc.cpu_times().system)


def until_flat(proc: psutil.Process) -> tuple[float, float]:
    """Seconds until the runner's CPU time stops growing, and the CPU spent meanwhile."""
    started, first = time.perf_counter(), cpu(proc)
    last, flat_since = first, time.perf_counter()
    while time.perf_counter() - flat_since < 1.0:
        time.sleep(0.2)
        now = cpu(proc)
        if now - last > 0.01:
            flat_since = time.perf_counter()
        last = now
    return flat_since - started, last - first


def kill_round(n: int, gangadir: Path) -> tuple[float, float, float, float, float]:
    from ganga_like import ArgSplitter, Executable, Job

    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["600"] for _ in range(n)]),
    )
    j.submit()
    proc = runner_process(gangadir)
    before, kernel_before = cpu(proc), kernel_cpu(proc)
    started = time.perf_counter()
    j.kill()
    call = time.perf_counter() - started
    during = cpu(proc) - before
    busy, spent = until_flat(proc)
    return call, during, busy, spent, kernel_cpu(proc) - kernel_before


def remove_round(n: int, gangadir: Path) -> tuple[float, float]:
    from ganga_like import ArgSplitter, Executable, Job

    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
    )
    j.submit()
    assert j.wait(timeout=3600) == "completed"
    workspace = gangadir / "workspace"
    own = workspace / str(j.id)
    started = time.perf_counter()
    j.remove()
    call = time.perf_counter() - started
    removed = workspace / REMOVED_DIR
    while own.exists() or (removed.exists() and os.listdir(removed)):
        time.sleep(0.05)
    return call, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", choices=("kill", "remove"))
    args = parser.parse_args()
    gangadir = Path(tempfile.mkdtemp(prefix="bench-kill-remove-")) / "gangadir"
    os.environ["GANGA_DIR"] = str(gangadir)
    from ganga_like import config
    from ganga_like.runtime.session import close_session
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    config["Local"]["idle_exit"] = 3600
    import ganga_like

    print(f"subjobs: {args.n}, code: {Path(ganga_like.__file__).parents[1]}")
    kills, removes = [], []
    for number in range(1, args.rounds + 1):
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        if args.only != "remove":
            call, during, busy, spent, kernel = kill_round(args.n, gangadir)
            kills.append(call)
            print(
                f"round {number} (load {load}): kill() {call:.2f} s (runner {during:.1f} s "
                f"CPU meanwhile); the runner then worked {busy:.1f} s more ({spent:.1f} s "
                f"CPU; in the kernel {kernel:.1f} s of the {during + spent:.1f} s)"
            )
        if args.only != "kill":
            call, gone = remove_round(args.n, gangadir)
            removes.append(call)
            print(
                f"round {number} (load {load}): remove() {call:.2f} s; "
                f"workspace deleted after {gone:.1f} s"
            )
    if kills:
        print(f"kill(): median {statistics.median(kills):.2f} s of {len(kills)}")
    if removes:
        print(f"remove(): median {statistics.median(removes):.2f} s of {len(removes)}")
    close_session()
    runner_client.stop(runner_dir(gangadir))


if __name__ == "__main__":
    main()
