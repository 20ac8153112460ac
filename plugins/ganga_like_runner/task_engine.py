"""The Local runner's work: queued, running and ended tasks, and what is written about them.

``Engine`` starts tasks (up to ``max_concurrent`` at once), records their end in their
``__run__`` files and their events in the journals, kills them on request, and deletes a
batch once the final events of all its tasks are written.  The processes themselves are
started and waited for by one thread per slot (``slots``): the engine prepares each task's
files and hands it over ahead of its turn, so that a slot whose task ended starts the next
at once, and takes the slots' events (started, could not start, ended) on the main thread,
where everything else happens.  The process around it (signals, sleeping, the request
queue, leaving when idle) is ``loop.Runner``.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import signal
import time
from collections import deque
from pathlib import Path
from typing import Any

from ganga_like_runner import batch_kills
from ganga_like_runner.journal import Journals, append_whole
from ganga_like_runner.protocol import (
    ACCEPTED_DIR,
    LOG_NAME,
    PRIVATE_FILE,
    RUN_FILE,
    SECRET_VARIABLES,
    event_line,
)
from ganga_like_runner.slots import ENDED, FAILED, NOT_SET_UP, STARTED, SlotEvent, Slots
from ganga_like_runner.spawn import Spawner, signal_group, signal_name
from ganga_like_runner.task_files import (
    collect_outputs,
    discard_files,
    failure_note,
    files_of,
    make_dirs,
    prepare_ahead,
    write_json_atomic,
    write_record,
)
from ganga_like_runner.tasks import Batch, Task, TaskSetupError, submission_time

DEFAULT_IDLE_EXIT_SECONDS = 30.0
# A kill request's key ending so names every task whose key starts with it.
KEY_PREFIX_END = "."
KILLED_REASON = "killed by user"
# A killed task gets this long between SIGTERM and SIGKILL.
KILL_GRACE_SECONDS = 3.0
# Upcoming tasks prepared ahead (four open files each): as many as run at once, at most this.
MAX_PREPARED_AHEAD = 64
# A task's "started" event is written only once it has run this long: a task that ends
# sooner is reported by its final event alone, which carries its start time.  Short tasks
# then cost one journal line and one status change in the monitor instead of two.
STARTED_EVENT_DELAY_SECONDS = 0.1
# A task that cannot be set up because the disk is full waits for space instead of
# failing; starting is tried again this often.
DISK_FULL_RETRY_SECONDS = 0.5
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class Engine:
    """The tasks of one runner process and their bookkeeping."""

    def __init__(self, runner_dir: Path) -> None:
        self.dir = runner_dir
        self.accepted_dir = runner_dir / ACCEPTED_DIR
        self.pending: deque[Task] = deque()
        self.running: dict[int, Task] = {}
        self.active: dict[str, list[Task]] = {}  # key -> its queued and running runs
        self.kill_deadlines: dict[int, float] = {}  # process group -> when to SIGKILL it
        self.max_concurrent = 1
        # The capacity tasks are packed into (a pilot's allocation): None, no limit but the
        # count.  ``used_*`` is what the running tasks hold of it.
        self.capacity_cores: int | None = None
        self.capacity_memory: int | None = None
        self.used_cores = 0
        self.used_memory = 0
        # The runner's own environment under every batch's (a pilot: the allocation's).
        self.inherited_env: dict[str, str] | None = None
        self.idle_exit = DEFAULT_IDLE_EXIT_SECONDS
        self.settings_time = -1  # submission time (ns) of the settings in force
        self.last_activity = time.monotonic()
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self.spawner = Spawner(self.devnull)
        self.slots = Slots(self.spawner, self.log)
        self.handed = 0  # tasks handed to the slots and not started yet
        self.ended: list[tuple[Task, int, float]] = []  # reaped: files not yet written
        self.unannounced: deque[Task] = deque()  # started, "started" event not written yet
        self.journals = Journals(self.log)
        # Batches whose tasks have all ended: deleted once their final events are written,
        # so that a runner dying before that still finds them (and the events) at start-up.
        self.done_batches: list[Batch] = []
        self.starts_held_until = 0.0  # monotonic; the disk was full when a task was set up
        self.log_fd = os.open(
            runner_dir / LOG_NAME,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
            PRIVATE_FILE,
        )

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with contextlib.suppress(OSError):
            # Whole or not at all: a full disk drops the line rather than half of it.
            append_whole(self.log_fd, f"{stamp} [{os.getpid()}] {message}\n".encode())

    # ------------------------------------------------------------------- batches

    def reject(self, path: Path, problem: Exception) -> None:
        """Keep a bad request for inspection, hidden from the queue scan by a dot."""
        self.log(f"rejected request {path.name}: {problem}")
        try:
            os.replace(path, path.with_name(f".rejected-{path.name}"))
        except OSError as exc:
            self.log(f"cannot set aside {path}: {exc}")

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
        base_env = data.get("base_env", {})
        if self.inherited_env is not None:
            base_env = {**self.inherited_env, **base_env}
        secrets = {k: os.environ[k] for k in SECRET_VARIABLES if k in os.environ}
        if secrets:
            base_env = {**secrets, **base_env}
        batch = Batch(str(data["id"]), path, base_env)
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
        """Kill the tasks with these keys; a key ending in ``.`` names every task whose key
        starts with it (every subjob of a master: ``"12."``)."""
        prefixes = tuple(key for key in keys if key.endswith(KEY_PREFIX_END))
        named = [key for key in keys if not key.endswith(KEY_PREFIX_END)]
        if prefixes:
            named.extend(key for key in self.active if key.startswith(prefixes))
        queued: list[Task] = []
        for key in named:
            for task in list(self.active.get(key, ())):
                if task.pid is None and self.slots.withdraw(task):
                    # Still queued (skipped when its turn comes) or handed to the slots
                    # (skipped by the slot that takes it).
                    if task.record_fd is None:
                        discard_files(task)
                        queued.append(task)
                        continue
                    self.unhand(task)  # handed: its files are task.files
                    task.record_fd = None
                    discard_files(task)
                    self.finish(task, "killed", None, KILLED_REASON)
                elif task.pid is None:
                    task.kill_requested = True  # being started: signalled once it runs
                elif not task.kill_requested:
                    task.kill_requested = True
                    signal_group(task.pid, signal.SIGTERM)
                    self.kill_deadlines[task.pid] = time.monotonic() + KILL_GRACE_SECONDS
        if queued:
            self.finish_queued(queued)

    def finish_queued(self, tasks: list[Task]) -> None:
        """Record the end of tasks killed before they started: one record per batch
        (``batch_kills``), then a journal line per task."""
        end = time.time()
        by_batch: dict[int, list[Task]] = {}
        for task in tasks:
            by_batch.setdefault(id(task.batch), []).append(task)
        for members in by_batch.values():
            batch = members[0].batch
            try:
                batch_kills.record_kill(batch.path, [t.key for t in members], end, KILLED_REASON)
            except OSError as exc:
                self.log(f"batch {batch.id}: cannot record the kill of its queued tasks: {exc}")
        for task in tasks:
            task.finished = True
            self.emit(task, "killed", end, None, KILLED_REASON)
            self.retire(task)

    def enforce_kill_deadlines(self) -> None:
        now = time.monotonic()
        for pgid, deadline in list(self.kill_deadlines.items()):
            if deadline <= now:
                signal_group(pgid, signal.SIGKILL)
                del self.kill_deadlines[pgid]

    # ------------------------------------------------------------------- starting

    def start_tasks(self) -> None:
        """Start tasks first in, first out while they fit: the count, and with a capacity
        the cores and memory left.  The first task in line that does not fit waits for
        running ones to end (no task overtakes it); one that could never fit fails.

        Up to as many tasks as there are slots are handed over ahead of their turn: the
        slot whose task ends first starts the next without waiting for this loop."""
        self.slots.resize(self.max_concurrent)
        while self.pending and self.has_room():
            if self.starts_held_until:
                if self.starts_held_until > time.monotonic():
                    return
                self.starts_held_until = 0.0
            task = self.pending[0]
            if task.finished:
                self.pending.popleft()
                continue
            too_big = self.never_fits(task)
            if too_big is None and not self.fits(task):
                return
            self.pending.popleft()
            if too_big is not None:
                discard_files(task)
                self.finish(task, "failed", None, too_big)
            else:
                self.start_task(task)

    def has_room(self) -> bool:
        ahead = min(self.max_concurrent, MAX_PREPARED_AHEAD)
        return len(self.running) + self.handed < self.max_concurrent + ahead

    def fits(self, task: Task) -> bool:
        cores, memory = self.capacity_cores, self.capacity_memory
        if cores is not None and self.used_cores + task.cores > cores:
            return False
        return memory is None or not task.memory or self.used_memory + task.memory <= memory

    def never_fits(self, task: Task) -> str | None:
        """Why ``task`` can never start within the capacity, or None."""
        cores, memory = self.capacity_cores, self.capacity_memory
        if cores is not None and task.cores > cores:
            return f"needs {task.cores} cores, the runner has {cores}"
        if memory is not None and task.memory > memory:
            mib = 1024**2
            return f"needs {task.memory // mib} MiB of memory, the runner has {memory // mib} MiB"
        return None

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
        if self.has_room() or self.starts_held_until:
            return  # room left: start_tasks has nothing to start (or the disk is full)
        window = min(self.max_concurrent, MAX_PREPARED_AHEAD)
        for task in itertools.islice(self.pending, window):
            if task.files is None and task.setup_error is None and not task.finished:
                if signal.SIGCHLD in signal.sigpending():
                    return
                prepare_ahead(task)

    def start_task(self, task: Task) -> None:
        """Prepare a task (if not yet) and hand it to the slots."""
        try:
            files = files_of(task)
        except TaskSetupError as exc:
            if disk_full(exc):
                self.hold(task, exc)
            else:
                self.finish(task, "failed", None, str(exc))
            return
        task.record_fd = files.run
        task.files = files  # the slot starting it closes stdout and stderr
        self.handed += 1
        self.used_cores += task.cores
        self.used_memory += task.memory
        self.slots.hand(task)

    def unhand(self, task: Task) -> None:
        """A handed task will not start: its place and its share of the capacity."""
        self.handed -= 1
        self.used_cores -= task.cores
        self.used_memory -= task.memory

    def take_slot_events(self) -> None:
        """What the slots did since the last look, in the order they did it."""
        events = self.slots.events
        while events:
            self.slot_event(events.popleft())

    def slot_event(self, event: SlotEvent) -> None:
        kind, task, value, when = event
        if kind == STARTED:
            self.handed -= 1
            task.files = None
            task.pid = value
            task.start = when
            self.running[value] = task
            self.unannounced.append(task)
            if task.kill_requested:
                signal_group(value, signal.SIGTERM)
                self.kill_deadlines[value] = time.monotonic() + KILL_GRACE_SECONDS
        elif kind == FAILED:
            self.unhand(task)
            task.files = None
            self.finish(task, "failed", None, value)
        elif kind == NOT_SET_UP:
            self.unhand(task)
            task.files = None
            if disk_full(value):
                assert task.record_fd is not None
                os.close(task.record_fd)
                task.record_fd = None
                task.record_size = 0
                task.claimed = False
                self.hold(task, value)
            else:
                # The final record replaces whatever was written: it never started.
                self.finish(task, "failed", None, str(value))
        elif kind == ENDED:
            assert task.pid is not None
            self.running.pop(task.pid, None)
            self.used_cores -= task.cores
            self.used_memory -= task.memory
            code, task.usage = value
            self.ended.append((task, code, when))
            self.last_activity = time.monotonic()

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

    def settle_ended(self) -> None:
        ended, self.ended = self.ended, []
        for task, code, end in ended:
            self.task_ended(task, code, end)

    def task_ended(self, task: Task, code: int, end: float) -> None:
        if task.kill_requested:
            self.finish(task, "killed", code, KILLED_REASON, end)
        elif code > 0:
            note = failure_note(task.workdir) if code == 1 else None
            if note is not None:  # the program's wrapper failed (a transfer): its reason
                self.finish(task, "failed", note[1], note[0], end)
            else:
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
        record: dict[str, Any] = {
            "state": state,
            "exit_code": exit_code,
            "start": task.start,
            "end": end,
            "reason": reason,
            "batch": task.batch.id,
            "pid": task.pid,
        }
        if task.usage is not None:
            record["usage"] = task.usage
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
        self.emit(task, state, end, exit_code, reason, task.start, task.usage)
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
        batch_kills.forget(batch.path)  # after the batch: its tasks stay ended
        # Journals are reopened on demand, so one that was removed and created again
        # between batches is written to under its current name.
        self.journals.close()

    def emit(
        self,
        task: Task,
        event: str,
        when: float,
        exit_code: int | None,
        reason: str | None,
        start: float | None = None,
        usage: list[float] | None = None,
    ) -> None:
        """Queue a journal line; lines are written before the runner next sleeps."""
        line = event_line(task.key, event, when, exit_code, reason, start, usage)
        self.journals.add(task.events, line)

    def flush_journals(self) -> bool:
        """Write the queued journal lines; False if some are still held back.

        Lines that cannot be written (a full disk) stay queued, in order, for the next
        flush: an event is never dropped.  Batches whose events are all written are
        deleted after the write, never before.
        """
        if not self.journals.outbox and not self.done_batches:
            return True
        if not self.journals.write():
            return False
        done, self.done_batches = self.done_batches, []
        for batch in done:
            self.delete_batch(batch)
        return True


def disk_full(problem: TaskSetupError) -> bool:
    """Whether a task could not be set up only because the disk is full."""
    cause = problem.__cause__
    return isinstance(cause, OSError) and cause.errno in DISK_FULL_ERRNOS
