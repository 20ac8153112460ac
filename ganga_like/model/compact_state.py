"""A compact pickled form for the state of records written by the thousand.

ZODB pickles an object's ``__dict__``, so every record carries the names of its attributes:
about 15 bytes each, more than most values of a subjob.  A class that lists its attribute
names in ``_state_fields`` is stored instead as a tuple ``(mask, value, value, ...)``: bit
``i + 1`` of ``mask`` says that field ``i`` is present, and bit 0 that a dict of attributes
not in the list follows the values.

The list is append-only: a record keeps the meaning its list had when it was written, so
fields may be added at the end but never removed or reordered.  States stored as a plain
dict (older records) are read as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["pack_state", "unpack_state"]

_EXTRAS = 1


def pack_state(state: Mapping[str, Any], fields: tuple[str, ...]) -> tuple[Any, ...]:
    """``state`` as ``(mask, *values[, extras])``."""
    mask = 0
    values: list[Any] = []
    for index, name in enumerate(fields):
        if name in state:
            mask |= 2 << index
            values.append(state[name])
    if len(values) < len(state):
        known = set(fields)
        extras = {k: v for k, v in state.items() if k not in known}
        mask |= _EXTRAS
        values.append(extras)
    return (mask, *values)


def unpack_state(state: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    """The attribute dict of a state written by :func:`pack_state`, or of a plain dict."""
    if isinstance(state, dict):
        return state
    if not isinstance(state, tuple) or not state or not isinstance(state[0], int):
        raise ValueError(f"unreadable object state: {type(state).__name__}")
    mask = state[0]
    values = iter(state[1:])
    result: dict[str, Any] = {}
    for index, name in enumerate(fields):
        if mask & (2 << index):
            result[name] = next(values)
    if mask >> (len(fields) + 1):
        raise ValueError("object state written with more fields than this version knows")
    if mask & _EXTRAS:
        result.update(next(values))
    return result
