"""Render a Slurm batch script for one job or one job array: the ``#SBATCH`` directives,
then the bash body the batch base writes (:mod:`ganga_like.batch.script`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ganga_like.batch.script import (
    ElementCommand,
    ScriptError,
    array_dispatch,
    compress_indices,
    element_lines,
)

from .resource_spec import ResourceSpec

__all__ = [
    "BatchScriptSpec",
    "ElementCommand",
    "ScriptError",
    "compress_indices",
    "expand_indices",
    "render_script",
]


@dataclass(frozen=True)
class BatchScriptSpec:
    """Everything :func:`render_script` needs.

    ``commands`` is either one :class:`ElementCommand` (a plain job) or a mapping
    from array index to command.  For a mapping, ``array`` selects the indices to
    submit (all keys when ``None``), which lets a caller resubmit a few elements
    without rendering the others.  ``stdout``/``stderr``/``workdir`` are the
    job-level ``--output``/``--error``/``--chdir``; Slurm expands ``%A``/``%a``/``%j``
    in the first two.
    """

    job_name: str
    commands: ElementCommand | Mapping[int, ElementCommand]
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    partition: str | None = None
    account: str | None = None
    reservation: str | None = None
    qos: str | None = None
    extra_options: Sequence[str] = ()
    setup: Sequence[str] = ()
    array: tuple[int, ...] | None = None
    array_throttle: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    workdir: str | None = None


def expand_indices(text: str) -> list[int]:
    """Inverse of :func:`compress_indices`; also reads Slurm's ``a-b:step`` and ``%N``."""
    text = text.split("%", 1)[0].strip("[]")
    result: list[int] = []
    for part in text.split(","):
        if not part:
            continue
        step = 1
        if ":" in part:
            part, step_text = part.split(":", 1)
            step = int(step_text)
        if "-" in part:
            low, high = part.split("-", 1)
            result.extend(range(int(low), int(high) + 1, step))
        else:
            result.append(int(part))
    return result


def _directive_value(value: str, what: str) -> str:
    """Quote a value for an ``#SBATCH`` line.

    sbatch reads these lines itself (not bash): it splits on blanks, honours
    double quotes and backslash escapes.  A newline would end the directive.
    """
    if any(ch in value for ch in "\n\r\0"):
        raise ScriptError(f"{what} must not contain a newline or NUL: {value!r}")
    if value and not any(ch.isspace() or ch in '"\\#' for ch in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _check_line(text: str, what: str) -> None:
    if any(ch in text for ch in "\n\r\0"):
        raise ScriptError(f"{what} must be a single line: {text!r}")


def _selected_indices(spec: BatchScriptSpec) -> list[int] | None:
    """The array indices to render, or ``None`` for a plain job."""
    if isinstance(spec.commands, ElementCommand):
        if spec.array is not None:
            raise ScriptError("an array job needs a mapping of index -> command, not one command")
        return None
    indices = sorted(set(spec.array if spec.array is not None else spec.commands))
    missing = [i for i in indices if i not in spec.commands]
    if missing:
        shown = compress_indices(missing)
        raise ScriptError(f"no command for array index(es) {shown}")
    return indices


def render_script(spec: BatchScriptSpec) -> str:
    """Return the complete batch script text for ``spec``."""
    indices = _selected_indices(spec)
    lines = ["#!/bin/bash"]
    directives: list[tuple[str, str | None]] = [
        ("--job-name", spec.job_name),
        ("--partition", spec.partition),
        ("--account", spec.account),
        ("--reservation", spec.reservation),
        ("--qos", spec.qos),
    ]
    for option, value in directives:
        if value is not None:
            lines.append(f"#SBATCH {option}={_directive_value(value, option)}")
    lines.extend(spec.resources.to_sbatch_lines())
    if indices is not None:
        array = compress_indices(indices)
        if spec.array_throttle is not None:
            if spec.array_throttle < 1:
                raise ScriptError(f"array_throttle must be positive, got {spec.array_throttle}")
            array += f"%{spec.array_throttle}"
        lines.append(f"#SBATCH --array={array}")
    for option, value in (
        ("--output", spec.stdout),
        ("--error", spec.stderr),
        ("--chdir", spec.workdir),
    ):
        if value is not None:
            lines.append(f"#SBATCH {option}={_directive_value(value, option)}")
    for option in spec.extra_options:
        _check_line(option, "an extra #SBATCH option")
        # Accept the option with or without its "#SBATCH " prefix.
        option = option.removeprefix("#SBATCH").strip()
        lines.append(f"#SBATCH {option}")
    # sbatch stops reading directives at the first command, so setup comes after them.
    lines.extend(spec.setup)

    if indices is None:
        assert isinstance(spec.commands, ElementCommand)
        lines.extend(element_lines(spec.commands, ""))
    else:
        assert not isinstance(spec.commands, ElementCommand)
        lines.extend(array_dispatch(spec.commands, indices, "SLURM_ARRAY_TASK_ID"))
    return "\n".join(lines) + "\n"
