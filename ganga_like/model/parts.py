"""The parts of a job, read from Job's schema: the one list every layer asks.

A *part* is a schema attribute holding plugin objects: a ``Component`` (one object: the
application, backend, splitter, dataset) or a ``ComponentList`` (the files). Its trait says
the plugin category; tags on the trait say how the rest of the system treats it:

``required``  a job cannot be submitted without it, and it is shown even when unset
``column``    it is a column of job tables (the plugin's class name)
``subjob``    how a subjob gets it from its master: ``"copy"`` (an own copy, because it
              keeps per-job state; an object whose class has ``per_job_state = False`` is
              shared instead), ``"share"`` (the master's value, until a splitter varies
              it). Untagged parts stay with the master (the splitter: it made the
              subjobs). The tag is not only for parts: a subjob shares its master's name
              and comment.
``searchable`` False: queries cannot start from the attribute (the default is True)
``always_changeable``  a job's own value may change at any time, even once submitted

So adding a part (say ``postprocessors``) to a job is one line in ``Job._schema`` and the
interface its plugins implement; listing, display, copying to subjobs, the description
logged at resubmission and queries all follow. (Adding the name to ``Job._state_fields``
too only makes the stored records smaller.)

Every answer is read from the schema the class has when asked, once per schema object:
cheap enough for any caller, and a class whose schema changes is answered afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import traitlets

from ganga_like.model.base import Component, ComponentList, GangaObject
from ganga_like.model.job import Job

__all__ = ["COPY", "SHARE", "JobParts", "Part", "job_parts"]

COPY = "copy"
SHARE = "share"


@dataclass(frozen=True)
class Part:
    """One plugin-valued attribute of a job."""

    name: str
    category: str  # the plugin category ("applications", "files", ...)
    many: bool  # a list of plugin objects rather than one
    required: bool
    column: bool
    subjob: str | None  # COPY, SHARE, or None: subjobs do not have it


@dataclass(frozen=True)
class JobParts:
    """Every list of a job's attributes the system needs, each a query over one schema."""

    parts: tuple[Part, ...]
    # Attribute names a subjob takes from its master (parts and others alike).
    subjob_copied: tuple[str, ...]
    subjob_shared: tuple[str, ...]
    searchable: frozenset[str]
    protected: frozenset[str]
    always_changeable: frozenset[str]

    @cached_property
    def components(self) -> tuple[Part, ...]:
        """The parts holding one plugin object (application, backend, ...)."""
        return tuple(p for p in self.parts if not p.many)

    @cached_property
    def lists(self) -> tuple[Part, ...]:
        """The parts holding a list of plugin objects (the files)."""
        return tuple(p for p in self.parts if p.many)

    @cached_property
    def required(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.required)

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """The parts shown as columns of job tables, in schema order."""
        return tuple(p.name for p in self.parts if p.column)

    @cached_property
    def run_with(self) -> tuple[Part, ...]:
        """The parts each (sub)job runs with: those given to subjobs. The others (the
        splitter) act once, at the first submission, and a subjob has none of them."""
        return tuple(p for p in self.parts if p.subjob is not None)

    @cached_property
    def master_only(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.subjob is None)


def _part(name: str, trait: traitlets.TraitType[Any, Any]) -> Part | None:
    if isinstance(trait, ComponentList):
        category, many = trait.category, True
    elif isinstance(trait, Component):
        category, many = trait.category, False
    else:
        return None
    tags = trait.metadata
    return Part(
        name,
        category,
        many,
        bool(tags.get("required")),
        bool(tags.get("column")),
        tags.get("subjob"),
    )


def _build(schema: Mapping[str, traitlets.TraitType[Any, Any]]) -> JobParts:
    for name, trait in schema.items():
        if trait.metadata.get("subjob") not in (None, COPY, SHARE):
            raise ValueError(
                f"{name}: the subjob tag is {COPY!r} or {SHARE!r}, not {trait.metadata['subjob']!r}"
            )

    def tagged(key: str, value: object = True, default: object = None) -> tuple[str, ...]:
        return tuple(n for n, t in schema.items() if t.metadata.get(key, default) == value)

    return JobParts(
        parts=tuple(p for p in (_part(n, t) for n, t in schema.items()) if p is not None),
        subjob_copied=tagged("subjob", COPY),
        subjob_shared=tagged("subjob", SHARE),
        searchable=frozenset(tagged("searchable", default=True)),
        protected=frozenset(tagged("protected")),
        always_changeable=frozenset(tagged("always_changeable")),
    )


_cache: dict[type[GangaObject], tuple[Mapping[str, Any], JobParts]] = {}


def job_parts(job_class: type[GangaObject] = Job) -> JobParts:
    """The parts (and related attribute lists) of ``job_class``, from its schema now."""
    schema = job_class._schema
    cached = _cache.get(job_class)
    if cached is None or cached[0] is not schema:
        cached = (schema, _build(schema))
        _cache[job_class] = cached
    return cached[1]
