"""What an attribute value must be beyond its type: something that can be shown and stored.

A value is shown in errors, listings and exports, and stored in the repository where other
processes read it back. A user's object whose ``repr()`` raises, or one that plain pickle
cannot store (a lambda, an open file, an instance of a class defined in a script's
``__main__``), would otherwise be accepted and fail later, far from where it was given, with
a traceback. These helpers let the schema refuse it at assignment in one line.
"""

from __future__ import annotations

import io
import pickle
import types
from datetime import date, datetime, time, timedelta
from typing import Any

from ganga_like.errors import safe_repr, shown_failed

__all__ = ["leaf_problem", "plain_pickle", "safe_repr", "shown_failed", "value_problem"]

_PROTOCOL = pickle.HIGHEST_PROTOCOL

# Leaves whose repr() never raises and that plain pickle always stores. Exact types: a
# subclass of str may still define a raising __repr__.
_PLAIN = frozenset(
    {str, bytes, int, float, complex, bool, type(None), date, datetime, time, timedelta}
)
_CONTAINERS = frozenset({list, tuple, set, frozenset})


class _NoMainPickler(pickle.Pickler):
    """Plain pickle that refuses classes and functions of ``__main__``: plain pickle stores
    them by reference, and no other process can find them by that reference."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type | types.FunctionType) and obj.__module__ == "__main__":
            raise pickle.PicklingError(
                f"{obj.__qualname__} is defined in __main__ (a script or notebook): "
                "define it in an importable module"
            )
        return NotImplemented


def plain_pickle(value: Any) -> bytes:
    """``value`` pickled by plain pickle; raises when it cannot be, or refers to __main__."""
    buffer = io.BytesIO()
    _NoMainPickler(buffer, protocol=_PROTOCOL).dump(value)
    return buffer.getvalue()


def leaf_problem(value: Any) -> str | None:
    """Why one value that is neither plain data nor a container cannot be kept as an
    attribute (it cannot be shown, or cannot be stored), or None when it can."""
    try:
        repr(value)
    except Exception as exc:
        return f"its repr() raises {type(exc).__name__}"
    try:
        plain_pickle(value)
    except Exception as exc:
        reason = " ".join(str(exc).split())
        return f"it cannot be stored in the repository ({type(exc).__name__}: {reason})"
    return None


def value_problem(value: Any, skip: tuple[type, ...] = ()) -> tuple[Any, str] | None:
    """The first part of ``value`` (itself, or an item at any depth of its lists, tuples,
    dicts and sets) that cannot be kept, and why; None when every part can.

    Objects of ``skip`` (the schema's own objects, checked by their own schemas) are not
    looked into. Plain data is passed over at the cost of a type check: only unusual
    objects are shown and pickled. The depth of ``value`` must already be bounded."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _PLAIN or isinstance(item, skip):
            continue
        if kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
            continue
        if kind in _CONTAINERS:
            # The usual case, a long list of strings or numbers, checked at C speed.
            if not all(map(_PLAIN.__contains__, map(type, item))):
                stack.extend(item)
            continue
        problem = leaf_problem(item)
        if problem is not None:
            return item, problem
    return None
