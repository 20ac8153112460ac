"""Detached Local runner: the process's event loop.

Started by ``client`` as ``python -m ganga_like_runner RUNNER_DIR --lock-fd N`` in a
new session, it runs the tasks of the batches queued in ``RUNNER_DIR/queue`` first in,
first out, at most ``max_concurrent`` at a time, each in its own process group, and writes
every state change to files (see ``protocol`` for the layout).  Commands are never run
through a shell.

The event loop sleeps in ``signal.sigtimedwait`` with its wake-up signals blocked: SIGCHLD
means a slot thread started or saw the end of a task, SIGUSR1 that a client queued
something, SIGTERM/SIGINT that the runner should stop (leaving running tasks alone).  It
exits by itself after ``idle_exit_seconds`` with nothing to do.  The tasks themselves are
the ``Engine``'s.

Modules: ``task_engine`` (starting, ending and killing tasks), ``slots`` (the threads that
start tasks and wait for them), ``journal`` (events journals), ``tasks`` (batches, tasks,
request checks), ``task_files`` (per-task files), ``spawn`` (starting and signalling
processes), ``startup_recovery`` (recovery after a crash), ``protocol`` (the files shared
with clients), ``__main__`` (the command line).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from pathlib import Path

from ganga_like_runner.journal import JOURNAL_RETRY_SECONDS, append_whole
from ganga_like_runner.protocol import (
    BATCH_SUFFIX,
    CONFIG_NAME,
    DEFAULT_HEARTBEAT,
    KILL_NAMES_SUFFIX,
    KILL_SUFFIX,
    PID_NAME,
    PRIVATE_DIR,
    PRIVATE_FILE,
    QUEUE_DIR,
    RUNNER_SIGNALS,
    host_words,
    keys_of_kill_name,
)
from ganga_like_runner.startup_recovery import recover
from ganga_like_runner.task_engine import STARTED_EVENT_DELAY_SECONDS, Engine
from ganga_like_runner.tasks import check_batch, check_kill

# Look at the queue at least this often even without a wake-up signal; a cheap safety net.
SAFETY_WAKE_SECONDS = 30.0

WAKE_SIGNALS = RUNNER_SIGNALS


class Runner(Engine):
    """The daemon's event loop around its ``Engine``; one instance per process."""

    def __init__(self, runner_dir: Path, lock_fd: int) -> None:
        super().__init__(runner_dir)
        self.queue_dir = runner_dir / QUEUE_DIR
        self.lock_fd = lock_fd
        self.holds_lock = True
        self.config_mtime: int | None = None
        self.woken = True
        self.stopping = False
        # How often the queue is looked at without a wake-up signal: a pilot's clients run
        # on another machine and cannot signal it, so it looks often.
        self.scan_interval = SAFETY_WAKE_SECONDS
        self.heartbeat = DEFAULT_HEARTBEAT
        self.last_beat = time.monotonic()
        # The pid file's line: the pid alone would not do, another host's may be the same.
        self.pid_line = f"{os.getpid()} {host_words()}\n"

    # ----------------------------------------------------------------- life cycle

    def install_signals(self) -> None:
        """Block the wake-up signals; they are taken with sigtimedwait.

        Handlers are installed as well, as a safety net: should a signal ever be delivered
        rather than waited for, it must only set a flag instead of killing the runner.
        Tasks start with an empty mask (see ``spawn``).
        """
        for signum in WAKE_SIGNALS:
            signal.signal(signum, self._on_signal)
        # A handler rather than SIG_IGN: ignored signals would stay ignored in the tasks.
        signal.signal(signal.SIGHUP, self._on_signal)
        # Exactly these blocked: whatever else the submitter had blocked must not reach
        # the tasks.
        signal.pthread_sigmask(signal.SIG_SETMASK, WAKE_SIGNALS)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._note_signal(signum)

    def _note_signal(self, signum: int) -> None:
        if signum == signal.SIGUSR1:
            self.woken = True
        elif signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        # SIGCHLD needs no flag: every loop iteration takes the slots' events (a slot
        # thread directs one at this thread after each).

    def serve(self) -> None:
        """Run until stopped or idle for ``idle_exit`` seconds."""
        recover(self)
        while not self.stopping:
            if self.woken:
                self.woken = False
                self.read_config()
                self.read_queue()
            self.beat_if_due()
            self.take_slot_events()
            self.enforce_kill_deadlines()
            # Fill the freed slots first: writing the ended tasks' files can wait, the
            # next tasks should not.
            self.start_tasks()
            self.settle_ended()
            self.announce_started()
            self.prepare_next()
            if self.woken or self.stopping:
                continue  # a signal was handled by its safety-net handler
            timeout = self.next_timeout()
            if timeout is None:
                if self.leave_if_still_idle():
                    return
                continue
            self.wait(timeout)

    def wait(self, timeout: float) -> None:
        if not self.flush_journals():
            timeout = min(timeout, JOURNAL_RETRY_SECONDS)
        info = signal.sigtimedwait(WAKE_SIGNALS, timeout)
        if info is None:
            self.woken = True  # periodic or idle deadline: look at the queue again
            return
        self._note_signal(info.si_signo)
        # Take whatever else is pending now rather than one signal per loop iteration.
        while (info := signal.sigtimedwait(WAKE_SIGNALS, 0)) is not None:
            self._note_signal(info.si_signo)

    def next_timeout(self) -> float | None:
        """Seconds to sleep, or None when the idle deadline has passed."""
        now = time.monotonic()
        deadline = min(now + self.scan_interval, self.last_beat + self.heartbeat)
        if self.kill_deadlines:
            deadline = min(deadline, *self.kill_deadlines.values())
        if self.starts_held_until and self.pending:
            deadline = min(deadline, self.starts_held_until)
        if self.unannounced:
            first = self.unannounced[0].start or 0.0
            deadline = min(deadline, now + first + STARTED_EVENT_DELAY_SECONDS - time.time())
        busy = self.pending or self.handed or self.running or self.kill_deadlines
        if not (busy or self.journals.failing):
            # Never idle while events cannot be written: leaving would lose them.
            idle_deadline = self.last_activity + self.idle_exit
            if idle_deadline <= now:
                return None
            deadline = min(deadline, idle_deadline)
        return max(0.0, deadline - now)

    def leave_if_still_idle(self) -> bool:
        """Release the lock; return True to exit, False if work arrived meanwhile."""
        self.remove_pid_file()
        fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
        self.holds_lock = False
        # The last events are written only now: a client that sees them and queues more
        # work then finds the lock free and starts a runner, instead of waking this one.
        # Should they not fit (a full disk), stay; a runner that took the lock meanwhile
        # finds our finished batches (deleted only once their events are written) and
        # writes their final events itself.
        written = self.flush_journals()
        # A client that found the lock taken just now relies on us to see its batch.
        arrived = self.queue_has_batches()
        if written and not arrived:
            return True
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True  # the new holder is or will be a runner, and reads the queue
        self.holds_lock = True
        self.write_pid_file()
        if arrived:
            self.log("work arrived while leaving, staying")
        self.woken = True
        self.last_activity = time.monotonic()
        return False

    def beat_if_due(self) -> None:
        """Refresh the pid file's mtime: hosts sharing the directory see the runner live.
        A pid file no longer naming this runner was taken over by another host that
        judged this one gone: leave, as when stopped."""
        now = time.monotonic()
        if now - self.last_beat < self.heartbeat or not self.holds_lock:
            return
        self.last_beat = now
        if not self.names_me():
            self.log("runner.pid no longer names this runner (another host took over): leaving")
            self.stopping = True
            return
        with contextlib.suppress(OSError):
            os.utime(self.dir / PID_NAME)

    def names_me(self) -> bool:
        try:
            return (self.dir / PID_NAME).read_text() == self.pid_line
        except OSError:
            return False

    def write_pid_file(self) -> None:
        tmp = self.dir / f".{PID_NAME}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            append_whole(fd, self.pid_line.encode())
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / PID_NAME)

    def remove_pid_file(self) -> None:
        if self.names_me():  # not another host's, which took over
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / PID_NAME)

    def shutdown(self) -> None:
        self.flush_journals()
        if self.holds_lock:
            self.remove_pid_file()
        self.journals.close()

    # ------------------------------------------------------------------- requests

    def queue_has_batches(self) -> bool:
        return any(name.endswith(BATCH_SUFFIX) for name in self.queue_names())

    def queue_names(self) -> list[str]:
        try:
            names = os.listdir(self.queue_dir)
        except FileNotFoundError:
            return []
        return sorted(
            n for n in names if n.endswith((".json", KILL_NAMES_SUFFIX)) and not n.startswith(".")
        )

    def read_queue(self) -> None:
        """Take batch and kill requests in submission order."""
        for name in self.queue_names():
            path = self.queue_dir / name
            try:
                if name.endswith(KILL_NAMES_SUFFIX):
                    self.kill_keys(keys_of_kill_name(name))
                    os.unlink(path)
                    continue
                data = json.loads(path.read_bytes())
                if name.endswith(KILL_SUFFIX):
                    self.kill_keys(check_kill(data))
                    os.unlink(path)
                elif name.endswith(BATCH_SUFFIX):
                    check_batch(data)
                    accepted = self.accepted_dir / name
                    self.accepted_dir.mkdir(PRIVATE_DIR, exist_ok=True)
                    # Moved before any task starts: a crash after this point is recovered
                    # from accepted/, a crash before it simply reads the batch again.
                    os.replace(path, accepted)
                    self.add_batch(data, accepted, recovering=False)
                    self.spawner.forget()
                else:
                    raise ValueError("unknown kind of request")
            except FileNotFoundError:
                continue  # taken away meanwhile (the directory may be gone, too)
            except (OSError, ValueError) as exc:
                self.reject(path, exc)

    def read_config(self) -> None:
        path = self.dir / CONFIG_NAME
        try:
            mtime = path.stat().st_mtime_ns
            if mtime == self.config_mtime:
                return
            config = json.loads(path.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self.log(f"ignoring unreadable {CONFIG_NAME}: {exc}")
            return
        self.config_mtime = mtime
        if isinstance(config, dict):
            written = config.get("time")
            self.apply_config(config, written if isinstance(written, int) else mtime)
