"""JobTemplate: a job's description kept for making jobs from, never run itself.

A template has Job's schema: every attribute a job copies (its name, comment and every
part: application, backend, splitter, dataset, files, postprocessors, ...), read from
``Job._schema`` whenever asked, so a part added to Job is a template's part too, with no
other change. Its own are an id (in the ``templates`` table, apart from job ids) and a
status that is always ``template``.

:func:`copy_description` is how a job is made from a template or from another job, and a
template from either: every description attribute deep-copied, nothing shared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TypeGuard

import traitlets
from persistent import Persistent

from ganga_like.errors import BrokenObjectError
from ganga_like.model.base import GangaObject, _copy_value
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts

__all__ = ["TEMPLATE_STATUS", "JobTemplate", "copy_description", "describes"]

TEMPLATE_STATUS = "template"

_Trait = traitlets.TraitType[Any, Any]

# What a template has of its own, instead of Job's: the rest of Job's schema that is not
# copied (metadata, history, exit code, ...) is what a run produced, which a template has not.
_OWN: dict[str, _Trait] = {
    "id": traitlets.Int(-1, help="Template id: unique among the templates.").tag(
        protected=True, copyable=False
    ),
    "status": traitlets.Unicode(
        TEMPLATE_STATUS, help="Always 'template': a template is never submitted."
    ).tag(protected=True, copyable=False),
}


class _TemplateSchema(Mapping[str, _Trait]):
    """Job's schema as a template has it, built again whenever Job's schema object changes."""

    def __init__(self) -> None:
        self._built: tuple[Mapping[str, _Trait], dict[str, _Trait]] | None = None

    def _current(self) -> dict[str, _Trait]:
        schema = Job._schema
        built = self._built
        if built is None or built[0] is not schema:
            traits = dict(_OWN)
            for name, trait in schema.items():
                if name not in _OWN and trait.metadata.get("copyable", True):
                    traits[name] = trait
            built = self._built = (schema, traits)
        return built[1]

    def __getitem__(self, name: str) -> _Trait:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


class JobTemplate(GangaObject):
    """A job's description, listed in ``templates``; ``Job(template)`` makes a job of it."""

    _category = "templates"
    _schema: ClassVar[Mapping[str, _Trait]] = _TemplateSchema()
    _validated_against: ClassVar[Mapping[str, _Trait] | None] = None

    id: int
    name: str
    status: str

    @classmethod
    def _checker(cls) -> traitlets.HasTraits:
        # The validating twin is made from the schema; Job's may have changed since.
        schema = Job._schema
        if cls._validated_against is not schema:
            cls._validator = None
            cls._validated_against = schema
        return super()._checker()

    @property
    def fqid(self) -> str:
        return str(self.id)


def describes(value: object) -> TypeGuard[Job | JobTemplate]:
    """Whether ``value`` is something a job can be made from: a job or a template."""
    return isinstance(value, Job | JobTemplate)


def copy_description(source: GangaObject, target: GangaObject) -> None:
    """Make ``target``'s description a deep copy of ``source``'s.

    The description is every attribute that ``target``'s class copies and ``source``'s
    class has; one ``source`` left at its default is reset in ``target`` too. A subjob's
    copy leaves out the parts that only its master has (the splitter that made it)."""
    state = source.stored()
    skip: set[str] = set()
    if isinstance(source, Job) and source.master is not None:
        skip = {part.name for part in job_parts().master_only}
    have = type(source)._schema
    copied = [
        name
        for name, trait in type(target)._schema.items()
        if trait.metadata.get("copyable", True) and name in have and name not in skip
    ]
    # Only what is copied must be whole: a master's subjob tree is persistent and not a
    # component, but it is no part of the description.
    for name in copied:
        value = state.get(name)
        if isinstance(value, Persistent) and not isinstance(value, GangaObject):
            raise BrokenObjectError(
                f"cannot copy {type(source).__name__.lower()} {source.id}: its {name} "
                f"({type(value).__name__}) comes from a missing plugin"
            )
    for name in copied:
        if name in state:
            target.__dict__[name] = _copy_value(state[name])
        else:
            target.__dict__.pop(name, None)
    target._p_changed = True
