"""``Pilot``: run a job's subjobs inside ONE Slurm allocation instead of one array element each.

``Slurm(pilot=Pilot(nodes=1, cores=None, walltime="1:00:00"))`` makes a submission one
``sbatch`` whose batch script runs the runner the Local backend uses (``python -m
ganga_like_runner``) in the allocation: it takes the subjobs first in, first out,
packing them on the allocation's cores (and memory) by what each one's ``resources`` asks
for, and writes their events to the journal the monitor reads, as for ``Local``.  Thousands
of short subjobs then cost one job in the scheduler's queue.  The submission, the poll and
the kill are in :mod:`.pilot_run`.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, ClassVar

import traitlets

from ganga_like.model.base import Component, GangaObject

from .resource_object import Memory, Walltime
from .resource_spec import ResourceSpec, format_slurm_time

__all__ = ["Pilot", "PilotTrait"]

_MIB = 1024**2


class Pilot(GangaObject):
    """One Slurm allocation of ``nodes`` nodes that runs the subjobs of a submission, as
    many at once as its cores hold. ``cores`` per node, None: every core of the nodes (an
    exclusive allocation, its size read from Slurm when it starts). ``walltime`` is the
    allocation's: subjobs it did not finish can be resubmitted into a new pilot."""

    _category = "pilots"
    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        # Each may change once the job has ended: it describes the next pilot, the one a
        # resubmit() makes, not what the subjobs ran with.
        "nodes": traitlets.Int(1, min=1, help="Nodes of the allocation.").tag(
            changeable_at_resubmit=True
        ),
        "cores": traitlets.Int(
            None,
            allow_none=True,
            min=1,
            help="Cores per node; None: all of each node (sbatch --exclusive), as many as "
            "Slurm gives (SLURM_CPUS_ON_NODE).",
        ).tag(changeable_at_resubmit=True),
        "walltime": Walltime(
            default_value=timedelta(hours=1),
            help="The allocation's time limit: a timedelta or a Slurm time such as "
            "'1:00:00'; None: the partition's default.",
        ).tag(changeable_at_resubmit=True),
        "memory": Memory(
            help="Memory per node: bytes or '64G'; None: the whole node's when cores is "
            "None, else the partition's default."
        ).tag(changeable_at_resubmit=True),
    }

    nodes: int
    cores: int | None
    walltime: timedelta | None
    memory: int | None

    def __repr__(self) -> str:
        # Stable across sessions (the event log compares descriptions of a job's parts).
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._schema)
        return f"{type(self).__name__}({shown})"

    def allocation(self) -> ResourceSpec:
        """The allocation as a resource request (one task per core it asks for), for the
        partition choice and the ``#SBATCH`` lines."""
        per_node = self.cores or 1
        return ResourceSpec(
            process_count=self.nodes * per_node,
            processes_per_node=per_node,
            memory=self.memory,
            walltime=self.walltime,
        )

    def sbatch_lines(self) -> list[str]:
        lines = self.allocation().to_sbatch_lines()
        if self.cores is None:
            lines.append("#SBATCH --exclusive")
            if self.memory is None:
                lines.append("#SBATCH --mem=0")  # all of each node's memory
        return lines

    def describe(self) -> str:
        cores = "all cores" if self.cores is None else f"{self.cores} cores"
        memory = "" if self.memory is None else f", {math.ceil(self.memory / _MIB)} MiB"
        walltime = (
            "the partition's walltime"
            if self.walltime is None
            else f"walltime {format_slurm_time(self.walltime)}"
        )
        return f"{self.nodes} node(s), {cores} per node{memory}, {walltime}"


class PilotTrait(Component):
    """The ``pilot`` attribute: None (no pilot: one array element per subjob), a
    :class:`Pilot`, or a dict of its attributes (``{"cores": 8}``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("pilots", **kwargs)
        self.info_text = "a Pilot object, a dict of its attributes, or None"

    def validate(self, obj: Any, value: Any) -> Any:
        if value is None or isinstance(value, Pilot):
            return value
        if isinstance(value, dict):
            return self.from_attributes(Pilot, value)
        self.error(obj, value)
