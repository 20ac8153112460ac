"""A GPI object's list and dict attributes: views that read the stored value and change it
only by assigning the whole attribute again through the object that holds it."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSequence
from typing import Any, Protocol

__all__ = ["GPIDict", "GPIList", "Holder"]


class Holder(Protocol):
    """The GPI object holding a list or dict attribute (see proxy.GPIObject)."""

    def _wrap_held(self, value: Any) -> Any:
        """The GPI face of a value found in one of its lists or dicts."""


class _Held:
    """A list or dict attribute, or a list or dict inside one (``splitter.args[0]``,
    ``splitter.multi_attrs["args"]``), seen through the object that holds it: reads come
    from the stored value, and every change rebuilds the whole attribute and assigns it, so
    it is validated, refused on a submitted job and stored in one retried transaction
    exactly as an assignment is."""

    __slots__ = ("_name", "_owner", "_path")

    def __init__(self, owner: Holder, name: str, path: tuple[Any, ...] = ()) -> None:
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
        return self._owner._wrap_held(value)

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
