"""Client side of the detached Local runner: the requests.

The runner (``python -m ganga_like_runner RUNNER_DIR``) is a per-directory daemon
that runs task commands with a concurrency limit, outlives the process that submitted the
work and records everything in files.  This module is what submitting processes use: it
drops requests into the runner's queue directory, has ``launch`` make sure exactly one
runner is alive, and reads the event journals the runner appends to.  The files themselves
are described in ``protocol``.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ganga_like.hosts import read_record
from ganga_like_runner.launch import (
    RunnerOnAnotherHost,
    ensure_runner,
    revive,
    runner_elsewhere,
    runner_pid,
    stop,
    wake,
)
from ganga_like_runner.protocol import (
    ACCEPTED_DIR,
    BATCH_SUFFIX,
    CONFIG_NAME,
    FEATURES_NAME,
    FORMAT_VERSION,
    KILL_BY_PREFIX,
    KILL_NAMES_SUFFIX,
    KILL_SUFFIX,
    MAX_NAME,
    PID_NAME,
    PRIVATE_DIR,
    QUEUE_DIR,
    SECRET_VARIABLES,
    TERMINAL_EVENTS,
    Event,
    TaskSpec,
    dumps,
    event_line,
    read_events,
    task_row,
    write_atomic,
)

__all__ = [
    "TERMINAL_EVENTS",
    "Event",
    "RunnerOnAnotherHost",
    "TaskSpec",
    "batch_keys",
    "configure",
    "event_line",
    "kill",
    "read_events",
    "revive",
    "runner_elsewhere",
    "runner_pid",
    "stop",
    "submit",
    "write_batch",
]

# Request names start with a zero-padded nanosecond clock so that sorting the queue
# directory gives submission order; pid and a counter keep concurrent names apart.
_sequence = itertools.count()


def submit(
    runner_dir: Path,
    tasks: Iterable[TaskSpec],
    base_env: Mapping[str, str],
    max_concurrent: int,
    idle_exit_seconds: float = 30.0,
) -> None:
    """Queue ``tasks`` as one batch and make sure a runner is alive to run them.

    ``max_concurrent`` and ``idle_exit_seconds`` become the runner's settings once it
    reads this batch.  The environment of each task is ``base_env`` updated by its ``env``.
    ``tasks`` may be a generator: each is written to the batch file as it comes, so that
    a batch of a million holds no more than one in memory (nothing is queued if there are
    none).
    """
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be at least 1, not {max_concurrent}")
    if idle_exit_seconds < 0:
        raise ValueError(f"idle_exit_seconds must not be negative, not {idle_exit_seconds}")
    elsewhere = runner_elsewhere(runner_dir)
    if elsewhere is not None:
        raise RunnerOnAnotherHost(runner_dir, elsewhere)
    if write_batch(runner_dir, tasks, base_env, max_concurrent, idle_exit_seconds):
        ensure_runner(runner_dir, always=True)


def write_batch(
    runner_dir: Path,
    tasks: Iterable[TaskSpec],
    base_env: Mapping[str, str],
    max_concurrent: int,
    idle_exit_seconds: float,
) -> bool:
    """The batch file of ``tasks`` put in the runner's queue, written as they come (no
    runner is started); False, and no file, when there are none."""
    rows = (task_row(task) for task in tasks)
    first = next(rows, None)
    if first is None:
        return False
    queue = _queue_dir(runner_dir)
    name = _request_name(BATCH_SUFFIX)
    head = dumps(
        {
            "format": FORMAT_VERSION,
            "id": name[: -len(BATCH_SUFFIX)],
            "max_concurrent": max_concurrent,
            "idle_exit_seconds": float(idle_exit_seconds),
            "base_env": {k: v for k, v in base_env.items() if k not in SECRET_VARIABLES},
        }
    )

    def chunks() -> Iterator[bytes]:
        yield head[:-1] + b',"tasks":['
        yield dumps(first)
        for row in rows:
            yield b"," + dumps(row)
        yield b"]}"

    write_atomic(queue, name, chunks())
    return True


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
        write_atomic(queue, name, dumps({"format": FORMAT_VERSION, "keys": list(keys)}))
        names = [name]
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        names = _post_kill_names(queue, keys)
    if not ensure_runner(runner_dir, always=False):
        # No runner and nothing queued or accepted: there is nothing the request could
        # apply to, and leaving it would only clutter the queue.
        for posted in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(queue / posted)


def kills_by_prefix(runner_dir: Path) -> bool:
    """Whether the runner that reads a kill request understands a key ending in "." (every
    task whose key starts with it): none is alive (the one a request starts is of this
    version), or the live one said so at its start (``FEATURES_NAME``)."""
    record = read_record(runner_dir / PID_NAME)
    if record is None:
        return True
    try:
        words = (runner_dir / FEATURES_NAME).read_text().split()
    except OSError:
        return False
    return words[:1] == [str(record.pid)] and KILL_BY_PREFIX in words[1:]


def _post_kill_names(queue: Path, keys: Sequence[str]) -> list[str]:
    """A kill request as empty files named after the keys (see ``KILL_NAMES_SUFFIX``)."""
    names: list[str] = []
    chunk: list[str] = []
    prefix = _request_name("")
    for key in [*keys, None]:
        encoded = None if key is None else key.encode("utf-8", "surrogateescape").hex()
        if chunk and (
            encoded is None or len(prefix) + len("-".join([*chunk, encoded])) + 20 > MAX_NAME
        ):
            name = f"{prefix}.{len(names):06d}.{'-'.join(chunk)}{KILL_NAMES_SUFFIX}"
            # Created whole under its final name: it holds no data to be seen half done.
            os.close(os.open(queue / name, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            names.append(name)
            chunk = []
        if encoded is not None:
            chunk.append(encoded)
    return names


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
    write_atomic(runner_dir, CONFIG_NAME, dumps(config))
    wake(runner_dir)


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
