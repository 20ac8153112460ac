"""Keeping exactly one Local runner alive per runner directory: find, start, wake, stop.

A live runner holds ``runner.lock`` (flock) for its whole life and names itself in
``runner.pid``.  A client that has queued a request takes the lock: if it gets it, no runner
is alive and it starts one, handing over the locked descriptor; if not, it wakes the runner
named in the pid file.  Runs in the submitting process (so it may use ganga_like: the runner
is started through ``ganga_like.detached``).

The directory may be on a filesystem other hosts share: a runner is only ever woken,
stopped or restarted from its own host (its pid file names the host, see
``ganga_like.hosts``). From another host its record is judged by its heartbeat: while it
beats, the runner is alive there (work for it is refused here, kill requests are left in
its queue for its next look); once it has missed its heartbeats its host is gone and a
runner may be started here in its place.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import signal
import sys
import time
from pathlib import Path

from ganga_like.detached import reap_when_it_exits, start_detached
from ganga_like.hosts import Record, heartbeat_seconds, host_words, read_record, take_over
from ganga_like_runner.protocol import (
    ACCEPTED_DIR,
    BATCH_SUFFIX,
    LOCK_NAME,
    LOG_NAME,
    PID_NAME,
    PRIVATE_FILE,
    QUEUE_DIR,
    RUNNER_MODULE,
    RUNNER_MODULES,
    RUNNER_SIGNALS,
    TAKEN_OVER_NAME,
    write_atomic,
)

__all__ = [
    "RunnerOnAnotherHost",
    "ensure_runner",
    "has_accepted",
    "has_batches",
    "revive",
    "runner_elsewhere",
    "runner_pid",
    "stop",
    "wake",
]

# How long a client waits for a runner that is leaving or dying to let go of the lock.
LOCK_PATIENCE_SECONDS = 10.0

# Temporary pid file names, unique within this process.
_sequence = itertools.count()


class RunnerOnAnotherHost(OSError):
    """The runner of the directory is alive on another host."""

    def __init__(self, runner_dir: Path, record: Record) -> None:
        super().__init__(
            f"the Local runner of {runner_dir} runs on {record.where()}; Local jobs run "
            "there: submit them on that host, or here once it has left (it exits when idle)"
        )
        self.record = record


def runner_pid(runner_dir: Path) -> int | None:
    """Pid of the live runner of ``runner_dir`` on this host, or None (a pid written on
    another host means nothing here)."""
    record = read_record(runner_dir / PID_NAME)
    if record is None or not record.here:
        return None
    return record.pid if _is_runner(record.pid, runner_dir) else None


def runner_elsewhere(runner_dir: Path) -> Record | None:
    """The record of a runner alive on another host. A gone host's record is taken over
    (of several takers, one succeeds), which the taker notes for the next runner: the
    pids in the tasks' records are that host's, not to be signalled here."""
    record = read_record(runner_dir / PID_NAME)
    if record is None or record.here:
        return None
    if not record.gone:
        return record
    if take_over(record):
        write_atomic(runner_dir, TAKEN_OVER_NAME, f"{record.host}\n".encode())
    return None


def revive(runner_dir: Path) -> bool:
    """Start a runner if none is alive but work was left behind; whether one was started.

    For a runner that died (``kill -9``, a crash): the new one's start-up recovery reports
    the tasks that were running as failed and runs the queued ones.  Cheap enough for
    every monitoring cycle: a live runner holds its lock for its whole life, so one open
    and one failed ``flock`` say it is there; nothing per task.
    """
    if runner_elsewhere(runner_dir) is not None:
        return False  # alive on its host: never restarted from here
    try:
        fd = os.open(runner_dir / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # no runner ever ran here
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a runner (or a client about to start one) holds it
        if not (has_batches(runner_dir) or has_accepted(runner_dir)):
            return False  # nothing left behind; the lock is let go by the close below
        # With the lock in hand no runner is alive: a pid file is a dead one's.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(runner_dir / PID_NAME)
        _spawn_runner(runner_dir, fd)
        return True
    finally:
        os.close(fd)


def stop(runner_dir: Path, timeout: float = 5.0) -> None:
    """Ask the live runner to exit and wait for it; its running tasks keep running.

    A runner started later reports those tasks as failed (and kills them), so this is
    meant for cleanup, not for pausing work.  Raises TimeoutError if it does not exit.
    """
    pid = runner_pid(runner_dir)
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while _process_alive(pid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"runner {pid} of {runner_dir} did not exit within {timeout} s")
        time.sleep(0.005)


def has_batches(runner_dir: Path) -> bool:
    try:
        names = os.listdir(runner_dir / QUEUE_DIR)
    except FileNotFoundError:
        return False
    return any(name.endswith(BATCH_SUFFIX) and not name.startswith(".") for name in names)


def has_accepted(runner_dir: Path) -> bool:
    try:
        names = os.listdir(runner_dir / ACCEPTED_DIR)
    except FileNotFoundError:
        return False
    return any(not name.startswith(".") for name in names)


def ensure_runner(runner_dir: Path, always: bool) -> bool:
    """Make sure a runner will see what was just queued; return whether one is there.

    Called after a request file is in place.  Whoever takes the lock either hands it to a
    new runner (and names it in the pid file before letting go) or releases it and looks
    at the queue again, and a runner that finds work there after releasing the lock takes
    it back.  So a live runner named in the pid file, or a lock holder that lets go soon,
    will see the request.  The lock held with no live runner named means a runner that is
    leaving or dying, or a client about to name one: try again in a moment.
    """
    patience = time.monotonic() + LOCK_PATIENCE_SECONDS
    delay = 0.001
    while True:
        outcome = _lock_or_wake(runner_dir, always)
        if outcome == "busy":
            if time.monotonic() > patience:
                _log(runner_dir, "lock held for long by no live runner; request left queued")
                return True
            time.sleep(delay)
            delay = min(2 * delay, 0.05)
        elif outcome == "idle":
            if not has_batches(runner_dir):
                return False
        else:
            return True


def _lock_or_wake(runner_dir: Path, always: bool) -> str:
    """One attempt: "woken", "spawned", "idle" (lock free, no work) or "busy"."""
    if runner_elsewhere(runner_dir) is not None:
        return "woken"  # its next look at the queue finds the request (no signal reaches it)
    fd = os.open(runner_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = runner_pid(runner_dir)
            if pid is None:
                return "busy"
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
            return "woken"
        if always or has_batches(runner_dir) or has_accepted(runner_dir):
            # With the lock in hand no runner is alive: a pid file is a dead one's.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(runner_dir / PID_NAME)
            _spawn_runner(runner_dir, fd)
            return "spawned"
        return "idle"
    finally:
        # Once spawned, the runner holds its own copy of the locked descriptor.
        os.close(fd)


def _spawn_runner(runner_dir: Path, lock_fd: int) -> None:
    """Start a detached runner that inherits the already locked ``lock_fd``."""
    argv = [
        sys.executable,
        "-m",
        RUNNER_MODULE,
        os.path.abspath(runner_dir),
        "--lock-fd",
        str(lock_fd),
        "--heartbeat",
        str(heartbeat_seconds()),
    ]
    # The runner starts with its wake-up signals blocked, so that a client waking it before
    # its handlers are set up cannot kill it; its stderr goes to the log so that a crash of
    # the runner leaves a traceback.  The directory holding this package goes first on its
    # import path: the runner imports nothing else of ours.
    started = start_detached(
        argv,
        runner_dir / LOG_NAME,
        pass_fds=(lock_fd,),
        first_on_path=Path(__file__).resolve().parents[1],
        blocked_signals=RUNNER_SIGNALS,
    )
    reap_when_it_exits(started.proc)  # an exited runner is then gone, never a zombie
    _name_runner(runner_dir, started.proc.pid)


def _name_runner(runner_dir: Path, pid: int) -> None:
    """Write the pid file for a runner just spawned, unless one is there already.

    From here on other clients find a live runner to wake instead of waiting for its
    start-up.  Only created, never replaced: if this process was slow, the runner may
    have named itself, or even left and been followed by another runner, and that file
    must stand.
    """
    tmp = runner_dir / f".{PID_NAME}.{os.getpid()}.{next(_sequence)}.tmp"
    write_atomic(runner_dir, tmp.name, f"{pid} {host_words()}\n".encode())
    try:
        os.link(tmp, runner_dir / PID_NAME)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def _log(runner_dir: Path, message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    line = f"{stamp} [{os.getpid()}] client: {message}\n".encode()
    with contextlib.suppress(OSError):
        fd = os.open(runner_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def wake(runner_dir: Path) -> None:
    pid = runner_pid(runner_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)


def _is_runner(pid: int, runner_dir: Path) -> bool:
    """Whether ``pid`` is a live runner of ``runner_dir`` (not a stale or reused pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return _process_alive(pid)
    args = [os.fsdecode(arg) for arg in cmdline.split(b"\0")]
    module = next((m for m in RUNNER_MODULES if m in args), None)
    if module is None:
        return False  # a zombie (empty cmdline) or another program that got the pid
    position = args.index(module) + 1
    if position >= len(args):
        return False
    return os.path.realpath(args[position]) == os.path.realpath(runner_dir)


def _process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")
