"""The files through which the Local runner and its clients talk: names, formats, records.

Both sides import this module: the runner (a separate process that must start without
importing ``ganga_like``) and the client (``client``, in the submitting process).  Nothing
here starts, signals or locks anything.

Layout of a runner directory::

    runner.lock   flock held by the live runner for its whole life
    runner.pid    ``PID host=NAME boot=ID`` of the live runner, written only while holding
                  the lock, its mtime refreshed every heartbeat (the gangadir may be on a
                  filesystem other hosts share: they judge the runner by this record,
                  as ``ganga_like.hosts`` describes; the lock may not reach them)
    runner.log    errors plus start/stop lines
    taken-over    the host of a runner that was gone (missed its heartbeats) when a client
                  on another host took the directory over; the next runner's start-up
                  recovery then signals none of the pids that runner recorded (they are
                  that host's) and removes the file
    config.json   optional {"max_concurrent": N, "idle_exit_seconds": S}, applied when woken
    queue/        batch and kill request files, handled in name (= submission) order
    accepted/     batches the runner has read and not finished yet (or whose final events
                  are not all written yet)

Per task the runner writes into ``output_dir``: ``stdout``/``stderr`` while the process runs
and one record file, ``__run__`` (JSON).  It is created empty before the task's turn (empty
means "not yet"), then overwritten in place, each time in one write:

* just before the process is spawned, the start record ``{"time", "batch", "pid": null}``;
* right after, the same with the pid (it stays null only if the runner died in between);
* once the task has ended, the final record ``{"state", "exit_code", "start", "end",
  "reason", "batch", "pid"}`` (and ``"usage"`` for a process that ran, as below), padded
  with spaces to the length of the start record; also
  when it never started (``start`` and ``pid`` are then null).

A record with a ``state`` is final.  State changes are also appended as JSON lines to the
task's ``events`` journal: a "started" line once the task has run for a moment (a task that
ends sooner, or never started, has none) and one final line, which carries the start time
and, for a process that ran, ``"usage"``: ``[peak resident memory in KiB, user CPU seconds,
system CPU seconds]`` of the process and the descendants it waited for, as the reaping
``wait4`` reported them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

__all__ = [
    "TERMINAL_EVENTS",
    "Event",
    "TaskSpec",
    "dumps",
    "event_line",
    "host_words",
    "keys_of_kill_name",
    "read_events",
    "task_row",
    "usage_of",
    "valid_usage",
    "write_atomic",
]

# Every file and directory the runner and its clients create is private (batches hold
# the submitter's whole environment), whatever the umask. ganga_like.private has the same
# modes; the runner must start without importing ganga_like.
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
# Variables whose value is a credential (a grid token): never written into a batch file in
# the gangadir. A task gets them from the runner's own environment, which the session that
# started the runner (or a pilot's allocation) gave it. Credentials kept in files
# (X509_USER_PROXY, BEARER_TOKEN_FILE) are paths, written as any other variable.
SECRET_VARIABLES = ("BEARER_TOKEN",)
LOCK_NAME = "runner.lock"
PID_NAME = "runner.pid"
LOG_NAME = "runner.log"
TAKEN_OVER_NAME = "taken-over"
CONFIG_NAME = "config.json"
# ``PID kill-prefix``: what the live runner (of that pid) understands beyond the first
# version of this protocol: a kill request's key ending in "." names every task whose key
# starts with it. A runner started by an earlier version writes no such file and would
# ignore such a key.
FEATURES_NAME = "features"
KILL_BY_PREFIX = "kill-prefix"
QUEUE_DIR = "queue"
ACCEPTED_DIR = "accepted"
BATCH_SUFFIX = ".batch.json"
# How often the runner refreshes its pid file's mtime (its heartbeat, for hosts sharing the
# directory); its client passes ganga_like.hosts' setting (``--heartbeat``).
DEFAULT_HEARTBEAT = 10.0


def host_words() -> str:
    """How the runner's record names its host: hostname and boot id (as
    ``ganga_like.hosts``, which the runner must not import, writes them)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
    except OSError:
        boot_id = "unknown"
    return f"host={socket.gethostname()} boot={boot_id}"


KILL_SUFFIX = ".kill.json"
# A kill request that cannot be written (a full disk) is posted as empty files instead,
# which a full file system still creates: the keys are in their names, hex-encoded,
# separated by dashes ("<request name>.<hex>-<hex>.killkeys").
KILL_NAMES_SUFFIX = ".killkeys"
# Longest name a request file gets (file systems allow 255 bytes).
MAX_NAME = 240
RUN_FILE = "__run__"
STDOUT_FILE = "stdout"
STDERR_FILE = "stderr"
# Left in the work directory by a wrapper around the program that failed (a file transfer),
# with the reason and the program's exit code: the twin of ganga_like.model.workspace's.
FAILURE_NOTE = "__ganga_failure__.json"
RUNNER_MODULE = "ganga_like_runner"
# What a live runner's command line may name: this module, or the one earlier versions
# started (a runner they started may still be running tasks; it is found, woken and
# stopped as before).
RUNNER_MODULES = (RUNNER_MODULE, "ganga_like_local.runner")
FORMAT_VERSION = 1

TERMINAL_EVENTS = frozenset({"completed", "failed", "killed"})
# Signals the runner waits for: SIGUSR1 wakes it, SIGTERM/SIGINT stop it, SIGCHLD reaps.
RUNNER_SIGNALS = frozenset({signal.SIGCHLD, signal.SIGUSR1, signal.SIGTERM, signal.SIGINT})
# Temporary names of files being written, unique within this process.
_temporary_names = itertools.count()
_EVENT_FIELDS = frozenset({"key", "event", "time", "exit_code", "reason", "start"})
_FINAL_EVENT_FIELDS = _EVENT_FIELDS | {"usage"}


@dataclass(frozen=True)
class TaskSpec:
    """One command for the runner to run."""

    key: str
    argv: list[str]
    env: dict[str, str]
    workdir: str
    output_dir: str
    inputs: list[str]
    output_patterns: list[str]
    events: str
    # What the task takes from the runner's capacity (``--cores``/``--memory``, set for a
    # pilot inside a batch allocation): cores and bytes of memory.  Without a capacity only
    # the ``max_concurrent`` count applies.
    cores: int = 1
    memory: int = 0


@dataclass(frozen=True)
class Event:
    """One line of an events journal."""

    key: str
    event: str
    time: float
    exit_code: int | None
    reason: str | None
    # When the process started, on final events; a task that ends soon after starting
    # has no "started" event, so this is where its start time is found.
    start: float | None = None
    # What the process used (``usage_of``), on final events of a process that ran.
    usage: list[float] | None = None


def usage_of(rusage: Any) -> list[float]:
    """The resources a reaped process used, as journals carry them: peak resident memory
    (KiB, Linux's unit), user and system CPU seconds (to the millisecond)."""
    return [rusage.ru_maxrss, round(rusage.ru_utime, 3), round(rusage.ru_stime, 3)]


def valid_usage(value: Any) -> bool:
    """Whether ``value`` is a usage as ``usage_of`` makes them."""
    return (
        isinstance(value, list)
        and len(value) == 3
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )


def keys_of_kill_name(name: str) -> list[str]:
    """The keys a kill request posted as an empty file names."""
    middle = name[: -len(KILL_NAMES_SUFFIX)].rsplit(".", 1)[-1]
    return [
        bytes.fromhex(part).decode("utf-8", "surrogateescape") for part in middle.split("-") if part
    ]


def read_events(path: Path, offset: int) -> tuple[list[Event], int]:
    """Parse the complete lines of journal ``path`` from byte ``offset``.

    Returns the events and the offset just past the last complete line, so that a line the
    runner is still writing is read on the next call.  Malformed lines are skipped.
    """
    try:
        with open(path, "rb") as journal:
            journal.seek(offset)
            data = journal.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    chunk = data[:end]
    try:
        # One json.loads over the whole chunk is several times faster than one per line.
        rows: list[Any] = json.loads(b"[" + chunk.replace(b"\n", b",") + b"]")
    except ValueError:
        rows = _parse_lines(chunk.split(b"\n"))  # blank or broken lines: go one by one
    return _events_from_rows(rows), offset + end + 1


def _events_from_rows(rows: list[Any]) -> list[Event]:
    events = []
    for row in rows:
        if isinstance(row, dict) and (
            row.keys() == _EVENT_FIELDS or row.keys() == _FINAL_EVENT_FIELDS
        ):
            # The runner writes exactly Event's fields.  Adopting the parsed dict as the
            # instance's attributes skips the frozen dataclass __init__, which would cost
            # more than all of the JSON parsing.  Without "usage" the class default (None)
            # shows through; a usage is checked where it is kept (Job.record_use), not
            # here, for every line.
            event = object.__new__(Event)
            object.__setattr__(event, "__dict__", row)
            events.append(event)
            continue
        try:
            key, name, when = row["key"], row["event"], row["time"]
            usage = row.get("usage")
            events.append(
                Event(
                    key,
                    name,
                    when,
                    row.get("exit_code"),
                    row.get("reason"),
                    row.get("start"),
                    usage if valid_usage(usage) else None,
                )
            )
        except (KeyError, TypeError, AttributeError):
            continue
    return events


def event_line(
    key: str,
    event: str,
    when: float,
    exit_code: int | None,
    reason: str | None,
    start: float | None = None,
    usage: list[float] | None = None,
) -> bytes:
    """One journal line; json escapes newlines, so a line is always exactly one line.

    Formatted by hand rather than with json.dumps: the runner writes one per task event,
    and building an encoder per call would cost more than the write.  Strings go through
    json's own ASCII escaping, so the result is the same JSON.
    """
    code = "null" if exit_code is None else str(int(exit_code))
    why = "null" if reason is None else encode_basestring_ascii(reason)
    began = "null" if start is None else repr(float(start))
    used = "" if usage is None else f',"usage":[{int(usage[0])},{usage[1]!r},{usage[2]!r}]'
    return (
        f'{{"key":{encode_basestring_ascii(key)},"event":{encode_basestring_ascii(event)},"time":{float(when)!r},'
        f'"exit_code":{code},"reason":{why},"start":{began}{used}}}\n'
    ).encode("ascii")


def task_row(task: TaskSpec) -> list[Any]:
    """Validate a task and turn it into the compact list stored in batch files."""
    if not task.key:
        raise ValueError("task key must not be empty")
    if not task.argv:
        raise ValueError(f"task {task.key}: argv must not be empty")
    for label, path in (
        ("workdir", task.workdir),
        ("output_dir", task.output_dir),
        ("events", task.events),
    ):
        if not os.path.isabs(path):
            raise ValueError(f"task {task.key}: {label} must be an absolute path, not {path!r}")
    for path in task.inputs:
        if not os.path.isabs(path):
            raise ValueError(f"task {task.key}: input must be an absolute path, not {path!r}")
    if task.cores < 1 or task.memory < 0:
        raise ValueError(f"task {task.key}: needs at least one core and no negative memory")
    row: list[Any] = [
        task.key,
        list(task.argv),
        dict(task.env),
        task.workdir,
        task.output_dir,
        list(task.inputs),
        list(task.output_patterns),
        task.events,
    ]
    if task.cores != 1 or task.memory:
        # Only when asked for: a plain Local batch keeps its eight fields.
        row.append({"cores": task.cores, "memory": task.memory})
    return row


def dumps(value: Any) -> bytes:
    # ensure_ascii keeps lone surrogates (undecodable file names) representable.
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def _parse_lines(lines: list[bytes]) -> list[Any]:
    rows = []
    for line in lines:
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def write_atomic(directory: Path, name: str, data: bytes | Iterable[bytes]) -> None:
    """Write a file (its bytes, or their pieces in turn) so that readers see either
    nothing or all of it."""
    # A leading dot keeps the runner from picking up the file before it is complete; pid
    # and counter keep writers of the same name (the pid file) out of each other's way.
    tmp = directory / f".{name}.{os.getpid()}.{next(_temporary_names)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        with open(os.open(tmp, flags, PRIVATE_FILE), "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
        os.replace(tmp, directory / name)
    except BaseException:
        # A full disk must not keep what it could not finish: the space goes back.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
