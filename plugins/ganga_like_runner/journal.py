"""The Local runner's events journals: lines queued per journal, written in whole lines.

Journals are shared by many tasks, so their descriptors are kept open (up to
``MAX_OPEN_JOURNALS``).  A line that cannot be written (a full disk) stays queued, in order,
and is written by a later flush: an event is never dropped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from ganga_like_runner.protocol import PRIVATE_FILE
from ganga_like_runner.task_files import make_dirs

MAX_OPEN_JOURNALS = 64
# Journal lines that could not be written (a full disk) are kept and written again this
# often: an event is never dropped.
JOURNAL_RETRY_SECONDS = 0.5


class Journals:
    """Queued journal lines and the open journal descriptors."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.fds: dict[str, int] = {}
        self.outbox: dict[str, list[bytes]] = {}  # journal lines, written before sleeping
        self.failing = False  # the last flush could not write everything

    def add(self, path: str, line: bytes) -> None:
        lines = self.outbox.get(path)
        if lines is None:
            self.outbox[path] = [line]
        else:
            lines.append(line)

    def write(self) -> bool:
        """Write the queued lines; False if some are still held back."""
        outbox, self.outbox = self.outbox, {}
        failure: OSError | None = None
        for path, lines in outbox.items():
            if failure is not None:
                self.outbox[path] = lines
                continue
            try:
                # One write of whole lines to an O_APPEND descriptor: never interleaved
                # with another writer's line, and taken back if the disk fills midway.
                append_whole(self.fd(path), b"".join(lines))
            except OSError as exc:
                # Keep this journal's lines and every later one's: a full disk fails them
                # all, and trying each would cost a system call per journal per retry.
                self.outbox[path] = lines
                failure = exc
        if failure is not None:
            if not self.failing:
                held = sum(len(lines) for lines in self.outbox.values())
                self.log(
                    f"cannot append to the journals ({failure}); {held} event(s) "
                    f"held back, retried every {JOURNAL_RETRY_SECONDS} s"
                )
            self.failing = True
            return False
        if self.failing:
            self.failing = False
            self.log("journals writable again; every held-back event is written")
        return True

    def fd(self, path: str) -> int:
        fd = self.fds.get(path)
        if fd is not None:
            return fd
        if len(self.fds) >= MAX_OPEN_JOURNALS:
            self.close()
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
        self.fds[path] = fd
        return fd

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


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
