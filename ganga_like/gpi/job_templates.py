"""The GPI JobTemplate and the ``templates`` registry.

A template is a job's description kept to make jobs from: ``t = JobTemplate(name="scan",
application=..., splitter=...)`` stores it in the repository's templates table;
``Job(t)`` makes a new job of it. ``templates`` lists, selects and shows them as ``jobs``
does jobs. A template is never submitted.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from ganga_like.errors import TemplateError
from ganga_like.gpi.arguments import keyword_options, refuse_positional, shown_name
from ganga_like.gpi.lookups import check_index, id_number, storable_id
from ganga_like.gpi.proxy import (
    GPIObject,
    current_session,
    register_proxy_class,
    schema_doc,
    wrap,
)
from ganga_like.gpi.proxy import unwrap as unwrap_value
from ganga_like.gpi.slices import JobSlice, description_filter
from ganga_like.model.status import Status
from ganga_like.model.template import TEMPLATE_STATUS, copy_description, describes
from ganga_like.model.template import JobTemplate as TemplateImpl
from ganga_like.repository.templates import TemplateTable

__all__ = ["JobTemplate", "TemplateRegistry", "TemplateSlice", "templates"]


def _table() -> TemplateTable:
    return TemplateTable(current_session().registry().root)


def _not_submittable(what: str) -> TemplateError:
    return TemplateError(f"a job template cannot be {what}; make a job of it first: Job(template)")


class JobTemplate(GPIObject):
    """A job's description, kept to make jobs from: ``JobTemplate(name=..., application=...,
    splitter=..., backend=...)``, stored in ``templates``. ``Job(template)`` makes a new job
    of it; ``JobTemplate(job)`` a template of a job's description. It is never submitted.
    """

    _impl_class = TemplateImpl
    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        source = unwrap_value(args[0]) if len(args) == 1 else None
        if describes(source):
            super().__init__()
            copy_description(source, self._template)
            for name, value in kwargs.items():
                setattr(self, name, value)
        else:
            refuse_positional(type(self).__name__, args)
            super().__init__(*args, **kwargs)
        impl = self._template
        session = current_session()
        session.repo.in_transaction(
            lambda: TemplateTable(session.registry().root).add(impl), what="creating a template"
        )

    _rules_edits = True

    def _check_edit_below(self, node: GPIObject, name: str) -> None:
        """A removed template's description no longer changes."""
        template = self._template
        if template_removed(template):
            raise TemplateError(
                f"template {template.id} was removed: changing {node._path_to(name)} is not "
                "possible"
            )

    @property
    def _template(self) -> TemplateImpl:
        impl: TemplateImpl = object.__getattribute__(self, "_impl")
        return impl

    @property
    def id(self) -> int:
        return self._template.id

    @property
    def status(self) -> str:
        """'template'; 'removed' once removed from the repository."""
        return "removed" if template_removed(self._template) else TEMPLATE_STATUS

    def submit(self, *args: Any, **kwargs: Any) -> bool:
        """A template is never submitted: ``Job(template).submit()`` runs a job made of it."""
        raise _not_submittable("submitted")

    def kill(self, *args: Any, **kwargs: Any) -> bool:
        raise _not_submittable("killed (it never runs)")

    def resubmit(self, *args: Any, **kwargs: Any) -> bool:
        raise _not_submittable("resubmitted")

    @keyword_options
    def remove(self) -> bool:
        """Remove the template from the repository (jobs made of it stay)."""
        impl = self._template
        session = current_session()
        return session.repo.in_transaction(
            lambda: TemplateTable(session.registry().root).remove(impl.id),
            what=f"removing template {impl.id}",
        )

    @keyword_options
    def copy(self) -> JobTemplate:
        """A new template with the same description."""
        return JobTemplate(self)

    def __repr__(self) -> str:
        impl = self._template
        fields = [f"id={impl.id}", f"status={TEMPLATE_STATUS}"]
        state = impl.stored()
        for name, value in state.items():
            if name in type(impl)._schema and name not in ("id", "status"):
                fields.append(f"{name}={wrap(value)!r}")
        return f"JobTemplate({', '.join(fields)})"


register_proxy_class(TemplateImpl, JobTemplate)
JobTemplate.__doc__ = f"{inspect.cleandoc(JobTemplate.__doc__ or '')}\n\n{schema_doc(TemplateImpl)}"


class TemplateSlice(JobSlice):
    """A list of templates that prints as a table; they cannot be submitted."""

    def __init__(self, items: Iterable[TemplateImpl], title: str = "templates") -> None:
        super().__init__(items, title)

    def __getitem__(self, index: int | slice) -> Any:
        check_index(index, self._title, "template")
        impls = self._impls()
        if isinstance(index, slice):
            return TemplateSlice(impls[index], self._title)
        try:
            return wrap(impls[index])
        except IndexError:
            raise TemplateError(
                f"{self._title}: index {index} out of range ({len(impls)} templates)"
            ) from None

    @keyword_options
    def select(
        self,
        ids: Iterable[int] | range | int | None = None,
        maxid: int | None = None,
        *,
        status: str | None = None,
        name: str | None = None,
        backend: str | type | None = None,
        application: str | type | None = None,
    ) -> TemplateSlice:
        """Templates matching every given condition: ids (a list or range, or a first and
        last id as for jobs), name (glob), backend or application (its class, or class
        name); status matches 'template' (any job's status none, an unknown one is refused)."""
        where = f"{shown_name(self)}.select()"
        matches = description_filter(where, ids, maxid, status, name, backend, application)
        if status and status.lower() != TEMPLATE_STATUS:  # "" is no condition, as for jobs
            Status.parse(status)  # a job's status matches no template; an unknown one is refused
            return TemplateSlice([], self._title)
        return TemplateSlice([item for item in self._impls() if matches(item)], self._title)

    @keyword_options
    def query(self, text: str) -> JobSlice:
        raise TemplateError("templates have no query(); use templates.select(...)")

    _item = "template"
    _kind = TemplateImpl

    def _sliced(self, items: list[Any]) -> TemplateSlice:
        return TemplateSlice(items, self._title)

    def submit(self, *ids: Any, **options: Any) -> list[str]:
        raise _not_submittable("submitted")

    def kill(self, *ids: Any, **options: Any) -> list[str]:
        raise _not_submittable("killed (it never runs)")

    def resubmit(self, *ids: Any, **options: Any) -> list[str]:
        raise _not_submittable("resubmitted")

    def freeze(self, *ids: Any, **options: Any) -> list[str]:
        raise _not_submittable("frozen (it never runs)")

    def unfreeze(self, *ids: Any, **options: Any) -> list[str]:
        raise _not_submittable("unfrozen (it never runs)")

    @keyword_options
    def remove(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Remove every template of the slice (or those of the ids given)."""
        for item in self._only("remove", ids)._impls():
            wrap(item).remove()
        return []

    @keyword_options
    def copy(self, *ids: Any, keep_going: bool = True) -> TemplateSlice:
        """New templates with the descriptions of every template (or of the ids given)."""
        copies = [JobTemplate(wrap(item)) for item in self._only("copy", ids)._impls()]
        return TemplateSlice(
            [c._template for c in copies], f"new templates copied from {self._title}"
        )


class TemplateRegistry(TemplateSlice):
    """All templates in the repository: ``templates(2)``, ``templates["name"]`` (the most
    recent template so named), ``templates[-1]``, slices, ``select(...)``."""

    _shown_as = "templates"

    def __init__(self) -> None:
        self._title = "templates"

    def _by_ids(self, ids: list[int]) -> dict[int, Any]:
        current_session().refresh()
        table = _table()
        found = ((i, table.get(i)) for i in ids if storable_id(i))
        return {i: item for i, item in found if item is not None}

    def _impls(self) -> list[Any]:
        session = current_session()
        session.refresh()
        return list(TemplateTable(session.registry().root).values())

    def __len__(self) -> int:
        current_session().refresh()
        return len(_table())

    def ids(self) -> list[int]:
        current_session().refresh()
        return _table().ids()

    def __call__(self, key: int) -> JobTemplate:
        number = id_number("templates()", key, "template", "0, 1, ...", TemplateError)
        current_session().refresh()
        found = _table().get(number) if storable_id(number) else None
        if found is None:
            raise TemplateError(f"no template {key} in the repository")
        return wrap(found)  # type: ignore[no-any-return]

    def __getitem__(self, index: int | slice | str) -> Any:
        if isinstance(index, str):
            named = [t for t in self._impls() if t.name == index]
            if not named:
                raise NoSuchTemplateError(f"no template named {index!r} in the repository")
            return wrap(max(named, key=lambda t: t.id))
        return super().__getitem__(index)


class NoSuchTemplateError(TemplateError, KeyError):
    """``templates["name"]`` found no template of that name; a KeyError too."""

    __str__ = Exception.__str__


templates = TemplateRegistry()


def template_removed(template: TemplateImpl) -> bool:
    """Whether a stored template is no longer in the repository's templates table."""
    if template._p_jar is None:
        return False  # never stored (being built)
    return _table().get(template.id) is not template
