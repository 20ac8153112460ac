"""Users' functions named by a dotted path (``"fitlib.checks:converged"``), and what they
are given: a :class:`JobView` of the job, read when it is called.

The monitor calls them (a session's, or the daemon's): the module must be importable by
that process (installed, or on its ``PYTHONPATH``). They are given a plain view, not the
job: a function cannot change the repository under the monitor's feet, and a view reads
the same in every process.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganga_like.errors import SchemaError, safe_repr
from ganga_like.model.interfaces import JobPaths
from ganga_like.model.job import Job

__all__ = ["JobView", "check_function_path", "load_function", "view_of"]

_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class JobView:
    """What a user's function is given about a job: ``id``, ``fqid``, ``name``,
    ``status``, ``exit_code``, ``outputdir`` (a Path), and, for an iteration of an
    ``Iterate``, ``iteration`` (1 for the first)."""

    id: int
    fqid: str
    name: str
    status: str
    exit_code: int | None
    outputdir: Path
    iteration: int | None = None

    def files(self, pattern: str = "*") -> list[Path]:
        """The files of its output directory matching ``pattern``, sorted."""
        return sorted(p for p in self.outputdir.glob(pattern) if p.is_file())


def view_of(job: Job, workspace: Path) -> JobView:
    iteration = job._iteration_of
    return JobView(
        job.id,
        job.fqid,
        job.name,
        job.current_status().label,
        job.exit_code,
        JobPaths(f"{workspace}/{job.id}").output,
        iteration[1] if iteration is not None else None,
    )


def load_function(path: str) -> Callable[..., Any]:
    """The function ``"module:name"`` names (imported here); ImportError, AttributeError
    or TypeError saying what is wrong."""
    module_name, _, name = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{path} is a {type(target).__name__}, not a function")
    return target  # type: ignore[no-any-return]


def check_function_path(where: str, value: Any) -> str:
    """``value`` when it names an importable function as ``"module:name"``; else
    SchemaError, one line naming ``where``, what was expected and what was given."""
    expected = 'a function as "module:name", importable by the monitor'
    if not isinstance(value, str) or not _PATH.match(value):
        raise SchemaError(f"{where}: expected {expected}, not {safe_repr(value)}")
    try:
        load_function(value)
    except Exception as exc:  # whatever importing the user's module raised
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SchemaError(
            f"{where}: {value!r} cannot be used ({type(exc).__name__}: {why}); expected {expected}"
        ) from None
    return value
