"""Detached Local runner: a per-directory daemon that runs task commands.

Started by ``runner_client`` as ``python -m ganga_like_local.runner RUNNER_DIR --lock-fd N``
in a new session, it runs the tasks of the batches queued in ``RUNNER_DIR/queue`` first in,
first out, at most ``max_concurrent`` at a time, each in its own process group, and writes
every state change to files (see ``runner_client`` for the layout).  Commands are never run
through a shell.

The event loop sleeps in ``signal.sigtimedwait`` with its wake-up signals blocked: SIGCHLD
means a task ended, SIGUSR1 that a client queued something, SIGTERM/SIGINT that the runner
should stop (leaving running tasks alone).  It exits by itself after ``idle_exit_seconds``
with nothing to do.  Starting and ending tasks all happens on the main thread, and a
freed slot is filled before the ended task's files are written, so that the concurrency
limit is kept busy; while every slot is busy, the same thread creates the directories and
output files of the next tasks in line.

Modules: ``runner_tasks`` (batches, tasks, request checks), ``runner_files`` (per-task
files), ``runner_spawn`` (starting and signalling processes), ``runner_recovery``
(start-up recovery after a crash).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import itertools
import json
import os
import signal
import sys
import time
import traceback
from collections import deque
from pathlib import Path
from typing import Any

from ganga_like_local.runner_client import (
    ACCEPTED_DIR,
    BATCH_SUFFIX,
    CONFIG_NAME,
    KILL_NAMES_SUFFIX,
    KILL_SUFFIX,
    LOCK_NAME,
    LOG_NAME,
    PID_NAME,
    PRIVATE_DIR,
    PRIVATE_FILE,
    QUEUE_DIR,
    RUN_FILE,
    RUNNER_SIGNALS,
    event_line,
    keys_of_kill_name,
)
from ganga_like_local.runner_files import (
    collect_outputs,
    discard_files,
    files_of,
    make_dirs,
    prepare_ahead,
    start_record,
    write_json_atomic,
    write_placeholder,
    write_record,
)
from ganga_like_local.runner_recovery import KILL_GRACE_SECONDS, recover
from ganga_like_local.runner_spawn import (
    Spawner,
    signal_group,
    signal_name,
    spawn_failure_reason,
)
from ganga_like_local.runner_tasks import (
    Batch,
    Task,
    TaskSetupError,
    check_batch,
    check_kill,
    submission_time,
)

# Look at the queue at least this often even without a wake-up signal; a cheap safety net.
SAFETY_WAKE_SECONDS = 30.0
DEFAULT_IDLE_EXIT_SECONDS = 30.0
# Journals are shared by many tasks, so their descriptors are kept open, up to this many.
MAX_OPEN_JOURNALS = 64
# Upcoming tasks prepared ahead (four open files each): as many as run at once, at most this.
MAX_PREPARED_AHEAD = 64
# A task's "started" event is written only once it has run this long: a task that ends
# sooner is reported by its final event alone, which carries its start time.  Short tasks
# then cost one journal line and one status change in the monitor instead of two.
STARTED_EVENT_DELAY_SECONDS = 0.1
# Journal lines that could not be written (a full disk) are kept and written again this
# often: an event is never dropped.
JOURNAL_RETRY_SECONDS = 0.5
# A task that cannot be set up because the disk is full waits for space instead of
# failing; starting is tried again this often.
DISK_FULL_RETRY_SECONDS = 0.5
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

WAKE_SIGNALS = RUNNER_SIGNALS


class Runner:
    """The daemon's state and event loop; one instance per process."""

    def __init__(self, runner_dir: Path, lock_fd: int) -> None:
        self.dir = runner_dir
        self.queue_dir = runner_dir / QUEUE_DIR
        self.accepted_dir = runner_dir / ACCEPTED_DIR
        self.lock_fd = lock_fd
        self.holds_lock = True
        self.pending: deque[Task] = deque()
        self.running: dict[int, Task] = {}
        self.active: dict[str, list[Task]] = {}  # key -> its queued and running runs
        self.kill_deadlines: dict[int, float] = {}  # process group -> when to SIGKILL it
        self.journals: dict[str, int] = {}
        self.max_concurrent = 1
        self.idle_exit = DEFAULT_IDLE_EXIT_SECONDS
        self.config_mtime: int | None = None
        self.settings_time = -1  # submission time (ns) of the settings in force
        self.last_activity = time.monotonic()
        self.woken = True
        self.stopping = False
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self.spawner = Spawner(self.devnull)
        self.ended: list[tuple[Task, int, float]] = []  # reaped: files not yet written
        self.unannounced: deque[Task] = deque()  # started, "started" event not written yet
        self.outbox: dict[str, list[bytes]] = {}  # journal lines, written before sleeping
        # Batches whose tasks have all ended: deleted once their final events are written,
        # so that a runner dying before that still finds them (and the events) at start-up.
        self.done_batches: list[Batch] = []
        self.journals_failing = False  # the last flush could not write everything
        self.starts_held_until = 0.0  # monotonic; the disk was full when a task was set up
        self.log_fd = os.open(
            runner_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
            PRIVATE_FILE,
        )

    # ----------------------------------------------------------------- life cycle

    def install_signals(self) -> None:
        """Block the wake-up signals; they are taken with sigtimedwait.

        Handlers are installed as well, as a safety net: should a signal ever be delivered
        rather than waited for, it must only set a flag instead of killing the runner.
        Tasks start with an empty mask (see ``runner_spawn``).
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
        # SIGCHLD needs no flag: every loop iteration reaps.

    def serve(self) -> None:
        """Run until stopped or idle for ``idle_exit`` seconds."""
        recover(self)
        while not self.stopping:
            if self.woken:
                self.woken = False
                self.read_config()
                self.read_queue()
            self.reap()
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
        deadline = now + SAFETY_WAKE_SECONDS
        if self.kill_deadlines:
            deadline = min(deadline, *self.kill_deadlines.values())
        if self.starts_held_until and self.pending:
            deadline = min(deadline, self.starts_held_until)
        if self.unannounced:
            first = self.unannounced[0].start or 0.0
            deadline = min(deadline, now + first + STARTED_EVENT_DELAY_SECONDS - time.time())
        if not (self.pending or self.running or self.kill_deadlines or self.journals_failing):
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

    def write_pid_file(self) -> None:
        tmp = self.dir / f".{PID_NAME}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            append_whole(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / PID_NAME)

    def remove_pid_file(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.dir / PID_NAME)

    def shutdown(self) -> None:
        self.flush_journals()
        if self.holds_lock:
            self.remove_pid_file()
        self.close_journals()

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with contextlib.suppress(OSError):
            # Whole or not at all: a full disk drops the line rather than half of it.
            append_whole(self.log_fd, f"{stamp} [{os.getpid()}] {message}\n".encode())

    # ------------------------------------------------------------------- requests

    def queue_has_batches(self) -> bool:
        return any(name.endswith(BATCH_SUFFIX) for name in self.queue_names())

    def queue_names(self) -> list[str]:
        try:
            names = os.listdir(self.queue_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.endswith((".json", KILL_NAMES_SUFFIX))
                      and not n.startswith("."))

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

    def reject(self, path: Path, problem: Exception) -> None:
        """Keep a bad request for inspection, hidden from the queue scan by a dot."""
        self.log(f"rejected request {path.name}: {problem}")
        try:
            os.replace(path, path.with_name(f".rejected-{path.name}"))
        except OSError as exc:
            self.log(f"cannot set aside {path}: {exc}")

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

    def apply_config(self, config: dict[str, Any], when: int) -> None:
        """Apply settings unless newer ones (by submission time) are already in force."""
        if when < self.settings_time:
            return
        self.settings_time = when
        if isinstance(config.get("max_concurrent"), int) and config["max_concurrent"] >= 1:
            self.max_concurrent = config["max_concurrent"]
        if isinstance(config.get("idle_exit_seconds"), int | float):
            self.idle_exit = max(0.0, float(config["idle_exit_seconds"]))

    def add_batch(self, data: dict[str, Any], path: Path, recovering: bool) -> list[Task]:
        """Register a batch's tasks; queue them unless recovering (the caller sorts)."""
        self.apply_config(data, submission_time(data["id"]))
        batch = Batch(str(data["id"]), path, data.get("base_env", {}))
        tasks = [Task(row, batch) for row in data["tasks"]]
        batch.remaining = len(tasks)
        if not recovering:
            self.pending.extend(tasks)
            for task in tasks:
                self.active.setdefault(task.key, []).append(task)
            self.last_activity = time.monotonic()
        if not tasks:
            self.delete_batch(batch)
        return tasks

    def kill_keys(self, keys: list[str]) -> None:
        for key in keys:
            for task in list(self.active.get(key, ())):
                if task.pid is None:
                    # Still queued: it stays in the deque but is skipped when its turn comes.
                    discard_files(task)
                    self.finish(task, "killed", None, "killed by user")
                elif not task.kill_requested and task.pid is not None:
                    task.kill_requested = True
                    signal_group(task.pid, signal.SIGTERM)
                    self.kill_deadlines[task.pid] = time.monotonic() + KILL_GRACE_SECONDS

    def enforce_kill_deadlines(self) -> None:
        now = time.monotonic()
        for pgid, deadline in list(self.kill_deadlines.items()):
            if deadline <= now:
                signal_group(pgid, signal.SIGKILL)
                del self.kill_deadlines[pgid]

    # ------------------------------------------------------------------- starting

    def start_tasks(self) -> None:
        while self.pending and len(self.running) < self.max_concurrent:
            if self.starts_held_until:
                if self.starts_held_until > time.monotonic():
                    return
                self.starts_held_until = 0.0
            task = self.pending.popleft()
            if not task.finished:
                self.start_task(task)

    def hold(self, task: Task, problem: TaskSetupError) -> None:
        """Put back a task that the full disk kept from starting; retry in a moment."""
        self.pending.appendleft(task)
        if not self.starts_held_until:
            self.log(f"task {task.key} waits for disk space: {problem}")
        self.starts_held_until = time.monotonic() + DISK_FULL_RETRY_SECONDS

    def prepare_next(self) -> None:
        """Create the files of the next tasks in line while the running ones run.

        Creating directories and files is the largest part of a start; done while every
        slot is busy, a freed slot is refilled with a spawn alone.  This stays on the main
        thread (a helper thread would fight it for the interpreter lock on every system
        call) and stops as soon as a task has ended, so that its slot is refilled first.
        """
        if len(self.running) < self.max_concurrent or self.starts_held_until:
            return  # free slots: start_tasks has nothing to start (or the disk is full)
        window = min(self.max_concurrent, MAX_PREPARED_AHEAD)
        for task in itertools.islice(self.pending, window):
            if task.files is None and task.setup_error is None and not task.finished:
                if signal.SIGCHLD in signal.sigpending():
                    return
                prepare_ahead(task)

    def start_task(self, task: Task) -> None:
        now = time.time()
        try:
            files = files_of(task)
        except TaskSetupError as exc:
            if disk_full(exc):
                self.hold(task, exc)
            else:
                self.finish(task, "failed", None, str(exc))
            return
        task.record_fd = files.run
        failure: str | None = None
        held: TaskSetupError | None = None
        try:
            task.record_size = write_placeholder(files.run, now, task.batch.id)
            pid = self.spawner.spawn(task, files.out, files.err)
        except TaskSetupError as exc:
            if disk_full(exc):
                held = exc
            else:
                failure = str(exc)
        except OSError as exc:
            failure = spawn_failure_reason(task, exc)
        except (ValueError, TypeError) as exc:
            failure = f"invalid command: {exc}"
        finally:
            os.close(files.out)
            os.close(files.err)
        if held is not None:
            os.close(files.run)
            task.record_fd = None
            task.record_size = 0
            self.hold(task, held)
            return
        if failure is not None:
            # The final record replaces the placeholder: it never started.
            self.finish(task, "failed", None, failure)
            return
        task.pid = pid
        task.start = now
        self.running[pid] = task
        try:
            task.record_size = write_record(
                files.run, start_record(now, task.batch.id, pid), task.record_size
            )
        except OSError as exc:
            self.log(f"task {task.key}: cannot write {RUN_FILE}: {exc}")
        self.unannounced.append(task)

    def announce_started(self) -> None:
        """Write the "started" events of the tasks that have been running for a while."""
        if not self.unannounced:
            return
        due = time.time() - STARTED_EVENT_DELAY_SECONDS
        while self.unannounced and (self.unannounced[0].start or 0.0) <= due:
            task = self.unannounced.popleft()
            if not task.finished:
                self.emit(task, "started", task.start or 0.0, None, None)

    # ------------------------------------------------------------------- finishing

    def reap(self) -> None:
        """Collect ended children; their files are written by ``settle_ended``."""
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            task = self.running.pop(pid, None)
            if task is None:
                continue
            self.ended.append((task, os.waitstatus_to_exitcode(status), time.time()))

    def settle_ended(self) -> None:
        ended, self.ended = self.ended, []
        for task, code, end in ended:
            self.task_ended(task, code, end)

    def task_ended(self, task: Task, code: int, end: float) -> None:
        if task.kill_requested:
            self.finish(task, "killed", code, "killed by user", end)
        elif code > 0:
            self.finish(task, "failed", code, f"exit code {code}", end)
        elif code < 0:
            self.finish(task, "failed", code, f"killed by signal {signal_name(-code)}", end)
        else:
            reason = collect_outputs(task)
            self.finish(task, "failed" if reason else "completed", code, reason, end)

    def finish(
        self,
        task: Task,
        state: str,
        exit_code: int | None,
        reason: str | None,
        end: float | None = None,
    ) -> None:
        """Record the end of a task: the final ``__run__`` record first, then the journal
        event."""
        task.finished = True
        if end is None:
            end = time.time()
        record = {
            "state": state,
            "exit_code": exit_code,
            "start": task.start,
            "end": end,
            "reason": reason,
            "batch": task.batch.id,
            "pid": task.pid,
        }
        record_fd, task.record_fd = task.record_fd, None
        try:
            if record_fd is not None:
                try:
                    write_record(record_fd, json.dumps(record).encode(), task.record_size)
                finally:
                    os.close(record_fd)
            else:
                # Never prepared (killed while queued, setup failed): recovery still needs
                # the file to know that the task is done.
                record_path = os.path.join(task.output_dir, RUN_FILE)
                try:
                    write_json_atomic(record_path, record)
                except FileNotFoundError:
                    make_dirs(task.output_dir)
                    write_json_atomic(record_path, record)
        except OSError as exc:
            self.log(f"task {task.key}: cannot write {RUN_FILE}: {exc}")
        self.emit(task, state, end, exit_code, reason, task.start)
        self.retire(task)

    def retire(self, task: Task) -> None:
        runs = self.active.get(task.key)
        if runs is not None:
            with contextlib.suppress(ValueError):
                runs.remove(task)
            if not runs:
                del self.active[task.key]
        task.batch.remaining -= 1
        if task.batch.remaining <= 0:
            self.done_batches.append(task.batch)
        self.last_activity = time.monotonic()

    def delete_batch(self, batch: Batch) -> None:
        try:
            os.unlink(batch.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.log(f"cannot delete finished batch {batch.path}: {exc}")
        # Journals are reopened on demand, so one that was removed and created again
        # between batches is written to under its current name.
        self.close_journals()

    def close_journals(self) -> None:
        for fd in self.journals.values():
            os.close(fd)
        self.journals.clear()

    def emit(
        self,
        task: Task,
        event: str,
        when: float,
        exit_code: int | None,
        reason: str | None,
        start: float | None = None,
    ) -> None:
        """Queue a journal line; lines are written before the runner next sleeps."""
        line = event_line(task.key, event, when, exit_code, reason, start)
        lines = self.outbox.get(task.events)
        if lines is None:
            self.outbox[task.events] = [line]
        else:
            lines.append(line)

    def flush_journals(self) -> bool:
        """Write the queued journal lines; False if some are still held back.

        Lines that cannot be written (a full disk) stay queued, in order, for the next
        flush: an event is never dropped.  Batches whose events are all written are
        deleted after the write, never before.
        """
        if not self.outbox and not self.done_batches:
            return True
        outbox, self.outbox = self.outbox, {}
        failure: OSError | None = None
        for path, lines in outbox.items():
            if failure is not None:
                self.outbox[path] = lines
                continue
            try:
                # One write of whole lines to an O_APPEND descriptor: never interleaved
                # with another writer's line, and taken back if the disk fills midway.
                append_whole(self.journal_fd(path), b"".join(lines))
            except OSError as exc:
                # Keep this journal's lines and every later one's: a full disk fails them
                # all, and trying each would cost a system call per journal per retry.
                self.outbox[path] = lines
                failure = exc
        if failure is not None:
            if not self.journals_failing:
                held = sum(len(lines) for lines in self.outbox.values())
                self.log(f"cannot append to the journals ({failure}); {held} event(s) "
                         f"held back, retried every {JOURNAL_RETRY_SECONDS} s")
            self.journals_failing = True
            return False
        if self.journals_failing:
            self.journals_failing = False
            self.log("journals writable again; every held-back event is written")
        done, self.done_batches = self.done_batches, []
        for batch in done:
            self.delete_batch(batch)
        return True

    def journal_fd(self, path: str) -> int:
        fd = self.journals.get(path)
        if fd is not None:
            return fd
        if len(self.journals) >= MAX_OPEN_JOURNALS:
            self.close_journals()
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, PRIVATE_FILE)
        except FileNotFoundError:
            make_dirs(os.path.dirname(path))
            fd = os.open(path, flags, PRIVATE_FILE)
        try:
            # A writer killed in mid-line would glue our first line to its fragment.
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")
        except OSError:
            os.close(fd)
            raise
        self.journals[path] = fd
        return fd


def disk_full(problem: TaskSetupError) -> bool:
    """Whether a task could not be set up only because the disk is full."""
    cause = problem.__cause__
    return isinstance(cause, OSError) and cause.errno in DISK_FULL_ERRNOS


def append_whole(fd: int, data: bytes) -> None:
    """Append ``data`` to an O_APPEND descriptor entirely, or not at all.

    A write cut short by a full disk leaves part of a line behind; it is cut off again
    (a truncation always succeeds), so readers never meet a half-written line from us
    and the caller can write the whole of ``data`` again later.
    """
    view = memoryview(data)
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, view[written:])
    except OSError:
        if written:
            end = os.lseek(fd, 0, os.SEEK_END)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, end - written)
        raise


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
    parser = argparse.ArgumentParser(prog="python -m ganga_like_local.runner")
    parser.add_argument("runner_dir", type=Path)
    parser.add_argument("--lock-fd", type=int, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runner_dir: Path = args.runner_dir.absolute()
    runner_dir.mkdir(PRIVATE_DIR, parents=True, exist_ok=True)
    lock_fd = take_lock(runner_dir, args.lock_fd)
    if lock_fd is None:
        return 0  # another runner is alive and will see the queue
    os.chdir("/")  # do not keep any submitter's directory busy
    runner = Runner(runner_dir, lock_fd)
    runner.install_signals()
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
        runner.shutdown()
        runner.log(f"runner exiting ({reason}), {len(runner.running)} task(s) left running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
