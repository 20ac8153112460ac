"""Detached Local runner: a per-directory daemon that runs task commands.

Started by ``runner_client`` as ``python -m ganga_like_local.runner RUNNER_DIR --lock-fd N``
in a new session, it runs the tasks of the batches queued in ``RUNNER_DIR/queue`` first in,
first out, at most ``max_concurrent`` at a time, each in its own process group, and writes
every state change to files (see ``runner_client`` for the layout).  Commands are never run
through a shell.

The event loop sleeps in ``signal.sigtimedwait``: SIGCHLD means a task ended, SIGUSR1 that
a client queued something, SIGTERM/SIGINT that the runner should stop (leaving running tasks
alone).  It exits by itself after ``idle_exit_seconds`` with nothing to do.  Starting and
ending tasks all happens on the main thread; a helper thread only creates the directories
and output files of the next tasks in line, so that file system work overlaps with the rest.

Crash safety: a batch is moved to ``accepted/`` when read and deleted once all its tasks
have ended.  On start-up a runner goes through ``accepted/``: tasks with an ``__exit__`` of
that batch are done (their final event is appended if the journal lacks it), tasks with a
``__start__`` but no ``__exit__`` are reported failed and their process group is killed,
and tasks that never started are queued again.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import glob
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from pathlib import Path
from typing import Any

from ganga_like_local.runner_client import (
    ACCEPTED_DIR,
    BATCH_SUFFIX,
    CONFIG_NAME,
    EXIT_FILE,
    KILL_SUFFIX,
    LOCK_NAME,
    LOG_NAME,
    PID_NAME,
    QUEUE_DIR,
    RUNNER_SIGNALS,
    START_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    TERMINAL_EVENTS,
    event_line,
    read_events,
)

KILL_GRACE_SECONDS = 3.0
# Look at the queue at least this often even without a wake-up signal; a cheap safety net.
SAFETY_WAKE_SECONDS = 30.0
DEFAULT_IDLE_EXIT_SECONDS = 30.0
# Journals are shared by many tasks, so their descriptors are kept open, up to this many.
MAX_OPEN_JOURNALS = 64
# Upcoming tasks prepared ahead (two open files each); twice the concurrency, at most this.
MAX_PREFETCH = 64
# A process counts as part of an orphaned task only if it started after the task did,
# give or take this much (clock ticks and boot time are coarse).
ORPHAN_START_SLACK_SECONDS = 2.0

WAKE_SIGNALS = RUNNER_SIGNALS
_FLAGS_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


class TaskSetupError(Exception):
    """A task cannot be started; the message is the reason reported for it."""


class Batch:
    """An accepted batch: its file is deleted when ``remaining`` drops to zero."""

    __slots__ = ("base_env", "id", "path", "remaining")

    def __init__(self, batch_id: str, path: Path, base_env: dict[str, str]) -> None:
        self.id = batch_id
        self.path = path
        self.base_env = base_env
        self.remaining = 0


class Task:
    """One run of a task spec; a resubmitted key is a new Task."""

    __slots__ = (
        "argv",
        "batch",
        "env",
        "events",
        "finished",
        "inputs",
        "key",
        "kill_requested",
        "output_dir",
        "patterns",
        "pid",
        "prepared",
        "proc",
        "start",
        "workdir",
    )

    def __init__(self, row: list[Any], batch: Batch) -> None:
        self.key: str = row[0]
        self.argv: list[str] = row[1]
        self.env: dict[str, str] = row[2]
        self.workdir: str = row[3]
        self.output_dir: str = row[4]
        self.inputs: list[str] = row[5]
        self.patterns: list[str] = row[6]
        self.events: str = row[7]
        self.batch = batch
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.start: float | None = None
        self.kill_requested = False
        self.finished = False
        self.prepared: Preparation | None = None  # set once handed to the helper thread


class Preparation:
    """Outcome of preparing a task on the helper thread: its stdout/stderr, or why not."""

    __slots__ = ("done", "error", "fds")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.fds: tuple[int, int] | None = None
        self.error: str | None = None


class Preparer:
    """Helper thread that creates the directories and output files of upcoming tasks.

    It only touches the files of tasks that have not started; everything about starting
    and ending tasks stays on the main thread.  It is created with the wake-up signals
    blocked (inherited from the main thread), so those keep going to sigtimedwait.
    """

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Task] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None

    def hand(self, task: Task) -> None:
        task.prepared = Preparation()
        if self.thread is None:
            self.thread = threading.Thread(target=self.work, name="prepare", daemon=True)
            self.thread.start()
        self.jobs.put(task)

    def work(self) -> None:
        while True:
            task = self.jobs.get()
            preparation = task.prepared
            assert preparation is not None
            try:
                preparation.fds = prepare_files(task)
            except TaskSetupError as exc:
                preparation.error = str(exc)
            except Exception as exc:  # never leave the main thread waiting
                preparation.error = f"cannot prepare task: {exc}"
            finally:
                preparation.done.set()


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
        self.preparer = Preparer()
        self.log_fd = os.open(
            runner_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
        )

    # ----------------------------------------------------------------- life cycle

    def install_signals(self) -> None:
        """Block the wake-up signals; they are taken with sigtimedwait.

        Handlers are installed as well because the mask is lifted while processes are
        spawned (children must not inherit it), and a signal arriving then must only set
        a flag instead of killing the runner or being lost.
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
        self.recover()
        while not self.stopping:
            if self.woken:
                self.woken = False
                self.read_config()
                self.read_queue()
            self.reap()
            self.enforce_kill_deadlines()
            self.start_tasks()
            if self.reap():
                continue  # tasks ended while signals were unblocked for spawning
            if self.woken or self.stopping:
                continue  # a signal was handled while the mask was lifted
            timeout = self.next_timeout()
            if timeout is None:
                if self.leave_if_still_idle():
                    return
                continue
            self.wait(timeout)

    def wait(self, timeout: float) -> None:
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
        if not self.pending and not self.running and not self.kill_deadlines:
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
        # A client that found the lock taken just now relies on us to see its batch.
        if not self.queue_has_batches():
            return True
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True  # the new holder is or will be a runner, and reads the queue
        self.holds_lock = True
        self.write_pid_file()
        self.log("work arrived while leaving, staying")
        self.woken = True
        self.last_activity = time.monotonic()
        return False

    def write_pid_file(self) -> None:
        tmp = self.dir / f".{PID_NAME}.{os.getpid()}.tmp"
        tmp.write_text(f"{os.getpid()}\n")
        os.replace(tmp, self.dir / PID_NAME)

    def remove_pid_file(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.dir / PID_NAME)

    def shutdown(self) -> None:
        if self.holds_lock:
            self.remove_pid_file()
        self.close_journals()

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with contextlib.suppress(OSError):
            os.write(self.log_fd, f"{stamp} [{os.getpid()}] {message}\n".encode())

    # ------------------------------------------------------------------- requests

    def queue_has_batches(self) -> bool:
        return any(name.endswith(BATCH_SUFFIX) for name in self.queue_names())

    def queue_names(self) -> list[str]:
        try:
            names = os.listdir(self.queue_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.endswith(".json") and not n.startswith("."))

    def read_queue(self) -> None:
        """Take batch and kill requests in submission order."""
        for name in self.queue_names():
            path = self.queue_dir / name
            try:
                data = json.loads(path.read_bytes())
                if name.endswith(KILL_SUFFIX):
                    self.kill_keys(check_kill(data))
                    os.unlink(path)
                elif name.endswith(BATCH_SUFFIX):
                    check_batch(data)
                    accepted = self.accepted_dir / name
                    self.accepted_dir.mkdir(exist_ok=True)
                    # Moved before any task starts: a crash after this point is recovered
                    # from accepted/, a crash before it simply reads the batch again.
                    os.replace(path, accepted)
                    self.add_batch(data, accepted, recovering=False)
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
                if task.proc is None:
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
        if self.pending and len(self.running) < self.max_concurrent:
            # Children inherit the signal mask through exec; a task with SIGTERM blocked
            # could not be killed gracefully.  Lift it once for the whole spawning round.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, WAKE_SIGNALS)
            try:
                while self.pending and len(self.running) < self.max_concurrent:
                    task = self.pending.popleft()
                    if not task.finished:
                        self.start_task(task)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, WAKE_SIGNALS)
        self.prefetch()

    def prefetch(self) -> None:
        """Have the helper thread prepare the next tasks in line.

        Creating directories and output files is most of the cost of a start on a real
        file system; done ahead, on another core, it overlaps with spawning and waiting.
        """
        window = min(2 * self.max_concurrent, MAX_PREFETCH)
        for task in itertools.islice(self.pending, window):
            if task.prepared is None and not task.finished:
                self.preparer.hand(task)

    def start_task(self, task: Task) -> None:
        now = time.time()
        try:
            out, err = files_of(task)
        except TaskSetupError as exc:
            self.finish(task, "failed", None, str(exc))
            return
        start_path = os.path.join(task.output_dir, START_FILE)
        failure: str | None = None
        try:
            start_fd = write_placeholder(start_path, now, task.batch.id)
            try:
                proc = self.spawn(task, out, err)
            except BaseException:
                os.close(start_fd)
                with contextlib.suppress(OSError):
                    os.unlink(start_path)
                raise
        except TaskSetupError as exc:
            failure = str(exc)
        except OSError as exc:
            failure = spawn_failure_reason(task, exc)
        except (ValueError, TypeError) as exc:
            failure = f"invalid command: {exc}"
        finally:
            os.close(out)
            os.close(err)
        if failure is not None:
            self.finish(task, "failed", None, failure)
            return
        task.proc = proc
        task.pid = proc.pid
        task.start = now
        self.running[proc.pid] = task
        try:
            # Same length or longer than the placeholder: one overwrite, no truncation.
            os.pwrite(start_fd, start_record(now, task.batch.id, proc.pid), 0)
        except OSError as exc:
            self.log(f"task {task.key}: cannot write {start_path}: {exc}")
        finally:
            os.close(start_fd)
        self.emit(task, "started", now, None, None)

    def spawn(self, task: Task, out: int, err: int) -> subprocess.Popen[bytes]:
        env = task.batch.base_env
        if task.env:
            env = {**env, **task.env}
        # A new session makes the task its own process group, so a kill reaches
        # everything it started.  Popen searches argv[0] on the PATH of env.
        return subprocess.Popen(
            task.argv,
            stdin=self.devnull,
            stdout=out,
            stderr=err,
            cwd=task.workdir,
            env=env,
            close_fds=True,
            start_new_session=True,
        )

    # ------------------------------------------------------------------- finishing

    def reap(self) -> bool:
        """Collect ended children; return whether any task ended."""
        ended = False
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
            code = os.waitstatus_to_exitcode(status)
            if task.proc is not None:
                # Popen must not wait for this pid itself later: it may belong to a new
                # child by then.
                task.proc.returncode = code
            self.task_ended(task, code)
            ended = True
        return ended

    def task_ended(self, task: Task, code: int) -> None:
        if task.kill_requested:
            self.finish(task, "killed", code, "killed by user")
        elif code > 0:
            self.finish(task, "failed", code, f"exit code {code}")
        elif code < 0:
            self.finish(task, "failed", code, f"killed by signal {signal_name(-code)}")
        else:
            reason = self.collect_outputs(task)
            self.finish(task, "failed" if reason else "completed", code, reason)

    def collect_outputs(self, task: Task) -> str | None:
        """Move output files into output_dir; the reason for failing, if any."""
        problem: str | None = None
        same_dir = os.path.realpath(task.workdir) == os.path.realpath(task.output_dir)
        for pattern in task.patterns:
            matches = glob.glob(pattern, root_dir=task.workdir)
            if not matches:
                problem = problem or f"output pattern '{pattern}' matched no file"
                continue
            if same_dir:
                continue
            for match in matches:
                source = os.path.join(task.workdir, match)
                target = os.path.join(task.output_dir, os.path.basename(match))
                try:
                    move(source, target)
                except OSError as exc:
                    problem = problem or f"cannot collect output {match}: {exc}"
        return problem

    def finish(self, task: Task, state: str, exit_code: int | None, reason: str | None) -> None:
        """Record the end of a task: ``__exit__`` first, then the journal event."""
        task.finished = True
        end = time.time()
        record = {
            "state": state,
            "exit_code": exit_code,
            "start": task.start,
            "end": end,
            "reason": reason,
            "batch": task.batch.id,
        }
        exit_path = os.path.join(task.output_dir, EXIT_FILE)
        try:
            try:
                write_json_atomic(exit_path, record)
            except FileNotFoundError:
                # Never started (killed while queued, setup failed): recovery still needs
                # the file to know that the task is done.
                make_dirs(task.output_dir)
                write_json_atomic(exit_path, record)
        except OSError as exc:
            self.log(f"task {task.key}: cannot write {EXIT_FILE}: {exc}")
        self.emit(task, state, end, exit_code, reason)
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
            self.delete_batch(task.batch)
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
        self, task: Task, event: str, when: float, exit_code: int | None, reason: str | None
    ) -> None:
        line = event_line(task.key, event, when, exit_code, reason)
        try:
            # One write of a whole line to an O_APPEND descriptor: never interleaved.
            os.write(self.journal_fd(task.events), line)
        except OSError as exc:
            self.log(f"task {task.key}: cannot append to {task.events}: {exc}")

    def journal_fd(self, path: str) -> int:
        fd = self.journals.get(path)
        if fd is not None:
            return fd
        if len(self.journals) >= MAX_OPEN_JOURNALS:
            self.close_journals()
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, flags, 0o644)
        # A writer killed in mid-line would glue our first line to its fragment.
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")
        self.journals[path] = fd
        return fd

    # ------------------------------------------------------------------- recovery

    def recover(self) -> None:
        """Resume the batches a previous runner accepted but did not finish."""
        try:
            names = sorted(
                n for n in os.listdir(self.accepted_dir) if n.endswith(".json") and n[0] != "."
            )
        except FileNotFoundError:
            return
        journal_cache: dict[str, set[tuple[str, str, float]]] = {}
        groups: dict[int, list[float]] | None = None
        for name in names:
            path = self.accepted_dir / name
            try:
                data = json.loads(path.read_bytes())
                check_batch(data)
            except (OSError, ValueError) as exc:
                self.reject(path, exc)
                continue
            tasks = self.add_batch(data, path, recovering=True)
            for task in tasks:
                exit_record = read_json(os.path.join(task.output_dir, EXIT_FILE))
                start_record = read_json(os.path.join(task.output_dir, START_FILE))
                batch_id = task.batch.id
                if exit_record.get("batch") == batch_id:
                    self.replay_final_event(task, exit_record, journal_cache)
                    self.retire(task)
                elif start_record.get("batch") == batch_id:
                    if groups is None:
                        groups = process_groups()
                    self.fail_interrupted(task, start_record, groups)
                elif newer(exit_record, batch_id) or newer(start_record, batch_id):
                    self.retire(task)  # a later resubmission of the key took over
                else:
                    self.pending.append(task)
                    self.active.setdefault(task.key, []).append(task)
        if self.pending or names:
            self.log(f"recovered {len(names)} batch(es), {len(self.pending)} task(s) queued")

    def replay_final_event(
        self,
        task: Task,
        record: dict[str, Any],
        cache: dict[str, set[tuple[str, str, float]]],
    ) -> None:
        """Append the final event of a finished task if the crash came before it."""
        seen = cache.get(task.events)
        if seen is None:
            events, _ = read_events(Path(task.events), 0)
            seen = {(e.key, e.event, e.time) for e in events if e.event in TERMINAL_EVENTS}
            cache[task.events] = seen
        state, end = record.get("state"), record.get("end")
        if not isinstance(state, str) or not isinstance(end, int | float):
            return
        if (task.key, state, end) not in seen:
            self.emit(task, state, float(end), record.get("exit_code"), record.get("reason"))

    def fail_interrupted(
        self, task: Task, record: dict[str, Any], groups: dict[int, list[float]]
    ) -> None:
        """A task that was running when the previous runner died: kill it, report it."""
        pid = record.get("pid")
        started = record.get("time")
        task.start = float(started) if isinstance(started, int | float) else None
        if isinstance(pid, int) and task.start is not None:
            members = groups.get(pid, [])
            # Only a group whose processes all started after the task is the task's;
            # anything else is a reused pid.
            if members and min(members) >= task.start - ORPHAN_START_SLACK_SECONDS:
                signal_group(pid, signal.SIGTERM)
                self.kill_deadlines[pid] = time.monotonic() + KILL_GRACE_SECONDS
        shown = pid if isinstance(pid, int) else "unknown"
        self.finish(
            task, "failed", None, f"runner restarted while the task was running (pid {shown})"
        )


# ----------------------------------------------------------------------- helpers


def check_kill(data: Any) -> list[str]:
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise ValueError("a kill request needs a list of keys")
    return keys


def check_batch(data: Any) -> None:
    """Reject malformed batches before they are accepted (cheap, shape only)."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ValueError("a batch needs an id")
    if not isinstance(data.get("base_env", {}), dict):
        raise ValueError("base_env must be an object")
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise ValueError("a batch needs a list of tasks")
    for row in tasks:
        if not (
            isinstance(row, list)
            and len(row) == 8
            and isinstance(row[0], str)
            and isinstance(row[1], list)
            and row[1]
            and isinstance(row[2], dict)
            and all(isinstance(row[i], str) for i in (3, 4, 7))
            and all(isinstance(row[i], list) for i in (5, 6))
        ):
            raise ValueError(f"malformed task {row!r:.200}")


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def signal_name(signum: int) -> str:
    try:
        return f"{signum} ({signal.Signals(signum).name})"
    except ValueError:
        return str(signum)


def spawn_failure_reason(task: Task, exc: OSError) -> str:
    program = task.argv[0]
    if isinstance(exc, FileNotFoundError):
        if exc.filename == task.workdir:
            return f"cannot enter workdir: {task.workdir}"
        if "/" in program and os.path.exists(os.path.join(task.workdir, program)):
            return f"interpreter of program not found: {program}"
        return f"program not found: {program}"
    if isinstance(exc, PermissionError):
        return f"program is not executable: {program}"
    return f"cannot run program {program}: {exc.strerror or exc}"


def prepare_files(task: Task) -> tuple[int, int]:
    """Directories, inputs, and open stdout/stderr of a task that has not started."""
    try:
        fresh = make_dirs(task.output_dir)
        if task.workdir != task.output_dir:
            make_dirs(task.workdir)
    except OSError as exc:
        raise TaskSetupError(f"cannot create directory: {exc}") from exc
    for source in task.inputs:
        place_input(source, task.workdir)
    try:
        if not fresh:  # a new directory cannot hold the __exit__ of an earlier run
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(task.output_dir, EXIT_FILE))
        out = os.open(os.path.join(task.output_dir, STDOUT_FILE), _FLAGS_CREATE, 0o644)
        try:
            err = os.open(os.path.join(task.output_dir, STDERR_FILE), _FLAGS_CREATE, 0o644)
        except OSError:
            os.close(out)
            raise
    except OSError as exc:
        raise TaskSetupError(f"cannot write to output directory: {exc}") from exc
    return out, err


def files_of(task: Task) -> tuple[int, int]:
    """The task's open stdout/stderr: from the helper thread, or prepared right now."""
    preparation = task.prepared
    if preparation is None:
        return prepare_files(task)
    preparation.done.wait()
    if preparation.fds is None:
        raise TaskSetupError(preparation.error or "cannot prepare task")
    fds, preparation.fds = preparation.fds, None
    return fds


def discard_files(task: Task) -> None:
    """Undo the preparation of a task that will not start after all."""
    preparation = task.prepared
    if preparation is None:
        return
    preparation.done.wait()
    if preparation.fds is not None:
        for fd in preparation.fds:
            os.close(fd)
        preparation.fds = None
        for name in (STDOUT_FILE, STDERR_FILE):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(task.output_dir, name))


def write_placeholder(path: str, when: float, batch_id: str) -> int:
    """A pid-less ``__start__``, written before the process exists; returned open.

    A crash between spawning and recording the pid is then reported as an interrupted
    run after a restart, never taken for a task to run again.
    """
    try:
        fd = os.open(path, _FLAGS_CREATE, 0o644)
    except OSError as exc:
        raise TaskSetupError(f"cannot write to output directory: {exc}") from exc
    try:
        os.write(fd, start_record(when, batch_id, None))
    except OSError as exc:
        os.close(fd)
        raise TaskSetupError(f"cannot write to output directory: {exc}") from exc
    return fd


def make_dirs(path: str) -> bool:
    """Create a directory and its parents; return whether it is new."""
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return False
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)
    return True


def place_input(source: str, workdir: str) -> None:
    """Hard-link (or copy, across file systems) an input into the workdir."""
    target = os.path.join(workdir, os.path.basename(source.rstrip("/")))
    if not os.path.exists(source):
        raise TaskSetupError(f"input file not found: {source}")
    try:
        if os.path.isdir(source):
            shutil.copytree(source, target, dirs_exist_ok=True)
            return
        if os.path.lexists(target):
            if os.path.samefile(source, target):
                return
            os.unlink(target)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
    except OSError as exc:
        raise TaskSetupError(f"cannot place input {source}: {exc}") from exc


def move(source: str, target: str) -> None:
    try:
        os.replace(source, target)
    except OSError:
        shutil.move(source, target)  # another file system, or a directory onto a directory


def start_record(when: float, batch_id: str, pid: int | None) -> bytes:
    """``__start__`` content; the pid comes last, padded to the width of ``null``."""
    shown = "null" if pid is None else f"{pid:<4}"
    return f'{{"time": {when!r}, "batch": {json.dumps(batch_id)}, "pid": {shown}}}'.encode()


def write_json(path: str, value: dict[str, Any]) -> None:
    fd = os.open(path, _FLAGS_CREATE, 0o644)
    try:
        os.write(fd, json.dumps(value).encode())
    finally:
        os.close(fd)


def write_json_atomic(path: str, value: dict[str, Any]) -> None:
    """Readers polling for the file must never see it half written."""
    tmp = f"{path}.tmp"
    write_json(tmp, value)
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            value = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def submission_time(batch_id: str) -> int:
    """Batch ids start with the submitter's clock in nanoseconds."""
    head = batch_id.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def newer(record: dict[str, Any], batch_id: str) -> bool:
    """Whether a state file belongs to a batch submitted after ``batch_id``."""
    other = record.get("batch")
    return isinstance(other, str) and other > batch_id  # ids start with a padded clock


def process_groups() -> dict[int, list[float]]:
    """Live processes by process group, as unix start times (from /proc)."""
    groups: dict[int, list[float]] = {}
    try:
        boot = boot_time()
        ticks = os.sysconf("SC_CLK_TCK")
        entries = os.listdir("/proc")
    except (OSError, ValueError):
        return groups
    for entry in entries:
        if entry.isdigit():
            info = proc_stat(entry)
            if info is not None and info[0] not in "ZX":
                groups.setdefault(info[1], []).append(boot + info[2] / ticks)
    return groups


def proc_stat(pid: str) -> tuple[str, int, int] | None:
    """State, process group and start time in clock ticks of a process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def boot_time() -> float:
    with open("/proc/stat", "rb") as handle:
        for line in handle:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")


# --------------------------------------------------------------------------- main


def take_lock(runner_dir: Path, inherited: int | None) -> int | None:
    """The locked descriptor, or None if another runner holds the lock."""
    if inherited is not None:
        fd = inherited
    else:
        fd = os.open(runner_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
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
    runner_dir.mkdir(parents=True, exist_ok=True)
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
