"""Resource requests in PSI/J's vocabulary, translated to ``#SBATCH`` directives.

The vocabulary (process_count, processes_per_node, cpu_cores_per_process,
gpus_per_process) is scheduler-neutral, so the same request can later be sent to
another batch system; only :meth:`ResourceSpec.to_sbatch_lines` knows Slurm.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta

from ganga_like.batch.quantities import ResourceError, parse_memory
from ganga_like.model.launchers import launcher_words, resolve_launcher

__all__ = [
    "ResourceError",
    "ResourceSpec",
    "format_slurm_time",
    "parse_memory",
    "parse_slurm_time",
]

_MIB = 1024**2


_TIME_RE = re.compile(
    r"^(?:(?P<days>\d+)-)?(?P<a>\d+)(?::(?P<b>\d+))?(?::(?P<c>\d+))?$",
)


def parse_slurm_time(text: str) -> timedelta | None:
    """Parse a Slurm time limit; ``None`` means no limit.

    Slurm's forms: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``, and ``UNLIMITED``/``INFINITE``/``NONE`` for no limit.
    """
    text = text.strip()
    if text.upper() in {"UNLIMITED", "INFINITE", "NONE", "N/A", ""}:
        return None
    match = _TIME_RE.match(text)
    if match is None:
        raise ResourceError(f"cannot read Slurm time {text!r}")
    days = int(match["days"] or 0)
    parts = [int(p) for p in (match["a"], match["b"], match["c"]) if p is not None]
    if match["days"] is not None:
        # With a day part the fields are hours[:minutes[:seconds]].
        parts += [0] * (3 - len(parts))
        hours, minutes, seconds = parts
    elif len(parts) == 1:
        hours, minutes, seconds = 0, parts[0], 0
    elif len(parts) == 2:
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = parts
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def format_slurm_time(value: timedelta) -> str:
    """Format a duration as ``D-HH:MM:SS``; fractions of a second round up."""
    total = math.ceil(value.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"


def _is_int(value: object) -> bool:
    # bool is an int subclass; True processes is a mistake, not a count.
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class ResourceSpec:
    """What one job (or each element of an array) needs.

    ``memory`` is per node, in bytes (Slurm's ``--mem``); a string such as
    ``"2G"`` is converted on construction.  ``walltime`` ``None`` leaves the
    partition's default.
    """

    process_count: int = 1
    processes_per_node: int | None = None
    cpu_cores_per_process: int = 1
    gpus_per_process: int = 0
    memory: int | None = None
    walltime: timedelta | None = None

    def __post_init__(self) -> None:
        # Interactive users type "2G"; store bytes so comparisons stay numeric.
        raw: object = self.memory
        if isinstance(raw, str):
            object.__setattr__(self, "memory", parse_memory(raw))

    @property
    def node_count(self) -> int | None:
        """Nodes implied by the request, or ``None`` when Slurm may choose."""
        if self.processes_per_node is None:
            return None
        return self.process_count // self.processes_per_node

    @property
    def cores_per_node(self) -> int:
        """Cores one node must offer: a full node's share, or one process when unconstrained."""
        per_node = self.processes_per_node or 1
        return per_node * self.cpu_cores_per_process

    @property
    def total_cores(self) -> int:
        return self.process_count * self.cpu_cores_per_process

    def validate(self) -> None:
        """Raise :class:`ResourceError` naming every impossible part of the request."""
        problems: list[str] = []
        for name in ("process_count", "cpu_cores_per_process"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if not _is_int(self.gpus_per_process) or self.gpus_per_process < 0:
            problems.append(
                f"gpus_per_process must be a non-negative integer, got {self.gpus_per_process!r}"
            )
        ppn = self.processes_per_node
        if ppn is not None:
            if not _is_int(ppn) or ppn < 1:
                problems.append(f"processes_per_node must be a positive integer, got {ppn!r}")
            elif _is_int(self.process_count) and self.process_count >= 1:
                if ppn > self.process_count:
                    problems.append(
                        f"processes_per_node ({ppn}) exceeds process_count ({self.process_count})"
                    )
                elif self.process_count % ppn:
                    problems.append(
                        f"process_count ({self.process_count}) is not divisible by "
                        f"processes_per_node ({ppn})"
                    )
        if self.memory is not None and (not _is_int(self.memory) or self.memory <= 0):
            problems.append(
                f"memory must be a positive number of bytes, got {self.memory!r} "
                "(leave it None for the partition default)"
            )
        if self.walltime is not None and (
            not isinstance(self.walltime, timedelta) or self.walltime <= timedelta(0)
        ):
            problems.append(f"walltime must be a positive timedelta, got {self.walltime!r}")
        if problems:
            raise ResourceError("invalid resource request: " + "; ".join(problems))

    def to_sbatch_options(self) -> list[str]:
        """The request as sbatch command-line options."""
        self.validate()
        options = [f"--ntasks={self.process_count}"]
        if self.processes_per_node is not None:
            options.append(f"--ntasks-per-node={self.processes_per_node}")
            options.append(f"--nodes={self.node_count}")
        options.append(f"--cpus-per-task={self.cpu_cores_per_process}")
        if self.gpus_per_process:
            options.append(f"--gpus-per-task={self.gpus_per_process}")
        if self.memory is not None:
            # Whole MiB, rounded up: asking for less than requested would risk OOM kills.
            options.append(f"--mem={math.ceil(self.memory / _MIB)}M")
        if self.walltime is not None:
            options.append(f"--time={format_slurm_time(self.walltime)}")
        return options

    def launcher(self) -> tuple[str, ...]:
        """The words that start the program as ``process_count`` processes inside the
        allocation with the default launcher: none for one process, else ``srun`` (the
        batch script itself runs once, on the first node); see
        :mod:`ganga_like.model.launchers`."""
        name = resolve_launcher("", self.process_count, "srun")
        return launcher_words(name, self.process_count, self.cpu_cores_per_process)

    def to_sbatch_lines(self) -> list[str]:
        """The request as ``#SBATCH`` directives for a batch script."""
        return [f"#SBATCH {option}" for option in self.to_sbatch_options()]
