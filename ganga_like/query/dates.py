"""Absolute and relative times as written in queries.

Every time in a query is UTC: a value without an offset is read as UTC, one with an
offset is converted, so that the canonical text of a query never needs an offset and
two users in different zones read the same query the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

__all__ = [
    "DATETIME_FORMS",
    "RELATIVE_FORMS",
    "RelativeTime",
    "as_datetime",
    "aware",
    "format_datetime",
    "format_relative",
    "looks_like_datetime",
    "looks_like_relative",
    "parse_datetime",
    "parse_relative",
    "resolve",
    "to_utc",
]

_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?(?:Z|[+-][0-9]{2}:[0-9]{2})?)?",
    re.ASCII,
)
# Anything that starts like a date is meant as one: reporting "2026-11-1" as a bad date
# is more useful than silently comparing it as text.
_DATETIME_START = re.compile(r"[0-9]{4}-[0-9]", re.ASCII)

_RELATIVE = re.compile(r"([0-9]+)([smhdw])-ago", re.ASCII)
_RELATIVE_ATTEMPT = re.compile(r"[0-9].*-ago", re.ASCII | re.DOTALL)

_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}

DATETIME_FORMS = "YYYY-MM-DD, YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS"
RELATIVE_FORMS = "a whole number, a unit (s, m, h, d or w) and '-ago', e.g. '2d-ago'"


@dataclass(frozen=True)
class RelativeTime:
    """A time relative to the moment of evaluation: ``ago`` before ``now``.

    Only the distance is stored, so ``7d-ago`` and ``1w-ago`` are equal values.
    """

    ago: timedelta

    def __post_init__(self) -> None:
        if self.ago < timedelta(0) or self.ago.microseconds:
            raise ValueError(f"a relative time is a whole number of seconds ago, not {self.ago}")

    def __str__(self) -> str:
        return format_relative(self)


def to_utc(value: datetime) -> datetime:
    """Aware UTC copy of ``value``; a naive datetime is taken to be UTC already."""
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def aware(value: datetime) -> datetime:
    """``value`` itself if it is aware, else the same wall time in UTC.

    Unlike to_utc this never converts, so it cannot overflow at the ends of the calendar;
    aware datetimes compare correctly whatever their zones.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    return value


def as_datetime(value: date) -> datetime:
    """An aware datetime for an attribute value; a plain ``date`` is its midnight, UTC."""
    if isinstance(value, datetime):
        return aware(value)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def looks_like_datetime(word: str) -> bool:
    return _DATETIME_START.match(word) is not None


def parse_datetime(word: str) -> datetime:
    """Parse an ISO date or datetime into an aware UTC datetime; ValueError if invalid."""
    if _DATETIME.fullmatch(word) is None:
        raise ValueError(f"bad date {word!r}: expected {DATETIME_FORMS}")
    try:
        return to_utc(datetime.fromisoformat(word))
    except (ValueError, OverflowError):
        # The shape was right, so a field is out of range (month 13, day 31 in November,
        # or an offset pushing the time past year 1 or 9999).
        raise ValueError(f"bad date {word!r}: no such date or time") from None


def format_datetime(value: datetime) -> str:
    """Canonical text: the shortest of the accepted forms that keeps every field."""
    value = to_utc(value)
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    if value.hour or value.minute or value.second or value.microsecond:
        text += f"T{value.hour:02d}:{value.minute:02d}"
        if value.second or value.microsecond:
            text += f":{value.second:02d}"
            if value.microsecond:
                text += f".{value.microsecond:06d}"
    return text


def looks_like_relative(word: str) -> bool:
    return _RELATIVE_ATTEMPT.fullmatch(word) is not None


def parse_relative(word: str) -> RelativeTime:
    """Parse ``now`` or ``<n><unit>-ago``; ValueError if invalid."""
    if word == "now":
        return RelativeTime(timedelta(0))
    match = _RELATIVE.fullmatch(word)
    if match is None:
        raise ValueError(f"bad relative time {word!r}: expected {RELATIVE_FORMS}")
    try:
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        return RelativeTime(timedelta(seconds=seconds))
    except (ValueError, OverflowError):
        # int() refuses thousands of digits; timedelta stops at a billion days.
        raise ValueError(f"bad relative time {word!r}: too far in the past") from None


def format_relative(value: RelativeTime) -> str:
    seconds = value.ago.days * 86400 + value.ago.seconds
    if seconds == 0:
        return "now"
    for unit, size in _UNIT_SECONDS.items():
        if seconds % size == 0:
            return f"{seconds // size}{unit}-ago"
    raise AssertionError("unreachable: every whole number of seconds divides by 1")


def resolve(value: RelativeTime, now: datetime) -> datetime:
    try:
        return aware(now) - value.ago
    except OverflowError:
        # Before year 1 nothing can have happened, so the earliest representable time
        # orders exactly the same way.
        return datetime.min.replace(tzinfo=UTC)
