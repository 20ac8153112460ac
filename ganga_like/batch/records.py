"""What a batch submission keeps on disk: each (sub)job's workspace, and per top-level
job the scripts sent and one log line per submission."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ganga_like.model.workspace import keep_earlier_output
from ganga_like.private import copy_private

if TYPE_CHECKING:
    from ganga_like.model.job import Job

__all__ = [
    "HANDOVER_SUFFIX",
    "SUBMISSION_LOG",
    "HandOver",
    "handed_over",
    "handover_key",
    "keep_handover",
    "log_submission",
    "logged_outcomes",
    "prepare_workspace",
    "unconfirmed_submissions",
]

SUBMISSION_LOG = "submissions.log"
# Next to each kept script: which (sub)jobs it hands over, by hand-over key.
HANDOVER_SUFFIX = ".handover.json"


def prepare_workspace(root: str, submit_count: int, inputs: Sequence[str]) -> None:
    """``output/`` and ``work/`` under ``root``, the input files copied in, and the earlier
    run's output put aside as ``output.<n>`` (kept)."""
    output = keep_earlier_output(root, submit_count)
    work = os.path.join(root, "work")
    os.makedirs(output, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    if inputs:
        input_dir = os.path.join(root, "input")
        os.makedirs(input_dir, exist_ok=True)
        for source in inputs:
            name = os.path.basename(source.rstrip("/"))
            kept = os.path.join(input_dir, name)
            # Copies, never links: a program writing to its input must change neither
            # the user's file nor the copy kept in input/.
            _copy(source, kept)
            _copy(kept, os.path.join(work, name))


def _copy(source: str, target: str) -> None:
    if os.path.isdir(source):
        shutil.copytree(source, target, dirs_exist_ok=True)
        return
    copy_private(source, target)


def log_submission(log_dir: str, name: str, outcome: str) -> None:
    """One line per submission in ``<log_dir>/submissions.log``, once its outcome is known.

    It keeps earlier scheduler ids findable after a resubmission replaced them, and tells
    an interrupted submission (a script with no line) from a finished one.
    """
    when = datetime.now().isoformat(sep=" ", timespec="seconds")
    try:
        with open(os.path.join(log_dir, SUBMISSION_LOG), "a", encoding="utf-8") as f:
            f.write(f"{when} {name} {outcome}\n")
    except OSError:
        pass  # bookkeeping only: the ids are on the (sub)jobs


def unconfirmed_submissions(log_dir: str, suffix: str = ".sh") -> list[str]:
    """Names of the scripts kept in ``log_dir`` whose outcome was never logged: the
    process stopped while submitting them."""
    try:
        scripts = {n[: -len(suffix)] for n in os.listdir(log_dir) if n.endswith(suffix)}
    except OSError:
        return []
    logged = {name for name, _outcome in _logged(log_dir)}
    return sorted(scripts - logged)


def _logged(log_dir: str) -> list[tuple[str, str]]:
    """(name, outcome) of each line of the submission log, in order."""
    try:
        with open(os.path.join(log_dir, SUBMISSION_LOG), encoding="utf-8") as f:
            lines = [line.rstrip("\n").split(" ", 3) for line in f if line.count(" ") >= 3]
    except OSError:
        return []
    return [(parts[2], parts[3]) for parts in lines]


def logged_outcomes(log_dir: str) -> dict[str, str]:
    """name -> the first outcome logged for it (what its submission did)."""
    outcomes: dict[str, str] = {}
    for name, outcome in _logged(log_dir):
        outcomes.setdefault(name, outcome)
    return outcomes


# -- hand-overs: what a crash-interrupted submission had given the scheduler ----------------


def handover_key(job: Job) -> str:
    """A key naming one submission of ``job``, unique across its submissions: its
    fqid, its submit count and its master's (a first submission rolled back and made
    again gives its subjobs the same count, never the master's)."""
    master = job.master
    key = f"{job.fqid}@{job.submit_count}"
    return key if master is None else f"{key}.{master.submit_count}"


@dataclass(frozen=True)
class HandOver:
    """One kept script's hand-over, as recovery reads it back."""

    name: str  # the script's (and the scheduler job's) unique name
    index: int | None  # the array element of the (sub)job; None: the job itself
    queue: str
    extra: Mapping[str, Any]  # what the backend kept for itself (e.g. a pilot's name)


def keep_handover(
    log_dir: str,
    name: str,
    members: Mapping[str, int | None],
    queue: str,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Keep, before the script ``name`` is submitted, which (sub)jobs it hands over
    (hand-over key -> array element or None) and where: recovery after a crash finds in
    it what the scheduler received. Raises OSError (the submission is then not made)."""
    record = {"name": name, "queue": queue, "members": dict(members), "extra": dict(extra or {})}
    path = os.path.join(log_dir, name + HANDOVER_SUFFIX)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(temporary, path)


def handed_over(log_dir: str, keys: set[str]) -> dict[str, HandOver]:
    """hand-over key -> the kept hand-over naming it, for ``keys`` (absent: never handed
    over, or its record was lost)."""
    found: dict[str, HandOver] = {}
    try:
        names = sorted(n for n in os.listdir(log_dir) if n.endswith(HANDOVER_SUFFIX))
    except OSError:
        return found
    for file_name in names:
        try:
            with open(os.path.join(log_dir, file_name), encoding="utf-8") as f:
                record = json.load(f)
            members = record["members"]
            handover = HandOver(
                str(record["name"]), None, str(record["queue"]), dict(record["extra"])
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: as if never handed over (recovery rolls it back)
        for key in keys.intersection(members):
            index = members[key]
            found[key] = HandOver(
                handover.name,
                index if isinstance(index, int) else None,
                handover.queue,
                handover.extra,
            )
    return found
