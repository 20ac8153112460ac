"""Render a bash batch script for one job or one job array.

Each element runs its argv through ``exec`` with every word quoted by
:func:`shlex.quote`, so quotes, ``$``, backticks, spaces, newlines and unicode
reach the program unchanged: bash never interprets the arguments.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .resource_spec import ResourceSpec

__all__ = [
    "BatchScriptSpec",
    "ElementCommand",
    "ScriptError",
    "compress_indices",
    "expand_indices",
    "render_script",
]

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ScriptError(ValueError):
    """A batch script that cannot be written safely."""


@dataclass(frozen=True)
class ElementCommand:
    """What one array element (or a plain job) executes.

    ``stdout``/``stderr`` are literal paths (no Slurm ``%`` patterns); ``None``
    leaves the stream going to the job's ``--output``/``--error`` file.  The same
    path for both merges the streams.
    """

    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    stdout: str | None = None
    stderr: str | None = None


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


def compress_indices(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"`` (sorted, duplicates dropped)."""
    ordered = sorted(set(indices))
    if not ordered:
        raise ScriptError("an array needs at least one index")
    if ordered[0] < 0:
        raise ScriptError(f"array indices must not be negative, got {ordered[0]}")
    parts: list[str] = []
    start = prev = ordered[0]
    for index in ordered[1:]:
        if index == prev + 1:
            prev = index
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = index
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


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


def _element_lines(command: ElementCommand, indent: str) -> list[str]:
    if not command.argv:
        raise ScriptError("a command needs at least a program name (argv is empty)")
    lines: list[str] = []
    for name, value in command.env.items():
        if not _ENV_NAME_RE.match(name):
            raise ScriptError(f"invalid environment variable name {name!r}")
        if "\0" in value:
            raise ScriptError(f"environment variable {name} contains a NUL byte")
        lines.append(f"{indent}export {name}={shlex.quote(value)}")
    if command.workdir is not None:
        # `|| exit` keeps a missing directory from running the program elsewhere.
        lines.append(f"{indent}cd -- {shlex.quote(command.workdir)} || exit 1")
    for word in command.argv:
        if "\0" in word:
            raise ScriptError(f"argument contains a NUL byte: {word!r}")
    words = ["exec", *(shlex.quote(word) for word in command.argv)]
    if command.stdout is not None:
        words.append(">" + shlex.quote(command.stdout))
    if command.stderr is not None:
        if command.stderr == command.stdout:
            words.append("2>&1")
        else:
            words.append("2>" + shlex.quote(command.stderr))
    lines.append(indent + " ".join(words))
    return lines


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
        lines.extend(_element_lines(spec.commands, ""))
    else:
        assert not isinstance(spec.commands, ElementCommand)
        lines.append('case "${SLURM_ARRAY_TASK_ID-}" in')
        for index in indices:
            lines.append(f"{index})")
            lines.extend(_element_lines(spec.commands[index], "    "))
            lines.append("    ;;")
        lines.append("*)")
        lines.append('    echo "no command for array task ${SLURM_ARRAY_TASK_ID-unset}" >&2')
        lines.append("    exit 1")
        lines.append("    ;;")
        lines.append("esac")
    return "\n".join(lines) + "\n"
