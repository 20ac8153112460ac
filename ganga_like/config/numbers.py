"""Numbers a user gives, to an object's attribute or to a setting: within bounds, finite,
and never True or False (which Python counts as 1 and 0, and traitlets takes as such)."""

from __future__ import annotations

import math
from typing import Any

import traitlets

from ganga_like.errors import safe_repr

__all__ = ["INT_CEILING", "accepts", "number_problem"]

# The largest whole number taken where no maximum is declared: counts and sizes past it
# are nonsense, and the schedulers' own fields are 32-bit.
INT_CEILING = 2**31 - 1


def _bounds(trait: traitlets.Int[Any, Any] | traitlets.Float[Any, Any]) -> tuple[Any, Any]:
    """(lowest, highest) taken, None for no bound (traitlets' Float says -inf and inf)."""
    low, high = (None if b is None or math.isinf(b) else b for b in (trait.min, trait.max))
    if high is None and isinstance(trait, traitlets.Int):
        high = INT_CEILING
    return low, high


def accepts(trait: traitlets.TraitType[Any, Any]) -> str:
    """What the trait accepts, as its messages say it: "an int (at least 1, at most 9)"."""
    try:
        text = str(trait.info())
    except Exception:
        text = str(getattr(trait, "info_text", "") or "a valid value")
    if not isinstance(trait, traitlets.Int | traitlets.Float):
        return text
    bounds = [
        f"{word} {limit}"
        for word, limit in zip(("at least", "at most"), _bounds(trait), strict=True)
        if limit is not None
    ]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def number_problem(trait: traitlets.TraitType[Any, Any], value: Any) -> str | None:
    """Where ``trait`` is a number: "expected ..., got ..." when ``value`` is True or
    False, not finite, or outside the bounds; else None (a value of the wrong type is left
    to the trait's own check, which words it)."""
    if not isinstance(trait, traitlets.Int | traitlets.Float):
        return None
    if isinstance(value, bool):
        return f"expected {accepts(trait)}, got {value!r} (not a number)"
    if not isinstance(value, int | float):
        return None
    low, high = _bounds(trait)
    if (
        (isinstance(value, float) and not math.isfinite(value))
        or (low is not None and value < low)
        or (high is not None and value > high)
    ):
        return f"expected {accepts(trait)}, got {safe_repr(value)}"
    return None
