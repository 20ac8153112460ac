"""The bash side of a batch script, the same for every batch system that runs one:
each element's environment, directory, command and redirections, an array's dispatch on
its task id, and the collection of output files.

Each element runs its argv through ``exec`` with every word quoted by
:func:`shlex.quote`, so quotes, ``$``, backticks, spaces, newlines and unicode reach the
program unchanged: bash never interprets the arguments.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ganga_like.model.interfaces import ActiveRef, PollContext, RunSpec
from ganga_like.model.job import Job
from ganga_like.model.workspace import read_failure_note, run_environment

from .planning import compress
from .tracker import Observation

__all__ = [
    "COLLECT_CALL",
    "COLLECT_FUNCTION",
    "MISSING_OUTPUT_FILE",
    "ElementCommand",
    "ScriptError",
    "array_dispatch",
    "compress_indices",
    "element_command",
    "element_lines",
    "needs_collect",
    "read_missing_output",
]

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ScriptError(ValueError):
    """A batch script that cannot be written safely."""


# Written by the batch script when an output pattern matched nothing; the poll reads it
# (only for elements that failed with exit code 1) to report the real reason.
MISSING_OUTPUT_FILE = "__ganga_output_missing__"

# Output files must be moved out of the work directory after the program ends, so a job
# with output patterns runs its program under this function instead of through `exec`.
# It is exported so the `exec /bin/bash -c` of each array element sees it: the script
# defines it once, not once per element. As with Local, a file keeps its path relative to
# the work directory (`sub/out.txt` -> `output/sub/out.txt`; a file outside it, by an
# absolute or `../` pattern, goes by its name), and nothing in the output directory is ever
# overwritten: a file whose place is taken stays in the work directory and the element
# fails, saying why. A match inside a directory already moved went with it.
COLLECT_FUNCTION = (
    "__ganga_collect() {  # usage: OUTDIR N PATTERN... PROGRAM ARG...",
    "    local out=$1 n=$2; shift 2",
    '    local patterns=("${@:1:n}"); shift "$n"',
    '    "$@"; local rc=$?',
    '    [ "$rc" -eq 0 ] || return "$rc"',
    "    local p f place problem= IFS=",
    "    shopt -s nullglob dotglob",
    '    for p in "${patterns[@]}"; do',
    "        local files=($p) present=",
    '        for f in "${files[@]}"; do  # a literal name stays even when it is absent',
    '            { [ -e "$f" ] || [ -L "$f" ]; } && present=1',
    "        done",
    '        if [ -z "$present" ]; then',
    "            problem=${problem:-\"output pattern '$p' matched no file\"}; continue",
    "        fi",
    '        for f in "${files[@]}"; do',
    '            [ -e "$f" ] || [ -L "$f" ] || continue',
    "            case $f in /*|../*|..) place=${f##*/} ;; *) place=${f#./} ;; esac",
    '            if [ -e "$out/$place" ] || [ -L "$out/$place" ]; then',
    '                problem=${problem:-"output $f not collected: $place already exists in '
    'the output directory (the file stays in the work directory)"}',
    "                continue",
    "            fi",
    '            mkdir -p -- "$(dirname -- "$out/$place")" && mv -- "$f" "$out/$place" \\',
    '                || problem=${problem:-"cannot collect output $f"}',
    "        done",
    "    done",
    '    [ -z "$problem" ] && return 0',
    f'    printf \'%s\\n\' "$problem" | tee "$out/{MISSING_OUTPUT_FILE}" >&2',
    "    return 1",
    "}",
    "export -f __ganga_collect",
)
COLLECT_CALL = '__ganga_collect "$@"'


@dataclass(frozen=True)
class ElementCommand:
    """What one array element (or a plain job) executes.

    ``stdout``/``stderr`` are literal paths (no scheduler patterns such as Slurm's
    ``%a``); ``None`` leaves the stream going to the job's own output file.  The same
    path for both merges the streams.
    """

    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    stdout: str | None = None
    stderr: str | None = None


def compress_indices(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"`` (sorted, duplicates dropped)."""
    ordered = sorted(set(indices))
    if not ordered:
        raise ScriptError("an array needs at least one index")
    if ordered[0] < 0:
        raise ScriptError(f"array indices must not be negative, got {ordered[0]}")
    return compress(ordered)


def element_lines(command: ElementCommand, indent: str) -> list[str]:
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


def array_dispatch(
    commands: Mapping[int, ElementCommand], indices: Sequence[int], task_variable: str
) -> list[str]:
    """The lines running, for each array task, its own element: a ``case`` on the
    scheduler's task id variable (``SLURM_ARRAY_TASK_ID``, ``PBS_ARRAY_INDEX``...)."""
    lines = [f'case "${{{task_variable}-}}" in']
    for index in indices:
        lines.append(f"{index})")
        lines.extend(element_lines(commands[index], "    "))
        lines.append("    ;;")
    lines.append("*)")
    lines.append(f'    echo "no command for array task ${{{task_variable}-unset}}" >&2')
    lines.append("    exit 1")
    lines.append("    ;;")
    lines.append("esac")
    return lines


def element_command(
    job: Job, spec: RunSpec, root: str, launcher: Sequence[str] = ()
) -> ElementCommand:
    """What (sub)job ``job`` runs: its program (after ``launcher``, e.g. ``srun ... --``
    for several processes) in ``root/work``, its streams in ``root/output``, the
    ``GANGA_*`` variables set, and output files collected after it ended."""
    env = run_environment(job, spec)
    output = os.path.join(root, "output")
    # The launcher inside the collecting wrapper and the run's own (``spec.wrapper``): the
    # files are transferred and collected once, after every process has ended.
    argv: tuple[str, ...] = (*spec.wrapper, *launcher, *spec.argv)
    if spec.output_patterns:
        patterns = spec.output_patterns
        argv = (
            "/bin/bash",
            "-c",
            COLLECT_CALL,
            "ganga-collect",
            output,
            str(len(patterns)),
            *patterns,
            *argv,
        )
    return ElementCommand(
        argv=argv,
        env=env,
        workdir=os.path.join(root, "work"),
        stdout=os.path.join(output, "stdout"),
        stderr=os.path.join(output, "stderr"),
    )


def needs_collect(commands: Iterable[ElementCommand]) -> bool:
    """True when one of ``commands`` collects output files (the script must then define
    :data:`COLLECT_FUNCTION` in its setup)."""
    return any(command.argv[2:3] == (COLLECT_CALL,) for command in commands)


def read_missing_output(ctx: PollContext, ref: ActiveRef, observation: Observation) -> Observation:
    """An element whose program succeeded but whose output pattern matched nothing
    exits 1 and leaves a note: report that, with the program's exit code 0. So does the
    wrapper of a run whose transfers failed (``workspace.read_failure_note``)."""
    parts = [str(ctx.workspace), str(ref.job_id)]
    if ref.subjob_id is not None:
        parts.append(str(ref.subjob_id))
    note = read_failure_note(os.path.join(*parts, "work"))
    if note is not None:
        return Observation("failed", note[0], note[1])
    try:
        with open(os.path.join(*parts, "output", MISSING_OUTPUT_FILE), encoding="utf-8") as f:
            reason = f.read().strip()
    except OSError:
        return observation
    return Observation("failed", reason or observation.reason, 0)
