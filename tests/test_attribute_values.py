"""What an attribute value must be beyond its type: shown and stored. The walk that finds
the first part of a value that cannot be (``value_problem``) skips plain data at C speed;
it is proven here against a plain recursive walk that looks at every part."""

from __future__ import annotations

import decimal
import fractions
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like.model.values import leaf_problem, safe_repr, value_problem

_PLAIN = (str, bytes, int, float, complex, bool, type(None))


class Unshowable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class OddText(str):
    """A str whose repr() raises: plain by its base class, not by its own type."""

    def __repr__(self) -> str:
        raise ValueError("odd")


def _unpicklable() -> Any:
    return lambda: 1


def slow_problem(value: Any) -> bool:
    """Whether any part of ``value`` cannot be shown or stored, looking at every part."""
    kind = type(value)
    if kind in (list, tuple, set, frozenset):
        return any(slow_problem(v) for v in value)
    if kind is dict:
        return any(slow_problem(k) or slow_problem(v) for k, v in value.items())
    if kind in _PLAIN:
        return False
    return leaf_problem(value) is not None


plain = st.one_of(
    st.text(max_size=5),
    st.binary(max_size=5),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
odd = st.sampled_from(
    [
        Unshowable,
        lambda: OddText("x"),
        _unpicklable,
        threading.Lock,
        lambda: fractions.Fraction(1, 3),  # shown and stored: fine
        lambda: decimal.Decimal("1.5"),
    ]
).map(lambda make: make())
leaves = st.one_of(plain, plain, plain, odd)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=6).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
        st.frozensets(st.integers(), max_size=4),
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_the_quick_walk_finds_a_problem_exactly_when_the_full_walk_does(value: Any) -> None:
    found = value_problem(value)
    assert (found is not None) == slow_problem(value)
    if found is not None:
        part, why = found
        assert leaf_problem(part) == why
        assert "\n" not in why


@settings(max_examples=200, deadline=None)
@given(values)
def test_a_value_is_always_described_on_one_line_without_raising(value: Any) -> None:
    shown = safe_repr(value)
    assert "\n" not in shown and len(shown) <= 80
