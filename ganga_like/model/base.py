"""GangaObject: the persistent base of every job, application, backend, splitter, dataset
and file, and the schema that describes their attributes.

A class declares its attributes as traitlets trait types in ``_schema``. The traits are used
only to validate values (persistent objects are plain ``Persistent``; traitlets' machinery is
never mixed into them). Metadata tags on each trait drive the rest:

``protected``               users may read but not assign it (status, id, ...)
``copyable``                ``copy()`` carries it over (default True)
``changeable_at_resubmit``  it may still be changed once the job reached a final state (the
                            next resubmission uses it); everything else of a job that is not
                            new is frozen (the GPI proxy enforces it)
``hidden``                  internal bookkeeping, not shown to users

Job's schema carries more tags, which say what kind of part each attribute is (required,
a table column, given to subjobs, searchable): ``ganga_like.model.parts`` reads them.

Values are stored in forms that ZODB tracks: lists as tuples, dicts replaced, never mutated in
place. An attribute left at its default is not stored at all, which keeps the records of
thousands of subjobs small.
"""

from __future__ import annotations

import copy as _copy
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import traitlets
from persistent import Persistent
from ZODB.POSException import ConflictError

from ganga_like.config.numbers import accepts, number_problem
from ganga_like.errors import GangaError, SchemaError
from ganga_like.model import plugin_registry
from ganga_like.model.compact_state import pack_state, unpack_state
from ganga_like.model.list_check import UNDECIDED, checked_list
from ganga_like.model.values import safe_repr, shown_failed, value_problem

__all__ = [
    "MAX_NESTING",
    "Component",
    "ComponentList",
    "GangaObject",
    "check_depth",
    "kind_of",
    "schema_items",
]

# Deepest nesting of lists and dicts an attribute accepts. Real values nest two or three
# deep (a splitter's list of argument lists); the limit keeps every later step (validation,
# storing, copying, display, export) far from Python's recursion limit.
MAX_NESTING = 32


def kind_of(category: str) -> str:
    """One object of a plugin category: "backends" -> "backend", "retries" -> "retry"."""
    return category[:-3] + "y" if category.endswith("ies") else category.removesuffix("s")


class Component(traitlets.TraitType[Any, Any]):
    """A trait holding another GangaObject of one category (an application, a backend, ...).

    It accepts an object of that category, or a plugin name such as ``"Local"`` which is
    instantiated with its defaults.
    """

    info_text = "a plugin object"

    def __init__(self, category: str, default: str | None = None, **kwargs: Any) -> None:
        super().__init__(default_value=None, allow_none=True, **kwargs)
        self.category = category
        self.default_plugin = default
        kind = kind_of(category)
        self.info_text = f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} object or plugin name"

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, str):
            return plugin_registry.find(value, self.category)()
        if isinstance(value, GangaObject) and value._category == self.category:
            return value
        self.error(obj, value)

    def from_attributes(self, cls: type[GangaObject], value: dict[Any, Any]) -> GangaObject:
        """``cls(**value)`` for a component given as a dict of its attributes; a key that
        is not a string is refused in the trait's words (Python would raise TypeError)."""
        for key in value:
            if not isinstance(key, str):
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got a dict with the key {safe_repr(key)}, "
                    f"which is not a {cls.__name__} attribute name"
                )
        return cls(**value)


class ComponentList(traitlets.List[Any]):
    """A list of GangaObjects of one category; plugin names are accepted too."""

    def __init__(self, category: str, **kwargs: Any) -> None:
        super().__init__(trait=Component(category), default_value=[], **kwargs)
        self.category = category


class GangaObject(Persistent):  # type: ignore[misc]
    """Base of every persistent object users manipulate through the GPI."""

    _category: ClassVar[str] = ""
    _schema: ClassVar[Mapping[str, traitlets.TraitType[Any, Any]]] = {}
    # Methods the GPI proxy exposes besides the schema attributes.
    _exported_methods: ClassVar[tuple[str, ...]] = ()
    # Attributes whose stored values are append-only tuples: concurrent appends merge.
    _append_only: ClassVar[frozenset[str]] = frozenset()
    _validator: ClassVar[traitlets.HasTraits | None] = None
    # The attributes the GPI constructor takes positionally, in order:
    # ``LocalFile("data.txt")`` for ``LocalFile(namePattern="data.txt")``.
    _positional: ClassVar[tuple[str, ...]] = ()
    # False when the object stores nothing per job (no scheduler id...): subjobs then share
    # their master's object instead of each storing a copy (parts tagged subjob="copy").
    per_job_state: ClassVar[bool] = True

    # Attribute names for the compact stored form (see ``compact_state``); empty: the
    # attribute dict is stored as it is.  Append-only once records exist.
    _state_fields: ClassVar[tuple[str, ...]] = ()

    def __getstate__(self) -> Any:
        state = super().__getstate__()
        if self._state_fields:
            return pack_state(state, self._state_fields)
        return state

    def __setstate__(self, state: Any) -> None:
        if self._state_fields:
            state = unpack_state(state, self._state_fields)
        super().__setstate__(state)

    def __init__(self, **attributes: Any) -> None:
        super().__init__()
        for name, trait in self._schema.items():
            if isinstance(trait, Component) and trait.default_plugin and name not in attributes:
                self.__dict__[name] = plugin_registry.find(trait.default_plugin)()
        for name, value in attributes.items():
            self._assign(name, value)

    # -- reading ---------------------------------------------------------------------

    def stored(self) -> dict[str, Any]:
        """The attributes actually stored (not at their defaults), loading a ghost first.

        Read state through this, never through ``__dict__`` directly: an object that was
        not touched yet in this transaction is a ghost whose ``__dict__`` is empty."""
        self._p_activate()
        state: dict[str, Any] = self.__dict__
        return state

    def __getattr__(self, name: str) -> Any:
        # Called only when normal lookup fails: the attribute is at its default.
        schema = type(self)._schema
        if name in schema:
            return _default_of(schema[name])
        raise AttributeError(name)

    # -- validation and assignment ---------------------------------------------------

    @classmethod
    def _checker(cls) -> traitlets.HasTraits:
        """A HasTraits twin of the class, so traitlets can validate with good messages."""
        validator: traitlets.HasTraits | None = cls.__dict__.get("_validator")
        if validator is None:
            twin = type(cls.__name__, (traitlets.HasTraits,), dict(cls._schema))
            validator = twin()
            cls._validator = validator
        return validator

    @classmethod
    def _validate(cls, name: str, value: Any) -> Any:
        """The value to store for ``name``, or SchemaError naming class, attribute, types."""
        trait = cls._schema.get(name)
        if trait is None:
            raise SchemaError(unknown_attribute_message(cls, name))
        check_depth(cls, name, value)
        where = f"{cls.__name__}.{name}"
        problem = number_problem(trait, value)
        if problem is not None:
            raise SchemaError(f"{where}: {problem}")
        if value is None and trait.metadata.get("required"):
            # Else accepted here and found missing only at submit(), with a raw error.
            example = getattr(trait, "default_plugin", None)
            raise SchemaError(
                f"{where} cannot be None: a job needs one"
                + (f", e.g. {example}()" if example else "")
            )
        try:
            checker = cls._checker()
            checked = checked_list(trait, checker, value, inner_tuples=True)
            if checked is UNDECIDED:
                checked = trait._validate(checker, value)
        except traitlets.TraitError as exc:
            raise SchemaError(f"{where}: {_element_message(trait, exc)}") from None
        except SchemaError as exc:
            # From a component built from a dict ({"nodes": 0} for a Pilot): said of the
            # attribute it was given to, as every other refusal of that attribute is.
            if str(exc).startswith(f"{where}:"):
                raise
            raise SchemaError(f"{where}: {exc}") from None
        except GangaError:
            raise  # already one line (a plugin name that is unknown...)
        except Exception as exc:
            # The value's own methods raised while it was checked (its repr() for the
            # message, its __eq__, __iter__...): say so, never with its traceback.
            shown = safe_repr(value)
            if not shown_failed(value):
                shown += f" (checking it raised {type(exc).__name__}: {safe_repr(str(exc))})"
            raise SchemaError(f"{where}: expected {accepts(trait)}, got {shown}") from None
        unfit = value_problem(checked, skip=(GangaObject,))
        if unfit is not None:
            part, why = unfit
            given = safe_repr(part)
            if part is not checked:
                given = f"a {type(checked).__name__} holding {given}"
            raise SchemaError(f"{where}: expected {accepts(trait)}, got {given}, but {why}")
        return _storable(checked)

    def _assign(self, name: str, value: Any) -> None:
        """Validate and store (internal: no protection check)."""
        stored = self._validate(name, value)
        default = _default_of(self._schema[name])
        if _same(stored, default) and not isinstance(stored, GangaObject):
            self.__dict__.pop(name, None)
            self._p_changed = True
        else:
            setattr(self, name, stored)

    # -- what the system itself writes ----------------------------------------------
    # Values the system sets (ids, counts, copies of values checked before), and states it
    # saves and puts back around a retried transaction: stored as they are, unchecked, and
    # without marking the object changed (the caller marks a stored object; a new one is
    # stored whole when added). Never for a user's value: that is ``_assign``.

    def _put(self, name: str, value: Any) -> None:
        """Store ``value`` for ``name`` as it is."""
        self.__dict__[name] = value

    def _put_all(self, values: Mapping[str, Any]) -> None:
        """Store each of ``values`` as it is (``_put`` of each)."""
        self.__dict__.update(values)

    def _drop(self, name: str) -> None:
        """``name`` back to its default: its stored value forgotten."""
        self.__dict__.pop(name, None)

    def _state_copy(self) -> dict[str, Any]:
        """The attributes held in memory now, as a new dict (a ghost's is empty: see
        ``stored``), for ``_put_back``."""
        return dict(self.__dict__)

    def _put_back(self, state: Mapping[str, Any]) -> None:
        """The attributes exactly as ``state`` (a ``_state_copy``) holds them."""
        self.__dict__.clear()
        self.__dict__.update(state)

    # -- copying ---------------------------------------------------------------------

    def _copy(self) -> GangaObject:
        """A new, unattached object with every copyable attribute copied (components deep)."""
        clone = type(self).__new__(type(self))
        Persistent.__init__(clone)
        state = self.stored()
        for name, trait in self._schema.items():
            if not trait.metadata.get("copyable", True) or name not in state:
                continue
            clone.__dict__[name] = _copy_value(state[name])
        return clone

    # -- conflict resolution ---------------------------------------------------------

    def _p_resolveConflict(self, old: Any, committed: Any, new: Any) -> Any:
        """Three-way merge per attribute: a user renaming a job while the monitor updates
        its status is not a conflict. Append-only tuples (the event log) merge both
        sides' additions. Two different new values for one attribute are a real conflict."""
        fields = self._state_fields
        if fields:
            old, committed, new = (unpack_state(s, fields) for s in (old, committed, new))
            return pack_state(self._merge_states(old, committed, new), fields)
        return self._merge_states(old, committed, new)

    def _merge_states(
        self, old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for key in set(old) | set(committed) | set(new):
            o, c, n = old.get(key, _MISSING), committed.get(key, _MISSING), new.get(key, _MISSING)
            if _same(c, o):
                value = n
            elif _same(n, o) or _same(n, c):
                value = c
            elif key in self._append_only and _extends(c, o) and _extends(n, o):
                base = () if o is _MISSING else o
                value = (*c, *n[len(base) :])
            else:
                raise ConflictError(f"both sides changed {type(self).__name__}.{key}")
            if value is not _MISSING:
                merged[key] = value
        return merged


_MISSING: Any = object()

# Every plugin derives from GangaObject; the registry checks that when it loads one.
plugin_registry.register_plugin_base(GangaObject)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # persistent references of different kinds may refuse comparison
        return False


def _extends(longer: Any, base: Any) -> bool:
    base = () if base is _MISSING else base
    return (
        isinstance(longer, tuple)
        and isinstance(base, tuple)
        and len(longer) >= len(base)
        and longer[: len(base)] == base
    )


def _default_of(trait: traitlets.TraitType[Any, Any]) -> Any:
    if isinstance(trait, Component):
        return None
    cached = _DEFAULTS.get(id(trait), _MISSING)
    if cached is _MISSING:
        cached = _storable(trait.default())
        _DEFAULTS[id(trait)] = cached
    return _storable(cached)


_DEFAULTS: dict[int, Any] = {}


_CONTAINERS = (list, tuple, dict)


def _storable(value: Any) -> Any:
    """Lists become tuples and dicts are copied, at every depth, so nothing stored can
    change in place (a list inside a list would escape validation and ZODB's tracking)."""
    if isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, _CONTAINERS):
                return tuple(_storable(v) for v in value)
        return tuple(value)
    if isinstance(value, dict):
        return {k: _storable(v) for k, v in value.items()}
    return value


def check_depth(cls: type, name: str, value: Any, where: str = "") -> None:
    """SchemaError if ``value`` nests lists or dicts deeper than MAX_NESTING (the message
    names ``where``, by default ``Class.name``).

    Walked depth first without recursion: a value nested 100,000 deep (or one that
    contains itself) gets this one line, never a RecursionError."""
    if not isinstance(value, _CONTAINERS):
        return
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_NESTING:
            raise SchemaError(
                f"{where or f'{cls.__name__}.{name}'}: lists or dicts nested "
                f"more than {MAX_NESTING} deep are not accepted"
            )
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))


def _copy_value(value: Any) -> Any:
    if isinstance(value, GangaObject):
        return value._copy()
    if isinstance(value, tuple):
        return tuple(_copy_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    return _copy.copy(value)


def _element_message(trait: traitlets.TraitType[Any, Any], exc: traitlets.TraitError) -> str:
    """The reason, saying so when an element of a list of lists is not a list ("contains a
    List of a List which expected a list"), with what the list holds: else
    ``ArgSplitter(args=["a"])`` reads as if ``args`` itself were not a list."""
    reason = _short(exc)
    head = str(exc).split(" expected ", 1)[0]
    nested = isinstance(getattr(trait, "_trait", None), traitlets.Container | traitlets.Dict)
    if not nested or " contains " not in head or head.split(" contains ", 1)[1].count(" of ") != 1:
        return reason
    helptext = str(trait.help or "").strip().rstrip(".")
    return f"an element {reason}" + (f" ({helptext})" if helptext else "")


# traitlets' words for a bad key or value of a dict.
_DICT_ELEMENT = re.compile(
    r"^(Keys|Values) of the '\w+' trait of .+? instance must be (.+), "
    r"but a value of (.+) <class '[^']*'> was specified\.?$",
    re.DOTALL,
)


# traitlets' words when an element's trait raised a message of its own instead of calling
# error(): "expected <traitlets.traitlets.List object at 0x...>, not the str 'MESSAGE'".
_OWN_ELEMENT_MESSAGE = re.compile(r"expected <traitlets\.[^>]+>, not the str (['\"])(.*)\1\.?$")


def _short(exc: traitlets.TraitError) -> str:
    text = str(exc)
    own = _OWN_ELEMENT_MESSAGE.search(text)
    if own is not None:
        return own.group(2)
    element = _DICT_ELEMENT.match(text)
    if element is not None:
        side, expected, given = element.groups()
        return f"expected {side.lower()} that are {expected}, got {given}"
    # traitlets says "The 'x' trait of a Job instance expected ..."; keep "expected ...".
    marker = " expected "
    text = "expected " + text.split(marker, 1)[1] if marker in text else text
    return text.rstrip(".")


def unknown_attribute_message(cls: type[GangaObject], name: str) -> str:
    import difflib

    public = [n for n, t in cls._schema.items() if not t.metadata.get("hidden")]
    close = difflib.get_close_matches(name, public + list(cls._exported_methods), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{cls.__name__} has no attribute {name!r}{hint}"


def schema_items(cls: type[GangaObject]) -> Iterator[tuple[str, traitlets.TraitType[Any, Any]]]:
    """The public (not hidden) schema attributes of a class, in declaration order."""
    for name, trait in cls._schema.items():
        if not trait.metadata.get("hidden"):
            yield name, trait
