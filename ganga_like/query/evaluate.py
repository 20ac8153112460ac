"""Evaluating a Query against one job, through a getter that knows nothing of queries.

The evaluator never sees the job: ``getter(path)`` hands it one attribute value at a time
(or raises LookupError), so the caller can answer from an index without loading anything.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterable, Sequence, Set
from datetime import date, datetime
from fnmatch import fnmatchcase
from typing import Any

from ganga_like.query import dates
from ganga_like.query.ast import (
    Condition,
    Query,
    Range,
    RelativeTime,
    Scalar,
    Value,
    format_number,
    format_scalar,
)
from ganga_like.query.query_errors import QueryError

__all__ = ["Getter", "matches"]

Getter = Callable[[tuple[str, ...]], object]

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# A negated operator is evaluated as its positive form, then inverted, so that a
# list-valued attribute reads naturally: "args<>x" means no argument is x.
_POSITIVE = {"<>": "=", "!~": "~"}


class _Incomparable(Exception):
    """Raised deep inside a comparison; turned into a QueryError naming the condition."""


def matches(query: Query, getter: Getter, *, now: datetime) -> bool:
    """True when every condition holds for the job behind ``getter``.

    Conditions are tried in order and evaluation stops at the first that fails, so a
    condition that cannot be evaluated (QueryError) only surfaces for jobs that get that
    far. ``now`` resolves relative times; a naive ``now`` is taken to be UTC.
    """
    now = dates.aware(now)
    return all(_holds(condition, getter, now) for condition in query.conditions)


def _holds(condition: Condition, getter: Getter, now: datetime) -> bool:
    try:
        actual = getter(condition.path)
    except LookupError:
        return False  # a job without the attribute matches nothing, not even "<>"
    if actual is None:
        return False  # an unset attribute (a backend id before submission) counts as missing
    op = _POSITIVE.get(condition.op, condition.op)
    try:
        if _is_collection(actual):
            # All elements are tested, not just up to the first hit, so whether a query
            # raises does not depend on the order of the list.
            found = any([_test(item, op, condition.value, now) for item in _elements(actual)])
        else:
            found = _test(actual, op, condition.value, now)
    except _Incomparable as error:
        raise QueryError(f"cannot evaluate {str(condition)!r}: {error}") from None
    return found if op == condition.op else not found


def _is_collection(value: object) -> bool:
    # Sequence, not list: persistent lists from the repository are UserLists.
    return isinstance(value, Sequence | Set) and not isinstance(value, str | bytes | bytearray)


def _elements(value: object) -> list[object]:
    assert isinstance(value, Iterable)
    return [item for item in value if item is not None]


def _test(actual: object, op: str, value: Value, now: datetime) -> bool:
    if isinstance(value, tuple):
        return any([_test(actual, op, item, now) for item in value])
    if isinstance(value, Range):
        return _order(actual, ">=", value.lo, now) and _order(actual, "<=", value.hi, now)
    if op == "~":
        assert isinstance(value, str)  # Condition guarantees patterns are text
        return fnmatchcase(_text(actual), value)
    if op == "=":
        return _equal(actual, value, now)
    return _order(actual, op, value, now)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(actual: object, value: Scalar, now: datetime) -> bool:
    if isinstance(value, datetime | RelativeTime):
        moment = _moment(value, now)
        if isinstance(actual, date):
            return dates.as_datetime(actual) == moment
        if _is_number(actual):
            return actual == moment.timestamp()
    elif _is_number(value) and _is_number(actual):
        return actual == value
    return _text(actual) == (value if isinstance(value, str) else format_scalar(value, "="))


def _order(actual: object, op: str, value: Scalar, now: datetime) -> bool:
    compare = _ORDER[op]
    if isinstance(value, datetime | RelativeTime):
        moment = _moment(value, now)
        if isinstance(actual, date):
            return compare(dates.as_datetime(actual), moment)
        if _is_number(actual):  # a POSIX timestamp
            return compare(actual, moment.timestamp())
    elif _is_number(value):
        if _is_number(actual):
            return compare(actual, value)
    elif isinstance(actual, str | enum.Enum) and not _is_number(actual):
        return compare(_text(actual), value)
    raise _Incomparable(
        f"'{op}' needs two numbers, two dates or two texts, but the job has "
        f"{_describe(actual)} and the query has {_describe(value)}"
    )


def _moment(value: datetime | RelativeTime, now: datetime) -> datetime:
    return dates.resolve(value, now) if isinstance(value, RelativeTime) else value


def _text(value: object) -> str:
    """The text an attribute is compared as when it is not compared as a number or date."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"  # as a user types it, not Python's "True"
    if isinstance(value, enum.Enum):
        return value.value if isinstance(value.value, str) else str(value)
    if isinstance(value, int | float):  # bool was handled above
        return format_number(value)
    if isinstance(value, date):
        moment = dates.as_datetime(value)
        try:
            return format_scalar(moment, "=")
        except OverflowError:  # within minutes of year 1 or 9999: no UTC form exists
            return moment.isoformat()
    return str(value)


def _describe(value: object) -> str:
    if isinstance(value, RelativeTime):
        return f"a date ({dates.format_relative(value)})"
    if isinstance(value, date):
        return f"a date ({_text(value)})"
    if isinstance(value, bool):
        return f"a boolean ({_text(value)})"
    if _is_number(value):
        return f"a number ({_text(value)})"
    if isinstance(value, str):
        return f"text ({value!r})"
    return f"a {type(value).__name__} ({_text(value)!r})"
