"""The parsed form of a query, and its canonical text.

``str()`` of any valid Query parses back to an equal Query. Construction checks the same
rules the parser enforces, so a Query built in code cannot print as something unparsable.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TypeAlias

from ganga_like.query import dates
from ganga_like.query.dates import RelativeTime
from ganga_like.query.lexer import ESCAPES, classify_word, is_bare_char

__all__ = [
    "EQUALITY_OPERATORS",
    "GLOB_OPERATORS",
    "OPERATORS",
    "ORDER_OPERATORS",
    "Condition",
    "Item",
    "Query",
    "Range",
    "RelativeTime",
    "Scalar",
    "Value",
    "format_number",
    "format_scalar",
    "range_is_empty",
]

Scalar: TypeAlias = int | float | str | datetime | RelativeTime

EQUALITY_OPERATORS = frozenset({"=", "<>"})
GLOB_OPERATORS = frozenset({"~", "!~"})
ORDER_OPERATORS = frozenset({"<", "<=", ">", ">="})
# Canonical spellings, in the order error messages list them. "!=" is read as "<>".
OPERATORS = ("=", "<>", "<", "<=", ">", ">=", "~", "!~")

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def _is_number(value: object) -> bool:
    # bool is an int subclass, but True is not a number anyone means to write in a query.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_time(value: object) -> bool:
    return isinstance(value, datetime | RelativeTime)


def range_is_empty(lo: Scalar, hi: Scalar) -> bool:
    """True when the ends can be ordered without knowing 'now' and lo lies above hi."""
    if isinstance(lo, int | float) and isinstance(hi, int | float):
        return lo > hi
    if isinstance(lo, datetime) and isinstance(hi, datetime):
        return lo > hi
    if isinstance(lo, RelativeTime) and isinstance(hi, RelativeTime):
        return lo.ago < hi.ago  # further ago is earlier
    return False


@dataclass(frozen=True)
class Range:
    """An inclusive range of numbers or of times (absolute, relative, or one of each)."""

    lo: Scalar
    hi: Scalar

    def __post_init__(self) -> None:
        for end in (self.lo, self.hi):
            _check_scalar(end)
        both_numbers = _is_number(self.lo) and _is_number(self.hi)
        both_times = _is_time(self.lo) and _is_time(self.hi)
        if not (both_numbers or both_times):
            raise ValueError(
                f"a range needs two numbers or two times, not {self.lo!r}..{self.hi!r}"
            )
        if range_is_empty(self.lo, self.hi):
            raise ValueError(f"empty range {self.lo!r}..{self.hi!r}")

    def __str__(self) -> str:
        return f"{format_scalar(self.lo, '=')}..{format_scalar(self.hi, '=')}"


Item: TypeAlias = Scalar | Range
# A tuple is a comma list (at least two items): the condition holds for any of them.
Value: TypeAlias = Item | tuple[Item, ...]


@dataclass(frozen=True)
class Condition:
    """``path op value``; ``position`` is where it starts in the parsed text.

    ``position`` does not take part in equality: the same condition written elsewhere is
    the same condition.
    """

    path: tuple[str, ...]
    op: str
    value: Value
    position: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if not self.path or not all(
            isinstance(part, str) and IDENTIFIER.fullmatch(part) for part in self.path
        ):
            raise ValueError(f"a path is one or more identifiers, not {self.path!r}")
        if self.op not in OPERATORS:
            raise ValueError(f"unknown operator {self.op!r}; expected one of {OPERATORS}")
        items = self.value if isinstance(self.value, tuple) else (self.value,)
        if isinstance(self.value, tuple):
            if len(self.value) < 2:
                raise ValueError("a list value needs at least two items")
            if self.op in ORDER_OPERATORS:
                raise ValueError(f"{self.op!r} takes a single value, not a list")
        for item in items:
            if isinstance(item, Range):
                if self.op not in EQUALITY_OPERATORS:
                    raise ValueError(f"a range can only be used with = or <>, not {self.op!r}")
            elif self.op in GLOB_OPERATORS and not isinstance(item, str):
                raise ValueError(f"{self.op!r} takes a text pattern, not {item!r}")
            else:
                _check_scalar(item)

    def __str__(self) -> str:
        return f"{'.'.join(self.path)}{self.op}{format_value(self.value, self.op)}"


@dataclass(frozen=True)
class Query:
    """Conditions that must all hold; no conditions matches everything."""

    conditions: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.conditions, tuple) or not all(
            isinstance(condition, Condition) for condition in self.conditions
        ):
            raise ValueError("a Query holds a tuple of Condition objects")

    def __str__(self) -> str:
        return "; ".join(str(condition) for condition in self.conditions)


def _check_scalar(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, Scalar):
        raise ValueError(f"a value is an int, float, str, datetime or RelativeTime, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"a number must be finite, not {value!r}")
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise ValueError(f"a datetime must be timezone-aware, not {value!r}")
        try:
            dates.to_utc(value)  # queries are printed in UTC, so it must exist in UTC
        except OverflowError:
            raise ValueError(f"{value!r} is outside the years 1-9999 in UTC") from None


def format_value(value: Value, op: str) -> str:
    if isinstance(value, tuple):
        return ",".join(format_value(item, op) for item in value)
    if isinstance(value, Range):
        return str(value)
    return format_scalar(value, op)


def format_scalar(value: Scalar, op: str) -> str:
    if isinstance(value, str):
        return value if _reads_back_as_text(value, op) else quote(value)
    if isinstance(value, datetime):
        return dates.format_datetime(value)
    if isinstance(value, RelativeTime):
        return dates.format_relative(value)
    return format_number(value)


def format_number(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    # repr is the shortest text that reads back as the same float, but may use an
    # exponent ("1e+16"), which the query language does not accept; Decimal spells the
    # same digits out, and ".0" keeps a whole float from reading back as an int.
    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"


def _reads_back_as_text(value: str, op: str) -> bool:
    if not value or not all(is_bare_char(ch) for ch in value):
        return False
    # After ~ and !~ every value is a pattern, so no bare word means anything but text.
    return op in GLOB_OPERATORS or classify_word(value) == "text"


_QUOTE_ESCAPES = {ch: "\\" + name for name, ch in ESCAPES.items() if ch != "'"}


def quote(value: str) -> str:
    return '"' + "".join(_QUOTE_ESCAPES.get(ch, ch) for ch in value) + '"'
