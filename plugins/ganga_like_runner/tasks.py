"""What the Local runner knows about batches and tasks, and the checks on requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


class TaskFiles:
    """Open descriptors of a prepared task: stdout, stderr and the ``__run__`` record.

    ``__run__`` is created empty ahead of time, which recovery reads the same as absent,
    so that starting and ending a task only writes into files that already exist:
    creating files is the costly part on a journaling file system.
    """

    __slots__ = ("err", "out", "run")

    def __init__(self, out: int, err: int, run: int) -> None:
        self.out = out
        self.err = err
        self.run = run


class Task:
    """One run of a task spec; a resubmitted key is a new Task."""

    __slots__ = (
        "argv",
        "batch",
        "claimed",
        "cores",
        "env",
        "events",
        "files",
        "finished",
        "inputs",
        "key",
        "kill_requested",
        "memory",
        "output_dir",
        "patterns",
        "pid",
        "record_fd",
        "record_size",
        "setup_error",
        "start",
        "usage",
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
        needs: dict[str, Any] = row[8] if len(row) > 8 else {}
        self.cores: int = needs.get("cores", 1)
        self.memory: int = needs.get("memory", 0)
        self.batch = batch
        self.pid: int | None = None  # set once the process exists
        self.start: float | None = None
        # What the ended process tree used, from its reaping (protocol.usage_of).
        self.usage: list[float] | None = None
        # The __run__ record, kept open from the start until the final record is in it,
        # and the size of what it holds (a shorter final record is padded to it).
        self.record_fd: int | None = None
        self.record_size = 0
        self.kill_requested = False
        self.finished = False
        # Taken by a slot thread to be started (see ``slots``): it can no longer be withdrawn.
        self.claimed = False
        # Prepared ahead of its turn: its open files, or why they could not be made.
        self.files: TaskFiles | None = None
        self.setup_error: str | None = None


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
            and (len(row) == 8 or (len(row) == 9 and _needs_ok(row[8])))
            and isinstance(row[0], str)
            and isinstance(row[1], list)
            and row[1]
            and isinstance(row[2], dict)
            and all(isinstance(row[i], str) for i in (3, 4, 7))
            and all(isinstance(row[i], list) for i in (5, 6))
        ):
            raise ValueError(f"malformed task {row!r:.200}")


def _needs_ok(needs: Any) -> bool:
    """The optional ninth field of a task row: ``{"cores": n >= 1, "memory": bytes >= 0}``."""
    if not isinstance(needs, dict):
        return False
    cores, memory = needs.get("cores", 1), needs.get("memory", 0)
    return (
        isinstance(cores, int)
        and not isinstance(cores, bool)
        and cores >= 1
        and isinstance(memory, int)
        and not isinstance(memory, bool)
        and memory >= 0
    )


def submission_time(batch_id: str) -> int:
    """Batch ids start with the submitter's clock in nanoseconds."""
    head = batch_id.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def newer(record: dict[str, Any], batch_id: str) -> bool:
    """Whether a state file belongs to a batch submitted after ``batch_id``."""
    other = record.get("batch")
    return isinstance(other, str) and other > batch_id  # ids start with a padded clock
