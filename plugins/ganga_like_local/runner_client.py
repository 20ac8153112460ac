"""Client side of the detached Local runner.

The runner (``python -m ganga_like_local.runner RUNNER_DIR``) is a per-directory daemon
that runs task commands with a concurrency limit, outlives the process that submitted the
work and records everything in files.  This module is what submitting processes use: it
drops requests into the runner's queue directory, makes sure exactly one runner is alive
and reads the event journals the runner appends to.

Layout of a runner directory::

    runner.lock   flock held by the live runner for its whole life
    runner.pid    pid of the live runner, written only while holding the lock
    runner.log    errors plus start/stop lines
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
  "reason", "batch", "pid"}``, padded with spaces to the length of the start record; also
  when it never started (``start`` and ``pid`` are then null).

A record with a ``state`` is final.  State changes are also appended as JSON lines to the
task's ``events`` journal: a "started" line once the task has run for a moment (a task that
ends sooner, or never started, has none) and one final line, which carries the start time.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

__all__ = [
    "TERMINAL_EVENTS",
    "Event",
    "TaskSpec",
    "batch_keys",
    "configure",
    "event_line",
    "kill",
    "read_events",
    "revive",
    "runner_pid",
    "stop",
    "submit",
]

# Every file and directory the runner and its clients create is private (batches hold
# the submitter's whole environment), whatever the umask. ganga_like.private has the same
# modes; the runner must start without importing ganga_like.
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
LOCK_NAME = "runner.lock"
PID_NAME = "runner.pid"
LOG_NAME = "runner.log"
CONFIG_NAME = "config.json"
QUEUE_DIR = "queue"
ACCEPTED_DIR = "accepted"
BATCH_SUFFIX = ".batch.json"
KILL_SUFFIX = ".kill.json"
# A kill request that cannot be written (a full disk) is posted as empty files instead,
# which a full file system still creates: the keys are in their names, hex-encoded,
# separated by dashes ("<request name>.<hex>-<hex>.killkeys").
KILL_NAMES_SUFFIX = ".killkeys"
_MAX_NAME = 240
RUN_FILE = "__run__"
STDOUT_FILE = "stdout"
STDERR_FILE = "stderr"
RUNNER_MODULE = "ganga_like_local.runner"
FORMAT_VERSION = 1

TERMINAL_EVENTS = frozenset({"completed", "failed", "killed"})
# Signals the runner waits for: SIGUSR1 wakes it, SIGTERM/SIGINT stop it, SIGCHLD reaps.
RUNNER_SIGNALS = frozenset({signal.SIGCHLD, signal.SIGUSR1, signal.SIGTERM, signal.SIGINT})
# How long a client waits for a runner that is leaving or dying to let go of the lock.
LOCK_PATIENCE_SECONDS = 10.0
_EVENT_FIELDS = frozenset({"key", "event", "time", "exit_code", "reason", "start"})

# Request names start with a zero-padded nanosecond clock so that sorting the queue
# directory gives submission order; pid and a counter keep concurrent names apart.
_sequence = itertools.count()
# Runners started from this process, kept so that they can be reaped (no zombies) and so
# that stop() can tell an exited child from a live one.
_spawned: dict[int, subprocess.Popen[bytes]] = {}


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


def submit(
    runner_dir: Path,
    tasks: Sequence[TaskSpec],
    base_env: Mapping[str, str],
    max_concurrent: int,
    idle_exit_seconds: float = 30.0,
) -> None:
    """Queue ``tasks`` as one batch and make sure a runner is alive to run them.

    ``max_concurrent`` and ``idle_exit_seconds`` become the runner's settings once it
    reads this batch.  The environment of each task is ``base_env`` updated by its ``env``.
    """
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be at least 1, not {max_concurrent}")
    if idle_exit_seconds < 0:
        raise ValueError(f"idle_exit_seconds must not be negative, not {idle_exit_seconds}")
    if not tasks:
        return
    rows = [_task_row(task) for task in tasks]
    queue = _queue_dir(runner_dir)
    name = _request_name(BATCH_SUFFIX)
    payload = {
        "format": FORMAT_VERSION,
        "id": name[: -len(BATCH_SUFFIX)],
        "max_concurrent": max_concurrent,
        "idle_exit_seconds": float(idle_exit_seconds),
        "base_env": dict(base_env),
        "tasks": rows,
    }
    _write_atomic(queue, name, _dumps(payload))
    _ensure_runner(runner_dir, always=True)


def kill(runner_dir: Path, keys: Sequence[str]) -> None:
    """Ask the runner to kill the tasks with these keys (queued or running).

    Unknown or already finished keys are ignored.  Kills apply to tasks submitted before
    this call; a task submitted afterwards with the same key is a new run.
    """
    if not keys:
        return
    queue = _queue_dir(runner_dir)
    name = _request_name(KILL_SUFFIX)
    try:
        _write_atomic(queue, name, _dumps({"format": FORMAT_VERSION, "keys": list(keys)}))
        names = [name]
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        names = _post_kill_names(queue, keys)
    if not _ensure_runner(runner_dir, always=False):
        # No runner and nothing queued or accepted: there is nothing the request could
        # apply to, and leaving it would only clutter the queue.
        for posted in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(queue / posted)


def _post_kill_names(queue: Path, keys: Sequence[str]) -> list[str]:
    """A kill request as empty files named after the keys (see ``KILL_NAMES_SUFFIX``)."""
    names: list[str] = []
    chunk: list[str] = []
    prefix = _request_name("")
    for key in [*keys, None]:
        encoded = None if key is None else key.encode("utf-8", "surrogateescape").hex()
        if chunk and (encoded is None or
                      len(prefix) + len("-".join([*chunk, encoded])) + 20 > _MAX_NAME):
            name = f"{prefix}.{len(names):06d}.{'-'.join(chunk)}{KILL_NAMES_SUFFIX}"
            # Created whole under its final name: it holds no data to be seen half done.
            os.close(os.open(queue / name, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            names.append(name)
            chunk = []
        if encoded is not None:
            chunk.append(encoded)
    return names


def keys_of_kill_name(name: str) -> list[str]:
    """The keys a kill request posted as an empty file names."""
    middle = name[: -len(KILL_NAMES_SUFFIX)].rsplit(".", 1)[-1]
    return [bytes.fromhex(part).decode("utf-8", "surrogateescape")
            for part in middle.split("-") if part]


def configure(
    runner_dir: Path,
    max_concurrent: int | None = None,
    idle_exit_seconds: float | None = None,
) -> None:
    """Write ``config.json`` and wake a live runner so that it applies the settings now.

    Settings given here last until the next batch brings its own.
    """
    # The time orders these settings against those carried by batches.
    config: dict[str, Any] = {"time": time.time_ns()}
    if max_concurrent is not None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, not {max_concurrent}")
        config["max_concurrent"] = max_concurrent
    if idle_exit_seconds is not None:
        config["idle_exit_seconds"] = float(idle_exit_seconds)
    runner_dir.mkdir(PRIVATE_DIR, parents=True, exist_ok=True)
    _write_atomic(runner_dir, CONFIG_NAME, _dumps(config))
    _wake(runner_dir)


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
        if isinstance(row, dict) and row.keys() == _EVENT_FIELDS:
            # The runner writes exactly Event's fields.  Adopting the parsed dict as the
            # instance's attributes skips the frozen dataclass __init__, which would cost
            # more than all of the JSON parsing.
            event = object.__new__(Event)
            object.__setattr__(event, "__dict__", row)
            events.append(event)
            continue
        try:
            key, name, when = row["key"], row["event"], row["time"]
            events.append(
                Event(key, name, when, row.get("exit_code"), row.get("reason"), row.get("start"))
            )
        except (KeyError, TypeError, AttributeError):
            continue
    return events


def batch_keys(runner_dir: Path) -> Iterator[list[str]]:
    """The task keys of each batch queued or accepted; the queue is read first."""
    for sub in (QUEUE_DIR, ACCEPTED_DIR):
        try:
            names = sorted(os.listdir(runner_dir / sub))
        except FileNotFoundError:
            continue
        for name in names:
            if not name.endswith(BATCH_SUFFIX) or name.startswith("."):
                continue
            try:
                data = json.loads((runner_dir / sub / name).read_bytes())
                rows = data["tasks"]
                yield [row[0] for row in rows if isinstance(row, list) and row]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # moved on (to accepted/, or deleted) or not a batch of ours


def runner_pid(runner_dir: Path) -> int | None:
    """Pid of the live runner of ``runner_dir``, or None."""
    try:
        pid = int((runner_dir / PID_NAME).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _is_runner(pid, runner_dir) else None


def revive(runner_dir: Path) -> bool:
    """Start a runner if none is alive but work was left behind; whether one was started.

    For a runner that died (``kill -9``, a crash): the new one's start-up recovery reports
    the tasks that were running as failed and runs the queued ones.  Cheap enough for
    every monitoring cycle: a live runner holds its lock for its whole life, so one open
    and one failed ``flock`` say it is there; nothing per task.
    """
    try:
        fd = os.open(runner_dir / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # no runner ever ran here
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a runner (or a client about to start one) holds it
        if not (_has_batches(runner_dir) or _has_accepted(runner_dir)):
            return False  # nothing left behind; the lock is let go by the close below
        _reap_spawned()
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


def event_line(
    key: str,
    event: str,
    when: float,
    exit_code: int | None,
    reason: str | None,
    start: float | None = None,
) -> bytes:
    """One journal line; json escapes newlines, so a line is always exactly one line.

    Formatted by hand rather than with json.dumps: the runner writes one per task event,
    and building an encoder per call would cost more than the write.  Strings go through
    json's own ASCII escaping, so the result is the same JSON.
    """
    code = "null" if exit_code is None else str(int(exit_code))
    why = "null" if reason is None else encode_basestring_ascii(reason)
    began = "null" if start is None else repr(float(start))
    return (
        f'{{"key":{encode_basestring_ascii(key)},"event":{encode_basestring_ascii(event)},"time":{float(when)!r},'
        f'"exit_code":{code},"reason":{why},"start":{began}}}\n'
    ).encode("ascii")


def _task_row(task: TaskSpec) -> list[Any]:
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
    return [
        task.key,
        list(task.argv),
        dict(task.env),
        task.workdir,
        task.output_dir,
        list(task.inputs),
        list(task.output_patterns),
        task.events,
    ]


def _dumps(value: Any) -> bytes:
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


def _request_name(suffix: str) -> str:
    return f"{time.time_ns():020d}-{os.getpid()}-{next(_sequence)}{suffix}"


def _queue_dir(runner_dir: Path) -> Path:
    queue = runner_dir / QUEUE_DIR
    try:
        queue.mkdir(PRIVATE_DIR)
    except FileExistsError:
        pass
    except FileNotFoundError:
        runner_dir.mkdir(PRIVATE_DIR, parents=True, exist_ok=True)
        queue.mkdir(PRIVATE_DIR, exist_ok=True)
    return queue


def _write_atomic(directory: Path, name: str, data: bytes) -> None:
    """Write a file so that readers see either nothing or all of it."""
    # A leading dot keeps the runner from picking up the file before it is complete; pid
    # and counter keep writers of the same name (the pid file) out of each other's way.
    tmp = directory / f".{name}.{os.getpid()}.{next(_sequence)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        with open(os.open(tmp, flags, PRIVATE_FILE), "wb") as handle:
            handle.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        # A full disk must not keep what it could not finish: the space goes back.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _has_batches(runner_dir: Path) -> bool:
    try:
        names = os.listdir(runner_dir / QUEUE_DIR)
    except FileNotFoundError:
        return False
    return any(name.endswith(BATCH_SUFFIX) and not name.startswith(".") for name in names)


def _has_accepted(runner_dir: Path) -> bool:
    try:
        names = os.listdir(runner_dir / ACCEPTED_DIR)
    except FileNotFoundError:
        return False
    return any(not name.startswith(".") for name in names)


def _ensure_runner(runner_dir: Path, always: bool) -> bool:
    """Make sure a runner will see what was just queued; return whether one is there.

    Called after a request file is in place.  Whoever takes the lock either hands it to a
    new runner (and names it in the pid file before letting go) or releases it and looks
    at the queue again, and a runner that finds work there after releasing the lock takes
    it back.  So a live runner named in the pid file, or a lock holder that lets go soon,
    will see the request.  The lock held with no live runner named means a runner that is
    leaving or dying, or a client about to name one: try again in a moment.
    """
    _reap_spawned()
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
            if not _has_batches(runner_dir):
                return False
        else:
            return True


def _lock_or_wake(runner_dir: Path, always: bool) -> str:
    """One attempt: "woken", "spawned", "idle" (lock free, no work) or "busy"."""
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
        if always or _has_batches(runner_dir) or _has_accepted(runner_dir):
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
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(_import_path())
    argv = [
        sys.executable,
        "-m",
        RUNNER_MODULE,
        os.path.abspath(runner_dir),
        "--lock-fd",
        str(lock_fd),
    ]
    log_fd = os.open(
        runner_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
        PRIVATE_FILE,
    )
    # The child starts with the wake-up signals blocked (the mask survives exec), so that
    # a client waking it before its handlers are set up cannot kill it.
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, RUNNER_SIGNALS)
    try:
        # Its stderr goes to the log so that a crash of the runner leaves a traceback.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_fd,
            cwd="/",
            env=env,
            pass_fds=(lock_fd,),
            close_fds=True,
            start_new_session=True,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        os.close(log_fd)
    _spawned[proc.pid] = proc
    _name_runner(runner_dir, proc.pid)


def _name_runner(runner_dir: Path, pid: int) -> None:
    """Write the pid file for a runner just spawned, unless one is there already.

    From here on other clients find a live runner to wake instead of waiting for its
    start-up.  Only created, never replaced: if this process was slow, the runner may
    have named itself, or even left and been followed by another runner, and that file
    must stand.
    """
    tmp = runner_dir / f".{PID_NAME}.{os.getpid()}.{next(_sequence)}.tmp"
    _write_atomic(runner_dir, tmp.name, f"{pid}\n".encode())
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
        fd = os.open(runner_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                     PRIVATE_FILE)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _import_path() -> list[str]:
    """sys.path made absolute, with the directory holding this package first."""
    package_root = str(Path(__file__).resolve().parent.parent)
    paths = [package_root]
    for entry in sys.path:
        absolute = os.path.abspath(entry or os.curdir)
        if absolute not in paths:
            paths.append(absolute)
    return paths


def _reap_spawned() -> None:
    for pid, proc in list(_spawned.items()):
        if proc.poll() is not None:
            _spawned.pop(pid, None)


def _wake(runner_dir: Path) -> None:
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
    if RUNNER_MODULE not in args:
        return False  # a zombie (empty cmdline) or another program that got the pid
    position = args.index(RUNNER_MODULE) + 1
    if position >= len(args):
        return False
    return os.path.realpath(args[position]) == os.path.realpath(runner_dir)


def _process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie counts as gone."""
    proc = _spawned.get(pid)
    if proc is not None:
        if proc.poll() is None:
            return True
        _spawned.pop(pid, None)
        return False
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
