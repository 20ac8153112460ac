"""Queued tasks killed together: one record per batch instead of a ``__run__`` per task.

A task killed before it started has no ``__run__`` record of its own, and writing one
(its output directory made, a file written and renamed) cost the runner a few file
system operations per task: minutes of work for a kill of 100,000 queued tasks. Instead
the keys killed of a batch go into one file beside the accepted batch,
``<batch>.json.killed``: a list of kills, each ``{"end", "reason", "keys"}``. It is
written before the kill's journal lines and deleted with the batch, so a runner that
dies in between finds it at its start: ``startup_recovery`` replays the journal line of
a task it names instead of queueing the task again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ganga_like_runner.task_files import read_json, write_json_atomic

__all__ = ["KILLED_SUFFIX", "forget", "killed_in", "record_kill"]

KILLED_SUFFIX = ".killed"


def _path(batch_path: Path) -> str:
    return f"{batch_path}{KILLED_SUFFIX}"


def record_kill(batch_path: Path, keys: Sequence[str], end: float, reason: str) -> None:
    """Add a kill of ``keys`` (queued tasks of the batch at ``batch_path``) to its record."""
    path = _path(batch_path)
    kills = read_json(path).get("kills", [])
    kills = [
        *(kills if isinstance(kills, list) else []),
        {"end": end, "reason": reason, "keys": list(keys)},
    ]
    write_json_atomic(path, {"kills": kills})


def killed_in(batch_path: Path) -> dict[str, dict[str, Any]]:
    """Key -> the final record of each task the batch's kill record names (as a task's
    own ``__run__`` would say it)."""
    found: dict[str, dict[str, Any]] = {}
    kills = read_json(_path(batch_path)).get("kills", [])
    for kill in kills if isinstance(kills, list) else []:
        if not isinstance(kill, dict) or not isinstance(kill.get("keys"), list):
            continue
        record = {"state": "killed", "end": kill.get("end"), "reason": kill.get("reason")}
        for key in kill["keys"]:
            if isinstance(key, str):
                found[key] = record
    return found


def forget(batch_path: Path) -> None:
    """The batch is done: its kill record goes with it."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(batch_path))
