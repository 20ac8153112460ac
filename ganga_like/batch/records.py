"""What a batch submission keeps on disk: each (sub)job's workspace, and per top-level
job the scripts sent and one log line per submission."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from datetime import datetime

from ganga_like.model.workspace import keep_earlier_output
from ganga_like.private import copy_private

__all__ = ["SUBMISSION_LOG", "log_submission", "prepare_workspace", "unconfirmed_submissions"]

SUBMISSION_LOG = "submissions.log"


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
    try:
        with open(os.path.join(log_dir, SUBMISSION_LOG), encoding="utf-8") as f:
            logged = {line.split(" ", 3)[2] for line in f if line.count(" ") >= 3}
    except OSError:
        logged = set()
    return sorted(scripts - logged)
