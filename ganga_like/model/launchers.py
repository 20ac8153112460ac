"""How a (sub)job's program is started as ``process_count`` processes: PSI/J's launchers.

A launcher is a few words put before the program's argv, so that every backend runs it the
way it runs any program (the Local runner, a batch script, a Dask task):

``single``    the program itself, once (``process_count`` must be 1)
``multiple``  ``process_count`` copies started side by side by a small bash loop, each
              with ``GANGA_RANK`` (0..N-1) and ``GANGA_SIZE`` (N) in its environment; the
              (sub)job's exit code is the first non-zero one in rank order, else 0
``mpirun``    ``mpirun -n N`` (``mpiexec -n N``): an MPI installation starts the ranks
``mpiexec``
``srun``      ``srun --ntasks=N``, inside a Slurm allocation only

Whatever the launcher, each process of a job that has one sees its rank as ``GANGA_RANK``
and the number of processes as ``GANGA_SIZE``: under ``mpirun`` and ``srun`` a one-line
shell step copies them from the variables the launcher sets (``PMI_RANK`` or
``OMPI_COMM_WORLD_RANK``, ``SLURM_PROCID``), so a program can be moved from one launcher
to another unchanged. Pure: nothing here starts a process.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import traitlets

__all__ = [
    "LAUNCHERS",
    "LOCAL_LAUNCHERS",
    "MAX_PROCESSES_PER_MACHINE",
    "LauncherName",
    "launch_problem",
    "launcher_words",
    "process_schema",
    "resolve_launcher",
    "start_words",
]

# The most processes one (sub)job starts on one machine (Local, a Dask worker): beyond
# this a count is a typo that would start thousands of processes at once.
MAX_PROCESSES_PER_MACHINE = 4096

# Each launcher's one-line description (the order is the one shown in messages).
LAUNCHERS: Mapping[str, str] = {
    "single": "the program itself, one process",
    "multiple": "process_count copies, each with GANGA_RANK and GANGA_SIZE",
    "mpirun": "mpirun -n process_count (an MPI installation)",
    "mpiexec": "mpiexec -n process_count (an MPI installation)",
    "srun": "srun --ntasks=process_count (inside a Slurm allocation)",
}
# What a backend without a scheduler of its own (Local, Dask) can use: srun needs a Slurm
# allocation.
LOCAL_LAUNCHERS = ("single", "multiple", "mpirun", "mpiexec")
# The launchers that are programs a site installs: a missing one is said at submit.
_INSTALLED = ("mpirun", "mpiexec")

# Started by `bash -c SCRIPT NAME N PROGRAM ARG...`: N copies, each with its rank; waited
# for in rank order, the first failure's exit code kept. Copies started in the background
# of a non-interactive shell read /dev/null; a kill of the (sub)job reaches them all (the
# Local runner signals the whole process group, Slurm the whole job).
MULTIPLE_SCRIPT = (
    'n=$1; shift; rc=0; pids=(); for ((r = 0; r < n; r++)); do GANGA_RANK=$r GANGA_SIZE=$n "$@" & '
    'pids+=($!); done; for p in "${pids[@]}"; do wait "$p"; s=$?; [ "$rc" -ne 0 ] || rc=$s; done; '
    'exit "$rc"'
)


def _rank_script(rank: str, size: str) -> str:
    """`bash -c` text giving each process GANGA_RANK and GANGA_SIZE from the launcher's
    own variables, then becoming the program (exec: signals and exit code are its own)."""
    return f'export GANGA_RANK={rank} GANGA_SIZE={size}; exec "$@"'


# MPICH and Intel MPI set PMI_*, Open MPI OMPI_COMM_WORLD_*.
MPI_RANK_SCRIPT = _rank_script(
    "${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}", "${PMI_SIZE:-${OMPI_COMM_WORLD_SIZE:-1}}"
)
SRUN_RANK_SCRIPT = _rank_script("${SLURM_PROCID:-0}", "${SLURM_NTASKS:-1}")


def _names(allowed: Sequence[str]) -> str:
    quoted = [repr(name) for name in allowed]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]


class LauncherName(traitlets.Unicode):  # type: ignore[type-arg]
    """A launcher's name among ``allowed``, or "" for the backend's default."""

    def __init__(self, allowed: Sequence[str], default: str, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.allowed = tuple(allowed)
        self.info_text = (
            f"one of {_names(self.allowed)}, or '' for the default ({default} when "
            "process_count is above 1, else single)"
        )

    def validate(self, obj: Any, value: Any) -> str:
        result: str = super().validate(obj, value)
        if result and result not in self.allowed:
            self.error(obj, value)
        return result


def process_schema(allowed: Sequence[str], default: str) -> dict[str, Any]:
    """The ``process_count`` and ``launcher`` attributes of a backend that has no resource
    request of its own (Local, Dask), each validated on assignment."""
    return {
        "process_count": traitlets.Int(
            1,
            min=1,
            max=MAX_PROCESSES_PER_MACHINE,
            help="Processes each (sub)job runs as, started by the launcher; each sees "
            f"GANGA_RANK (0..N-1) and GANGA_SIZE (at most {MAX_PROCESSES_PER_MACHINE}).",
        ),
        "launcher": LauncherName(
            allowed,
            default,
            help=f"How the processes are started: {_names(allowed)}; empty: {default} "
            "when process_count is above 1, else single.",
        ),
    }


def start_words(
    backend: Any,
    default: str,
    allowed: Sequence[str],
    seen: dict[tuple[str, int], tuple[str, ...] | str],
    *,
    find: Callable[[str], str | None] | None = shutil.which,
) -> tuple[str, ...] | str:
    """The words starting the processes of a backend with ``process_count`` and
    ``launcher`` attributes, or the one-line reason they cannot be started. ``seen`` keeps
    the answers of one submission: its subjobs mostly share one backend."""
    count = backend.process_count
    key = (backend.launcher, count)
    found = seen.get(key)
    if found is None:
        name = resolve_launcher(backend.launcher, count, default)
        problem = launch_problem(name, count, allowed, find=find)
        found = seen[key] = problem if problem is not None else launcher_words(name, count)
    return found


def resolve_launcher(name: str, process_count: int, default: str) -> str:
    """The launcher to use: ``name``, or for "" the backend's ``default`` when there are
    several processes, else ``single``."""
    if name:
        return name
    return default if process_count > 1 else "single"


def launch_problem(
    name: str,
    process_count: Any,
    allowed: Sequence[str],
    *,
    find: Callable[[str], str | None] | None = shutil.which,
) -> str | None:
    """Why ``name`` (already resolved) cannot start ``process_count`` processes here, in one
    line, or None. ``find`` looks an installed launcher up (``shutil.which``); None skips
    that check (the program is looked for where the job runs, not here)."""
    if isinstance(process_count, bool) or not isinstance(process_count, int) or process_count < 1:
        return f"process_count must be a positive integer, got {process_count!r}"
    if name not in allowed:
        return f"unknown launcher {name!r}: use {_names(allowed)}"
    if name == "single" and process_count > 1:
        return (
            f"the single launcher starts one process, but process_count is {process_count}: "
            "use the multiple launcher (or leave launcher empty for the default)"
        )
    if name in _INSTALLED and find is not None and find(name) is None:
        return f"the {name} launcher is not installed here: no {name} on PATH (install an MPI)"
    return None


def launcher_words(
    name: str, process_count: int, cpu_cores_per_process: int = 1
) -> tuple[str, ...]:
    """The words put before the program's argv to start it through launcher ``name``
    (already resolved and checked by :func:`launch_problem`)."""
    if name == "single":
        return ()
    if name == "multiple":
        return ("/bin/bash", "-c", MULTIPLE_SCRIPT, "ganga-multiple", str(process_count))
    if name in ("mpirun", "mpiexec"):
        return (name, "-n", str(process_count), "/bin/bash", "-c", MPI_RANK_SCRIPT, "ganga-rank")
    if name == "srun":
        # Cores per process are repeated: srun does not take them from the allocation
        # in every Slurm version.
        words = ["srun", f"--ntasks={process_count}"]
        if cpu_cores_per_process > 1:
            words.append(f"--cpus-per-task={cpu_cores_per_process}")
        return (*words, "--", "/bin/bash", "-c", SRUN_RANK_SCRIPT, "ganga-rank")
    raise ValueError(f"unknown launcher {name!r}")
