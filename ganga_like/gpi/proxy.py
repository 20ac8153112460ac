"""GPI proxies: the only objects users touch.

A proxy validates every assignment against its class's schema (nothing changes when
validation fails), keeps protected attributes read-only, suggests close names for unknown
ones, and shows only public attributes and methods to ``dir()`` and tab completion. There is
one proxy per underlying object, so ``jobs(3) is jobs(3)``.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from ZODB.broken import Broken

from ganga_like.errors import BrokenObjectError, SchemaError
from ganga_like.gpi.arguments import keyword_options
from ganga_like.gpi.containers import GPIDict, GPIList
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
        return _kept_if_same(value, [unwrap(v) for v in value])
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    return value


def _kept_if_same(value: Any, items: list[Any]) -> Any:
    """``value`` itself when ``items`` are its own elements, else ``items`` as its type:
    a splitter's million argument lists are not copied twice on their way in (what is
    stored is a copy made by the validation)."""
    if all(new is old for new, old in zip(items, value, strict=True)):
        return value
    return items if type(value) is list else type(value)(items)


def current_session() -> Session:
    """The session GPI objects act in (opened on first use): the one accessor for the
    GPI's modules, which import the runtime's session module only when first asked."""
    from ganga_like.runtime import session

    return session.current_session()


class GPIObject:
    """Base of every proxy class."""

    _impl_class: ClassVar[type[GangaObject]]
    __slots__ = ("__weakref__", "_impl", "_owner")
    # Whether two objects of this class with the same content are equal (two distinct jobs
    # never are).
    _compared_by_content: ClassVar[bool] = True

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
            self._assigned(name, old)

        ruler = self._ruler()
        if object.__getattribute__(ruler, "_impl")._p_jar is not None:
            # Stored: saved at once in a retried transaction (or by the shell cell's commit).
            where = ruler._changing_in()
            current_session().change(assign, f"setting {type(impl).__name__}.{name}{where}")
        else:
            assign()

    def __delattr__(self, name: str) -> None:
        raise SchemaError(f"{type(self).__name__}.{name} cannot be deleted")

    def _wrap_held(self, value: Any) -> Any:
        """The GPI face of a value found in one of this object's lists or dicts."""
        return wrap(value, owner=self)

    # -- what may change: the object at the top decides (a job, a template) ---------------

    # Whether this class's objects rule what may change in them and in everything below
    # them (a job keeps what it ran with; see gpi.job): the search for the rules stops at
    # the first such object above the one changed.
    _rules_edits: ClassVar[bool] = False

    def _ruler(self) -> GPIObject:
        """The object whose class rules changes to this one: the first above it (or itself)
        whose class rules edits, else the one at the top of its owners."""
        node: GPIObject = self
        while not type(node)._rules_edits:
            owner: GPIObject | None = object.__getattribute__(node, "_owner")
            if owner is None:
                break
            node = owner
        return node

    def _check_editable(self, name: str) -> None:
        """Refuse, in one line, to change ``name`` of this object when the object ruling it
        forbids it (nothing is changed)."""
        ruler = self._ruler()
        ruler._check_edit_below(self, name)

    def _check_edit_below(self, node: GPIObject, name: str) -> None:
        """The rule this object (at the top) sets for changing ``name`` of ``node``, itself
        or an object below it: none by default."""

    def _changing_in(self) -> str:
        """What a change below this object (at the top) is said to be in: " of job 3"."""
        return ""

    def _assigned(self, name: str, old: Any) -> None:
        """Called once ``name`` of this object was set (its old value given), in the same
        transaction: what else the change implies."""

    def _path_to(self, name: str) -> str:
        """``application.args`` for ``args`` of a job's application (for messages)."""
        parts = [name]
        node: GPIObject = self
        while True:
            impl = object.__getattribute__(node, "_impl")
            owner: GPIObject | None = object.__getattribute__(node, "_owner")
            if owner is None or type(node)._rules_edits:
                break
            parts.append(
                attribute_holding(object.__getattribute__(owner, "_impl"), impl)
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


def attribute_holding(parent: GangaObject, child: GangaObject) -> str | None:
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
    if isinstance(value, GPIList | tuple):
        return [_adopt(owner, v) for v in value]
    if isinstance(value, list):
        return _kept_if_same(value, [_adopt(owner, v) for v in value])
    if isinstance(value, GPIDict):
        return {k: _adopt(owner, value[k]) for k in value}
    if isinstance(value, dict):
        return {k: _adopt(owner, v) for k, v in value.items()}
    return value


def _same_content(a: GPIObject, b: GPIObject) -> bool:
    ia = object.__getattribute__(a, "_impl")
    ib = object.__getattribute__(b, "_impl")
    if type(ia) is not type(ib) or not type(a)._compared_by_content:
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
