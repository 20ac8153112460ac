"""Functions PythonFunction tests call by dotted name (``tests.pyfunctions.power``).

Only the standard library is imported: the (sub)job imports this module to run them."""

from __future__ import annotations

import threading
from typing import Any


def power(base: float, exponent: int = 1) -> float:
    return base**exponent


def divide(a: float, b: float) -> float:
    return a / b


def describe(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """What the function was given, types included."""
    return {
        "args": list(args),
        "types": [type(a).__name__ for a in args],
        "kwargs": kwargs,
    }


def a_lock() -> threading.Lock:
    """A return value that cannot be pickled."""
    return threading.Lock()


NOT_CALLABLE = 42


def read_text(path: str) -> str:
    with open(path) as handle:
        return handle.read()
