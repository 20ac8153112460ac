"""GPI proxies: the only objects users touch.

A proxy validates every assignment against its class's schema (nothing changes when
validation fails), keeps protected attributes read-only, suggests close names for unknown
ones, and shows only public attributes and methods to ``dir()`` and tab completion. There is
one proxy per underlying object, so ``jobs(3) is jobs(3)``.
"""

from __future__ import annotations

import copy
import inspect
import weakref
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSequence
from typing import TYPE_CHECKING, Any, ClassVar

from ZODB.broken import Broken

from ganga_like.errors import BrokenObjectError, JobError, SchemaError, TemplateError
from ganga_like.gpi.arguments import keyword_options
from ganga_like.model import plugin_registry
from ganga_like.model.base import (
    Component,
    ComponentList,
    GangaObject,
    check_depth,
    kind_of,
    schema_items,
    unknown_attribute_message,
)
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.model.template import JobTemplate as TemplateImpl
from ganga_like.repository.templates import TemplateTable

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = [
    "GPIDict",
    "GPIList",
    "GPIObject",
    "check_writable",
    "current_session",
    "proxy_class",
    "register_proxy_class",
    "schema_doc",
    "unwrap",
    "wrap",
]

_proxies: weakref.WeakValueDictionary[int, GPIObject] = weakref.WeakValueDictionary()
_classes: dict[type[GangaObject], type[GPIObject]] = {}
# Hand-written proxy classes, by the implementation class they stand for (with its
# subclasses): the GPI ``Job`` registers itself here, because it uses this module.
_written: dict[type[GangaObject], type[GPIObject]] = {}


def register_proxy_class(impl_class: type[GangaObject], proxy: type[GPIObject]) -> None:
    """Make ``proxy`` the GPI class of ``impl_class`` and of its subclasses."""
    _written[impl_class] = proxy


def wrap(value: Any, owner: GPIObject | None = None) -> Any:
    """The GPI face of an implementation value."""
    if isinstance(value, GangaObject):
        proxy = _proxies.get(id(value))
        if proxy is None or object.__getattribute__(proxy, "_impl") is not value:
            proxy = proxy_class(type(value))._from_impl(value)
            _proxies[id(value)] = proxy
        if owner is not None and object.__getattribute__(proxy, "_owner") is None:
            object.__setattr__(proxy, "_owner", owner)
        return proxy
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, tuple):
        return [wrap(v) for v in value]
    if isinstance(value, dict):
        return {k: wrap(v) for k, v in value.items()}
    if isinstance(value, Broken):
        return BrokenProxy(value)
    return value


def unwrap(value: Any) -> Any:
    """The implementation value of a GPI value (proxies inside lists and dicts too)."""
    if isinstance(value, GPIObject):
        return object.__getattribute__(value, "_impl")
    if isinstance(value, GPIList):
        return [unwrap(v) for v in value]
    if isinstance(value, GPIDict):
        return {k: unwrap(value[k]) for k in value}
    if isinstance(value, list | tuple):
        return type(value)(unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    return value


def current_session() -> Session:
    """The session GPI objects act in (opened on first use): the one accessor for the
    GPI's modules, which import the runtime's session module only when first asked."""
    from ganga_like.runtime import session

    return session.current_session()


class GPIObject:
    """Base of every proxy class."""

    _impl_class: ClassVar[type[GangaObject]]
    __slots__ = ("__weakref__", "_impl", "_owner")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        positional = cls._impl_class._positional
        if len(args) > len(positional):
            raise SchemaError(
                f"{cls.__name__}() takes at most {len(positional)} positional "
                f"argument(s) ({', '.join(positional) or 'none'}), "
                f"{len(args)} given"
            )
        kwargs = {**dict(zip(positional, args, strict=False)), **kwargs}
        for name, value in kwargs.items():
            check_writable(cls._impl_class, name)
            check_depth(cls._impl_class, name, value)
        impl = cls._impl_class(**{k: unwrap(_adopt(self, v)) for k, v in kwargs.items()})
        object.__setattr__(self, "_impl", impl)
        object.__setattr__(self, "_owner", None)
        _proxies[id(impl)] = self

    @classmethod
    def _from_impl(cls, impl: GangaObject) -> GPIObject:
        proxy = object.__new__(cls)
        object.__setattr__(proxy, "_impl", impl)
        object.__setattr__(proxy, "_owner", None)
        return proxy

    # -- attributes ------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        impl = object.__getattribute__(self, "_impl")
        cls = type(impl)
        if name in cls._schema and not cls._schema[name].metadata.get("hidden"):
            value = getattr(impl, name)
            if isinstance(value, tuple):
                return GPIList(self, name)
            if isinstance(value, dict):
                return GPIDict(self, name)
            return wrap(value, owner=self)
        if name in cls._exported_methods:
            method: Callable[..., Any] = getattr(impl, name)
            return _exported(method)
        raise SchemaError(unknown_attribute_message(cls, name))

    def __setattr__(self, name: str, value: Any) -> None:
        impl = object.__getattribute__(self, "_impl")
        cls = type(impl)
        check_writable(cls, name)
        check_depth(cls, name, value)
        self._check_editable(name)
        new = unwrap(_adopt(self, value))

        def assign() -> None:
            old = getattr(impl, name)
            impl._assign(name, new)
            if isinstance(impl, JobImpl) and name == "name" and impl._p_jar is not None:
                current_session().registry().rename(impl, old)

        job = self._root_job()
        if job is not None and job._p_jar is not None:
            # Stored: saved at once in a retried transaction (or by the shell cell's commit).
            current_session().change(
                assign, f"setting {type(impl).__name__}.{name} of job {job.fqid}"
            )
        elif job is None and self._root_impl()._p_jar is not None:
            # Stored outside any job (a template): saved the same way.
            current_session().change(assign, f"setting {type(impl).__name__}.{name}")
        else:
            assign()

    def __delattr__(self, name: str) -> None:
        raise SchemaError(f"{type(self).__name__}.{name} cannot be deleted")

    def _root_job(self) -> JobImpl | None:
        node: GPIObject | None = self
        while node is not None:
            impl = object.__getattribute__(node, "_impl")
            if isinstance(impl, JobImpl):
                return impl
            node = object.__getattribute__(node, "_owner")
        return None

    def _root_impl(self) -> GangaObject:
        """The object at the top of the owners above this one (itself if it has none)."""
        node: GPIObject = self
        while True:
            owner: GPIObject | None = object.__getattribute__(node, "_owner")
            if owner is None:
                impl: GangaObject = object.__getattribute__(node, "_impl")
                return impl
            node = owner

    def _check_editable(self, name: str) -> None:
        """Refuse to change what a submitted job ran with, at any depth below the job.

        A job that is not new, or that has subjobs, keeps its description: only attributes declared
        ``changeable_at_resubmit`` change, and only once the job reached a final state (a
        resubmission will use them); a job's own name and comment change at any time."""
        job = self._root_job()
        if job is None:
            top = self._root_impl()
            if isinstance(top, TemplateImpl) and template_removed(top):
                raise TemplateError(
                    f"template {top.id} was removed: changing {self._path_to(name)} is not possible"
                )
            return
        impl = object.__getattribute__(self, "_impl")
        if job_removed(job):
            raise JobError(removed_message(job, f"changing {self._path_to(name)}"))
        trait = type(impl)._schema[name]
        status = job.current_status()
        # Inside a part that may change (``j.retry.attempts``, ``j.postprocessors[0].files``)
        # as the part itself may: changing it in place is replacing it.
        part = name if impl is job else self._job_part()
        part_trait = JobImpl._schema.get(part) if part else None
        if part in job_parts().always_changeable and (impl is job or job.master is None):
            return
        if job.master is None:
            if status is Status.NEW and not job.is_master:
                return
            if job.is_master and status is Status.NEW:
                # Part of it never ran, but its subjobs were made from this description.
                raise JobError(
                    f"job {job.fqid} has subjobs: {self._path_to(name)} can no "
                    "longer be changed; copy() the job to change it"
                )
            if status.final and (
                trait.metadata.get("changeable_at_resubmit")
                or (part_trait is not None and part_trait.metadata.get("changeable_at_resubmit"))
            ):
                return
            raise JobError(
                f"job {job.fqid} is {status}: {self._path_to(name)} can no longer "
                "be changed; copy() the job to change it"
            )
        raise JobError(
            f"subjob {job.fqid} is {status}: {self._path_to(name)} can no longer "
            "be changed; copy() it to a new job"
        )

    def _job_part(self) -> str | None:
        """The job's attribute this object is in (``postprocessors`` for a merger in its
        list), or None when it is in no job."""
        node: GPIObject = self
        while True:
            owner: GPIObject | None = object.__getattribute__(node, "_owner")
            if owner is None:
                return None
            owner_impl = object.__getattribute__(owner, "_impl")
            if isinstance(owner_impl, JobImpl):
                held = _attribute_holding(owner_impl, object.__getattribute__(node, "_impl"))
                return held.split("[")[0] if held else None
            node = owner

    def _path_to(self, name: str) -> str:
        """``application.args`` for ``args`` of a job's application (for messages)."""
        parts = [name]
        node: GPIObject = self
        while True:
            impl = object.__getattribute__(node, "_impl")
            owner: GPIObject | None = object.__getattribute__(node, "_owner")
            if owner is None or isinstance(impl, JobImpl):
                break
            parts.append(
                _attribute_holding(object.__getattribute__(owner, "_impl"), impl)
                or type(impl).__name__
            )
            node = owner
        return ".".join(reversed(parts))

    def __dir__(self) -> Iterable[str]:
        cls = type(object.__getattribute__(self, "_impl"))
        names = [n for n, _ in schema_items(cls)] + list(cls._exported_methods)
        return sorted(set(names) | _public_members(type(self)))

    # -- behaviour -------------------------------------------------------------------

    @keyword_options
    def copy(self) -> GPIObject:
        """An unattached copy (for a Job: a new job in the repository)."""
        impl = object.__getattribute__(self, "_impl")
        return wrap(impl._copy())  # type: ignore[no-any-return]

    # ``copy.copy(j)`` and ``copy.deepcopy(j)`` are ``j.copy()``: a proxy's slots are no
    # state of its own to copy, and its object's copy is always deep.
    def __copy__(self) -> GPIObject:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> GPIObject:
        return self.copy()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GPIObject):
            return object.__getattribute__(self, "_impl") is object.__getattribute__(
                other, "_impl"
            ) or _same_content(self, other)
        return NotImplemented

    def __hash__(self) -> int:
        return id(object.__getattribute__(self, "_impl"))

    def __repr__(self) -> str:
        impl = object.__getattribute__(self, "_impl")
        parts = []
        for name, _trait in schema_items(type(impl)):
            if name in impl.stored():
                parts.append(f"{name}={wrap(impl.stored()[name])!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _attribute_holding(parent: GangaObject, child: GangaObject) -> str | None:
    """The attribute of ``parent`` that holds ``child``: "application", "outputfiles[1]"."""
    for name, value in parent.stored().items():
        if value is child:
            return name
        if isinstance(value, tuple):
            for index, item in enumerate(value):
                if item is child:
                    return f"{name}[{index}]"
    return None


def _adopt(owner: GPIObject, value: Any) -> Any:
    """A value handed to ``owner``: the components in it become ``owner``'s, so that the
    job above them decides what may change; a component already held by another object is
    copied (as Ganga does), so that one object never belongs to two jobs at once."""
    if isinstance(value, GPIObject):
        if isinstance(object.__getattribute__(value, "_impl"), JobImpl):
            return value  # a job is only referred to (a template's ``after=``), never held
        current = object.__getattribute__(value, "_owner")
        if current is None or current is owner:
            object.__setattr__(value, "_owner", owner)
            return value
        return wrap(object.__getattribute__(value, "_impl")._copy(), owner=owner)
    if isinstance(value, GPIList | list | tuple):
        return [_adopt(owner, v) for v in value]
    if isinstance(value, GPIDict):
        return {k: _adopt(owner, value[k]) for k in value}
    if isinstance(value, dict):
        return {k: _adopt(owner, v) for k, v in value.items()}
    return value


def _same_content(a: GPIObject, b: GPIObject) -> bool:
    ia = object.__getattribute__(a, "_impl")
    ib = object.__getattribute__(b, "_impl")
    if type(ia) is not type(ib) or isinstance(ia, JobImpl):
        return False
    return all(wrap(getattr(ia, n)) == wrap(getattr(ib, n)) for n, _ in schema_items(type(ia)))


def _public_members(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is GPIObject or klass is object:
            continue
        names.update(n for n in vars(klass) if not n.startswith("_"))
    names.add("copy")
    return names


def job_removed(job: JobImpl) -> bool:
    """Whether a job (or its master) is no longer in the repository: the GPI object of a
    removed job outlives it, and must neither show nor accept a live job's state."""
    top = job
    while top.master is not None:
        top = top.master
    if top._p_jar is None:
        return False  # never stored (an object being built): nothing to have removed
    return current_session().registry().get(top.id) is not top


def template_removed(template: TemplateImpl) -> bool:
    """Whether a stored template is no longer in the repository's templates table."""
    if template._p_jar is None:
        return False  # never stored (being built)
    return TemplateTable(current_session().registry().root).get(template.id) is not template


def removed_message(job: JobImpl, what: str) -> str:
    return f"job {job.fqid} was removed: {what} is not possible; copy() it to make a new job"


def check_writable(cls: type[GangaObject], name: str) -> None:
    """Refuse, in one line, an attribute ``cls`` does not have or that is read-only."""
    trait = cls._schema.get(name)
    if trait is None or trait.metadata.get("hidden"):
        raise SchemaError(unknown_attribute_message(cls, name))
    if trait.metadata.get("protected"):
        raise SchemaError(f"{cls.__name__}.{name} is read-only")


def _exported(method: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        result = method(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})
        return wrap(result)

    call.__name__ = getattr(method, "__name__", "method")
    call.__doc__ = method.__doc__
    return call


class _Held:
    """A list or dict attribute, or a list or dict inside one (``splitter.args[0]``,
    ``splitter.multi_attrs["args"]``), seen through the object that holds it: reads come
    from the stored value, and every change rebuilds the whole attribute and assigns it, so
    it is validated, refused on a submitted job and stored in one retried transaction
    exactly as an assignment is."""

    __slots__ = ("_name", "_owner", "_path")

    def __init__(self, owner: GPIObject, name: str, path: tuple[Any, ...] = ()) -> None:
        self._owner = owner
        self._name = name
        self._path = path

    def _raw(self) -> Any:
        impl = object.__getattribute__(self._owner, "_impl")
        value = getattr(impl, self._name)
        for key in self._path:
            value = value[key]
        return value

    def _child(self, key: Any, value: Any) -> Any:
        """The GPI face of the value at ``key``: a nested list or dict changes in place
        through this same attribute."""
        # (Lists inside lists are stored as tuples; older records may hold lists.)
        if isinstance(value, tuple | list):
            return GPIList(self._owner, self._name, (*self._path, key))
        if isinstance(value, dict):
            return GPIDict(self._owner, self._name, (*self._path, key))
        return wrap(value, owner=self._owner)

    # ``copy.copy(j.application.env)`` is a plain dict (a list for a list), as ``copy()``
    # is: a copy still held by the job would change the job. A deep copy copies the
    # components inside too, unattached.
    def __copy__(self) -> Any:
        return _plain(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy.deepcopy(_plain(self), memo)

    def _store(self, value: Any) -> None:
        if not self._path:
            setattr(self._owner, self._name, value)
            return
        # A nested value changes through the whole attribute: validated and stored at once.
        top = _plain(getattr(object.__getattribute__(self._owner, "_impl"), self._name))
        inner = top
        for key in self._path[:-1]:
            inner = inner[key]
        inner[self._path[-1]] = value
        setattr(self._owner, self._name, top)


class GPIList(_Held):
    """A list attribute, or a list inside one (``splitter.args[0]``): reads like a list, and
    every change is validated and stored through the attribute that holds it."""

    __slots__ = ()

    def _items(self) -> list[Any]:
        return [self._child(i, v) for i, v in enumerate(self._raw())]

    def copy(self) -> list[Any]:
        """A plain list copy (changing it changes nothing stored), as a list's copy() is."""
        return _plain(self)  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._raw())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())

    def __getitem__(self, index: Any) -> Any:
        return self._items()[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        items = self._items()
        items[index] = value
        self._store(items)

    def __delitem__(self, index: Any) -> None:
        items = self._items()
        del items[index]
        self._store(items)

    def __contains__(self, value: object) -> bool:
        return value in self._items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GPIList | list | tuple):
            return bool(_plain(self) == _plain(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __iadd__(self, other: Iterable[Any]) -> GPIList:
        self.extend(other)
        return self

    def append(self, value: Any) -> None:
        self._store([*self._items(), value])

    def extend(self, values: Iterable[Any]) -> None:
        self._store([*self._items(), *values])

    def insert(self, index: int, value: Any) -> None:
        items = self._items()
        items.insert(index, value)
        self._store(items)

    def remove(self, value: Any) -> None:
        items = self._items()
        items.remove(value)
        self._store(items)

    def pop(self, index: int = -1) -> Any:
        items = self._items()
        value = items.pop(index)
        self._store(items)
        return _plain(value)

    def clear(self) -> None:
        self._store([])

    def sort(self, *, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> None:
        items = _plain(self)
        items.sort(key=key, reverse=reverse)
        self._store(items)

    def reverse(self) -> None:
        self._store(_plain(self)[::-1])

    def index(self, value: Any, *bounds: int) -> int:
        return self._items().index(value, *bounds)

    def count(self, value: Any) -> int:
        return self._items().count(value)

    def __repr__(self) -> str:
        return repr(self._items())


class GPIDict(_Held):
    """A dict attribute, or a dict inside one (``splitter.multi_attrs``): reads like a dict,
    and every change (``d[k] = v``, ``update``, ``pop``, ``del``, ``|=``, ...) is validated
    and stored through the attribute that holds it, in one step per call."""

    __slots__ = ()

    def _mapping(self) -> dict[Any, Any]:
        return {k: self._child(k, v) for k, v in self._raw().items()}

    def _changed(self, change: Callable[[dict[Any, Any]], Any]) -> Any:
        """Apply ``change`` to a plain copy and store the result; ``change``'s result."""
        plain: dict[Any, Any] = _plain(self)
        result = change(plain)
        self._store(plain)
        return _plain(result)

    def __len__(self) -> int:
        return len(self._raw())

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._raw()))

    def __getitem__(self, key: Any) -> Any:
        return self._child(key, self._raw()[key])

    def __contains__(self, key: object) -> bool:
        return key in self._raw()

    def keys(self) -> Any:
        return self._mapping().keys()

    def values(self) -> Any:
        return self._mapping().values()

    def items(self) -> Any:
        return self._mapping().items()

    def get(self, key: Any, default: Any = None) -> Any:
        raw = self._raw()
        return self._child(key, raw[key]) if key in raw else default

    def copy(self) -> dict[Any, Any]:
        """A plain dict copy (changing it changes nothing stored)."""
        return _plain(self)  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GPIDict | dict):
            return bool(_plain(self) == _plain(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __or__(self, other: Any) -> dict[Any, Any]:
        return {**_plain(self), **_plain(dict(other))}

    def __ror__(self, other: Any) -> dict[Any, Any]:
        return {**_plain(dict(other)), **_plain(self)}

    def __ior__(self, other: Any) -> GPIDict:
        self.update(other)
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        self._changed(lambda d: d.__setitem__(key, value))

    def __delitem__(self, key: Any) -> None:
        self._changed(lambda d: d.__delitem__(key))

    def update(self, *others: Any, **values: Any) -> None:
        self._changed(
            lambda d: d.update(
                *[_plain(dict(o)) if isinstance(o, GPIDict) else o for o in others], **values
            )
        )

    def pop(self, key: Any, *default: Any) -> Any:
        if key not in self._raw():
            if default:
                return default[0]
            raise KeyError(key)
        return self._changed(lambda d: d.pop(key))

    def popitem(self) -> tuple[Any, Any]:
        return self._changed(lambda d: d.popitem())  # type: ignore[no-any-return]

    def setdefault(self, key: Any, default: Any = None) -> Any:
        raw = self._raw()
        if key in raw:
            return self._child(key, raw[key])
        self[key] = default
        return self[key]

    def clear(self) -> None:
        self._store({})

    def __repr__(self) -> str:
        return repr(self._mapping())


# Code that asks "is it a mapping / a sequence?" gets the answer a user would expect.
MutableMapping.register(GPIDict)
MutableSequence.register(GPIList)


def _plain(value: Any) -> Any:
    """Plain, mutable lists and dicts at every depth (GPI lists and dicts and stored
    tuples alike), components as they are."""
    if isinstance(value, GPIList | list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, GPIDict):
        return {k: _plain(value[k]) for k in value}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class BrokenProxy:
    """An object whose plugin is missing: it can be looked at, nothing else."""

    def __init__(self, impl: Any) -> None:
        object.__setattr__(self, "_impl", impl)

    def __getattr__(self, name: str) -> Any:
        cls = type(object.__getattribute__(self, "_impl"))
        raise BrokenObjectError(
            f"{cls.__module__}.{cls.__name__} comes from a missing plugin; "
            "it can only be listed and removed"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        self.__getattr__(name)

    def __repr__(self) -> str:
        cls = type(object.__getattribute__(self, "_impl"))
        return f"<broken: {cls.__module__}.{cls.__name__} (plugin missing)>"


def proxy_class(impl_class: type[GangaObject]) -> type[GPIObject]:
    """The proxy class users see for an implementation class (one per class)."""
    cls = _classes.get(impl_class)
    if cls is None:
        cls = next((_written[base] for base in impl_class.__mro__ if base in _written), None)
        if cls is None and issubclass(impl_class, JobImpl):
            # Unreachable through ``ganga_like``, whose import registers the Job proxy.
            raise RuntimeError("the GPI Job class is not registered: import ganga_like.gpi.job")
        if cls is None:
            doc = _class_doc(impl_class)
            cls = type(
                impl_class.__name__,
                (GPIObject,),
                {
                    "__slots__": (),
                    "_impl_class": impl_class,
                    "__doc__": doc,
                    "__module__": "ganga_like.gpi.plugins",
                },
            )
        _classes[impl_class] = cls
    return cls


def _class_doc(impl_class: type[GangaObject]) -> str:
    intro = inspect.cleandoc(impl_class.__doc__ or impl_class.__name__)
    return f"{intro}\n\n{schema_doc(impl_class)}"


_TYPE_NAMES = {
    "Unicode": "str",
    "Int": "int",
    "Float": "float",
    "Bool": "bool",
    "List": "list",
    "Dict": "dict",
    "Tuple": "tuple",
    "CInt": "int",
    "CFloat": "float",
    "Enum": "one of",
}


def schema_doc(impl_class: type[GangaObject]) -> str:
    """The "Attributes:" section of a GPI class's help: type, default and help of each
    public attribute (what ``Job?`` and ``help(Job)`` show)."""
    lines = ["Attributes:"]
    for name, trait in schema_items(impl_class):
        read_only = ", read-only" if trait.metadata.get("protected") else ""
        lines.append(
            f"  {name} ({_type_text(trait)}, default {_default_text(trait)}"
            f"{read_only}): {trait.help}"
        )
    if len(lines) == 1:
        lines.append("  (none)")
    return "\n".join(lines)


def _type_text(trait: Any) -> str:
    if isinstance(trait, ComponentList):
        return f"list of {kind_of(trait.category)} objects"
    if isinstance(trait, Component):
        return f"{kind_of(trait.category)} object"
    name = _TYPE_NAMES.get(type(trait).__name__, type(trait).__name__)
    values = getattr(trait, "values", None)
    if name == "one of" and values:
        name = "one of " + ", ".join(repr(v) for v in values)
    return f"{name} or None" if getattr(trait, "allow_none", False) else name


def _default_text(trait: Any) -> str:
    if isinstance(trait, Component):
        return f"{trait.default_plugin}()" if trait.default_plugin else "None"
    try:
        return repr(trait.default())
    except Exception:  # a trait without a computable default: say so, never fail help()
        return "(computed)"


def plugin(name: str) -> type[GPIObject]:
    """The GPI class of a plugin by name, e.g. ``plugin("Local")``."""
    return proxy_class(plugin_registry.find(name))
