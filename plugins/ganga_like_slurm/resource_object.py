"""``Resources``: the user-facing resource request, in PSI/J's vocabulary.

A GangaObject component of the Slurm backend, so ``j.backend.resources.memory = "4G"``
validates like any other attribute.  Each attribute is checked on its own by its trait,
and every assignment is also checked against the others (``processes_per_node`` must
divide ``process_count``...); nothing changes when a check fails.  The backend turns it
into the immutable :class:`~ganga_like_slurm.resource_spec.ResourceSpec` it renders.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

import traitlets

from ganga_like.batch.quantities import MAX_MEMORY, MAX_WALLTIME, ResourceError
from ganga_like.batch.traits import Memory
from ganga_like.errors import SchemaError
from ganga_like.model.base import Component, GangaObject

from .resource_spec import ResourceSpec, parse_slurm_time

__all__ = ["MAX_MEMORY", "MAX_WALLTIME", "Memory", "Resources", "ResourcesTrait", "Walltime"]


class Walltime(traitlets.TraitType[Any, Any]):
    """A time limit: a ``timedelta`` or Slurm's ``"MM"``, ``"HH:MM:SS"``, ``"D-HH:MM"``."""

    info_text = (
        "a datetime.timedelta or a Slurm time such as '30' (minutes), '1:30:00' or "
        "'2-00:00:00', at most 365 days"
    )
    allow_none = True
    default_value = None

    def validate(self, obj: Any, value: Any) -> timedelta | None:
        if value is None:
            return None
        if isinstance(value, str):
            try:
                parsed = parse_slurm_time(value)
            except (ResourceError, OverflowError):
                self.error(obj, value)
            if parsed is None:
                return None  # "UNLIMITED": the partition's limit
            value = parsed
        if isinstance(value, timedelta) and timedelta(0) < value <= MAX_WALLTIME:
            return value
        self.error(obj, value)


class Resources(GangaObject):
    """What each (sub)job needs, in PSI/J's terms: ``process_count`` processes (Slurm
    tasks) of ``cpu_cores_per_process`` cores and ``gpus_per_process`` GPUs each,
    optionally ``processes_per_node`` per node, ``memory`` per node and a ``walltime``."""

    _category = "resources"
    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "process_count": traitlets.Int(1, min=1, help="Processes (Slurm tasks) in all."),
        "processes_per_node": traitlets.Int(
            None,
            allow_none=True,
            min=1,
            help="Processes on each node (None: Slurm packs them as it likes); must "
            "divide process_count.",
        ),
        "cpu_cores_per_process": traitlets.Int(1, min=1, help="Cores for each process."),
        "gpus_per_process": traitlets.Int(0, min=0, help="GPUs for each process."),
        "memory": Memory(
            help="Memory per node: bytes, or '2G', '500M' (binary units); "
            "None: the partition's default."
        ),
        "walltime": Walltime(
            help="Time limit: a timedelta or a Slurm time such as "
            "'1:30:00'; None: the partition's default."
        ),
    }

    process_count: int
    processes_per_node: int | None
    cpu_cores_per_process: int
    gpus_per_process: int
    memory: int | None
    walltime: timedelta | None

    def __init__(self, **attributes: Any) -> None:
        # Attributes given together are checked together: the order of keyword
        # arguments must not matter (processes_per_node=4 before process_count=8).
        GangaObject.__init__(self)
        for name, value in attributes.items():
            GangaObject._assign(self, name, value)
        problems = _problems(self.to_spec())
        if problems:
            raise SchemaError(f"{type(self).__name__}: " + "; ".join(problems))

    def _assign(self, name: str, value: Any) -> None:
        stored = self._validate(name, value)
        every = _problems(self.to_spec(**{name: stored}))
        problems = [p for p in every if name in p] or every
        if problems:
            raise SchemaError(f"{type(self).__name__}.{name}: " + "; ".join(problems))
        GangaObject._assign(self, name, stored)

    def __repr__(self) -> str:
        # Stable across sessions (the event log compares descriptions of a job's parts).
        shown = ", ".join(
            f"{name}={self.__dict__[name]!r}" for name in self._schema if name in self.__dict__
        )
        return f"{type(self).__name__}({shown})"

    def to_spec(self, **override: Any) -> ResourceSpec:
        """The request as the immutable spec the script renderer takes."""
        values = {name: getattr(self, name) for name in self._schema}
        values.update(override)
        return ResourceSpec(**values)


def _problems(spec: ResourceSpec) -> list[str]:
    """Each impossible part of ``spec`` (they name the attributes involved)."""
    try:
        spec.validate()
    except ResourceError as exc:
        text = str(exc).removeprefix("invalid resource request: ")
        return text.split("; ")
    return []


class ResourcesTrait(Component):
    """The ``resources`` attribute: a :class:`Resources` object, or a dict of its
    attributes (``{"process_count": 4, "walltime": "1:00:00"}``), or None (defaults)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("resources", **kwargs)
        self.info_text = "a Resources object, a dict of its attributes, or None"

    def validate(self, obj: Any, value: Any) -> Any:
        if value is None or isinstance(value, Resources):
            return value
        if isinstance(value, dict):
            # Errors inside name the Resources attribute; they are SchemaErrors already.
            return self.from_attributes(Resources, value)
        self.error(obj, value)
