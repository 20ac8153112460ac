"""The batch script of one Grid Engine submission: the ``#$`` directives qsub reads, then
the bash body the batch base writes (:mod:`ganga_like.batch.script`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from ganga_like.batch import planning
from ganga_like.batch.script import (
    COLLECT_FUNCTION,
    ElementCommand,
    ScriptError,
    array_dispatch,
    element_lines,
    needs_collect,
)

__all__ = ["Batch", "Member", "Options", "format_walltime", "render"]

_MIB = 1024 * 1024


@dataclass(frozen=True)
class Options:
    """The job-level part of a script: what must be equal to share one array."""

    queue: str
    project: str
    parallel_environment: str
    process_count: int
    memory: int | None
    walltime: timedelta | None
    extra_options: tuple[str, ...]
    setup: tuple[str, ...]
    array_throttle: int | None


Member = planning.Member[ElementCommand]
Batch = planning.Batch[Options, ElementCommand]


def format_walltime(value: timedelta) -> str:
    """``h_rt``'s ``H:MM:SS`` (hours unbounded); fractions of a second round up."""
    hours, rest = divmod(math.ceil(value.total_seconds()), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"


def _path(path: str) -> str:
    # qsub reads -o and -wd itself: a blank splits the directive, ':' names a host and
    # '$' a variable it expands.
    if any(ch.isspace() or ch in ":$" for ch in path):
        raise ScriptError(
            f"Grid Engine cannot take the path {path!r}: no blank, ':' or '$' in a gangadir"
        )
    return path


def render(batch: Batch, members: Sequence[Member], log_dir: str) -> str:
    """The script submitting ``members`` of ``batch``; Grid Engine's own messages go to
    ``log_dir`` (``<name>.o<job id>[.<task id>]``)."""
    options = batch.options
    lines = [
        "#!/bin/bash",
        f"#$ -N {batch.name}",
        "#$ -S /bin/bash",
        f"#$ -wd {_path(batch.top)}",
        f"#$ -o {_path(log_dir)}/",
        "#$ -j y",
    ]
    if batch.queue:
        lines.append(f"#$ -q {batch.queue}")
    if options.project:
        lines.append(f"#$ -P {options.project}")
    if options.process_count > 1:
        lines.append(f"#$ -pe {options.parallel_environment} {options.process_count}")
    if options.memory is not None:
        # Per slot, whole MiB rounded up: asking for less than requested would risk a kill.
        lines.append(f"#$ -l h_vmem={math.ceil(options.memory / _MIB)}M")
    if options.walltime is not None:
        lines.append(f"#$ -l h_rt={format_walltime(options.walltime)}")
    tasks = [m.index + 1 for m in members if m.index is not None]
    if batch.is_array:
        # One range: the planning cut arrays where their indices stop being consecutive.
        lines.append(f"#$ -t {tasks[0]}-{tasks[-1]}")
        if options.array_throttle is not None:
            lines.append(f"#$ -tc {options.array_throttle}")
    lines.extend(f"#$ {option}" for option in options.extra_options)
    # qsub stops reading directives at the first command, so setup comes after them.
    if needs_collect(m.command for m in members):
        lines.extend(COLLECT_FUNCTION)
    lines.extend(options.setup)
    if batch.is_array:
        commands = {m.index + 1: m.command for m in members if m.index is not None}
        lines.extend(array_dispatch(commands, tasks, "SGE_TASK_ID"))
    else:
        lines.extend(element_lines(members[0].command, ""))
    return "\n".join(lines) + "\n"
