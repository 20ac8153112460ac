"""The Local runner's command line: ``python -m ganga_like_runner RUNNER_DIR``.

Started by ``client`` with ``--lock-fd N``, an inherited descriptor on which it already
holds the runner lock.  A pilot (the Slurm backend's, inside a batch allocation) starts it
with ``--cores``/``--memory`` (the allocation's size: tasks are packed into it),
``--inherit-env`` (tasks get the allocation's environment), ``--scan-interval`` (its
clients cannot signal it), ``--idle-exit 0`` (the allocation is let go once the work is
done) and ``--kill-tasks-on-exit`` (stopped at the walltime, it takes its tasks along: in
their own sessions, they could escape the scheduler's clean-up).

Imports nothing from ``ganga_like``: the runner must start (and keep running) whatever
state the core is in.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import sys
import traceback
from pathlib import Path

from ganga_like_runner.loop import Runner
from ganga_like_runner.protocol import (
    FEATURES_NAME,
    KILL_BY_PREFIX,
    LOCK_NAME,
    PRIVATE_DIR,
    PRIVATE_FILE,
    write_atomic,
)
from ganga_like_runner.spawn import signal_group


def take_lock(runner_dir: Path, inherited: int | None) -> int | None:
    """The locked descriptor, or None if another runner holds the lock."""
    if inherited is not None:
        fd = inherited
    else:
        fd = os.open(runner_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        # On an inherited descriptor this is a no-op that checks it is really locked.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.set_inheritable(fd, False)  # tasks must never keep the runner's lock alive
    return fd


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ganga_like_runner")
    parser.add_argument("runner_dir", type=Path)
    parser.add_argument("--lock-fd", type=int, default=None)
    parser.add_argument("--cores", type=_positive, default=None, help="cores to pack tasks in")
    parser.add_argument("--memory", type=int, default=None, help="bytes; 0 or unset: no limit")
    parser.add_argument("--inherit-env", action="store_true")
    parser.add_argument("--scan-interval", type=float, default=None)
    parser.add_argument("--idle-exit", type=float, default=None)
    parser.add_argument(
        "--heartbeat", type=float, default=None, help="seconds between refreshes of runner.pid"
    )
    parser.add_argument(
        "--kill-tasks-on-exit",
        action="store_true",
        help="a pilot: the allocation is ending, its tasks must not outlive the runner",
    )
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runner_dir: Path = args.runner_dir.absolute()
    runner_dir.mkdir(PRIVATE_DIR, parents=True, exist_ok=True)
    lock_fd = take_lock(runner_dir, args.lock_fd)
    if lock_fd is None:
        return 0  # another runner is alive and will see the queue
    os.chdir("/")  # do not keep any submitter's directory busy
    runner = Runner(runner_dir, lock_fd)
    if args.cores is not None:
        # A task takes at least one core: the count never limits before the cores do.
        runner.capacity_cores = runner.max_concurrent = args.cores
        runner.settings_time = 2**63  # batches do not change the capacity
    if args.idle_exit is not None:
        runner.idle_exit = max(0.0, args.idle_exit)
    if args.memory:
        runner.capacity_memory = args.memory
    if args.inherit_env:
        runner.inherited_env = dict(os.environ)
    if args.scan_interval is not None:
        runner.scan_interval = max(0.05, args.scan_interval)
    if args.heartbeat is not None:
        runner.heartbeat = max(0.05, args.heartbeat)
    runner.install_signals()
    write_atomic(runner_dir, FEATURES_NAME, f"{os.getpid()} {KILL_BY_PREFIX}\n".encode())
    # Only now, with SIGUSR1 blocked, may clients find our pid and signal us.
    runner.write_pid_file()
    runner.log(f"runner started (pid {os.getpid()})")
    reason = "idle"
    try:
        runner.serve()
        if runner.stopping:
            reason = "stop requested"
    except BaseException:
        reason = "error"
        runner.log("runner failed:\n" + traceback.format_exc())
        raise
    finally:
        if args.kill_tasks_on_exit:
            for pgid in list(runner.running):
                signal_group(pgid, signal.SIGKILL)
        runner.shutdown()
        runner.log(f"runner exiting ({reason}), {len(runner.running)} task(s) left running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
