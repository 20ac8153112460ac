"""Slot threads: each starts the tasks handed to it, one at a time, and waits for them.

``posix_spawn`` holds the interpreter lock and blocks until the child has exec'd, and a
single thread serving every slot leaves a slot idle from its task's end until that thread
has finished whatever it was doing for the others.  So each slot has a thread of its own
that waits for its own process (``wait4`` on its pid, which releases the lock) and, the
moment it ends, starts the next task the event loop handed ahead, without waiting for the
loop.  The loop keeps everything else: which task goes next (first in, first out, within
the capacity), the files, the journals, kills.

What a slot thread does is posted as events, in order, to the loop, which it wakes with a
SIGCHLD directed at the loop's thread: ``STARTED`` (the ``__run__`` start record is already
written, so that a runner dying right after the spawn finds the task running), ``FAILED``
(it could not be started: the reason), ``NOT_SET_UP`` (its placeholder record could not be
written, perhaps for a full disk: the loop decides) and ``ENDED`` (the exit code and the
resources used, from ``wait4``).

A task handed to the slots can still be withdrawn (killed while waiting for a slot) as long
as no slot thread has claimed it; both sides decide under one small lock.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ganga_like_runner.protocol import usage_of
from ganga_like_runner.spawn import Spawner, spawn_failure_reason
from ganga_like_runner.task_files import start_record, write_placeholder, write_record
from ganga_like_runner.tasks import Task, TaskSetupError

STARTED = "started"
FAILED = "failed"
NOT_SET_UP = "not set up"
ENDED = "ended"

# An event: (kind, task, value, time).  STARTED: the pid; FAILED: the reason; NOT_SET_UP:
# the TaskSetupError writing its placeholder record raised; ENDED: (exit code, resources
# used).
SlotEvent = tuple[str, Task, Any, float]


class Slots:
    """The slot threads of one runner and the queues between them and the event loop."""

    def __init__(self, spawner: Spawner, log: Callable[[str], None]) -> None:
        self.spawner = spawner
        self.log = log
        self.loop_thread = threading.get_ident()
        self.ready: deque[Task | None] = deque()  # None: one thread should leave
        self.available = threading.Semaphore(0)
        self.events: deque[SlotEvent] = deque()
        self.claiming = threading.Lock()
        # The working directory belongs to the whole process: one spawn at a time.
        self.spawning = threading.Lock()
        self.threads = 0

    def resize(self, count: int) -> None:
        """Have ``count`` slot threads: new ones start, extra ones leave after their task."""
        while self.threads < count:
            threading.Thread(target=self._serve, name="slot", daemon=True).start()
            self.threads += 1
        while self.threads > count:
            self.ready.appendleft(None)
            self.available.release()
            self.threads -= 1

    def hand(self, task: Task) -> None:
        """Queue a prepared task (``task.files`` open) for the next free slot."""
        self.ready.append(task)
        self.available.release()

    def withdraw(self, task: Task) -> bool:
        """Keep a handed or queued task from starting; False if a slot has claimed it."""
        with self.claiming:
            if task.claimed:
                return False
            task.finished = True
            return True

    def _claim(self, task: Task) -> bool:
        with self.claiming:
            if task.finished:
                return False
            task.claimed = True
            return True

    def _post(self, event: SlotEvent) -> None:
        self.events.append(event)
        signal.pthread_kill(self.loop_thread, signal.SIGCHLD)

    def _serve(self) -> None:
        while True:
            self.available.acquire()
            task = self.ready.popleft()
            if task is None:
                return
            if self._claim(task):
                self._run(task)

    def _run(self, task: Task) -> None:
        files = task.files
        assert files is not None
        try:
            # Written only now, by the slot that starts it: a task handed ahead but not
            # started when the runner dies is then found never started and runs again.
            task.record_size = write_placeholder(files.run, time.time(), task.batch.id)
        except TaskSetupError as exc:
            os.close(files.out)
            os.close(files.err)
            self._post((NOT_SET_UP, task, exc, time.time()))
            return
        try:
            with self.spawning:
                pid = self.spawner.spawn(task, files.out, files.err)
        except OSError as exc:
            self._post((FAILED, task, spawn_failure_reason(task, exc), time.time()))
            return
        except (ValueError, TypeError) as exc:
            self._post((FAILED, task, f"invalid command: {exc}", time.time()))
            return
        finally:
            os.close(files.out)
            os.close(files.err)
        started = time.time()
        try:
            task.record_size = write_record(
                files.run, start_record(started, task.batch.id, pid), task.record_size
            )
        except OSError as exc:  # the final record still replaces the placeholder
            self.log(f"task {task.key}: cannot write its start record: {exc}")
        self._post((STARTED, task, pid, started))
        try:
            _, status, rusage = os.wait4(pid, 0)
        except ChildProcessError:  # never: only this thread waits for this pid
            self._post((ENDED, task, (-signal.SIGKILL, None), time.time()))
            return
        ended = time.time()
        self._post((ENDED, task, (os.waitstatus_to_exitcode(status), usage_of(rusage)), ended))
