"""How ``jobs``, ``templates`` and ``j.subjobs`` take what they look up, and ``wait()`` and
``peek()`` their numbers: a value of another type is one line naming what was expected and
what was given, before anything is read or changed (Python's own TypeError would end a
script with a traceback, and a value whose repr() raises would raise again in the message).
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping

from ganga_like.errors import JobError, SchemaError
from ganga_like.gpi.arguments import given

__all__ = [
    "check_index",
    "check_lines",
    "check_select",
    "check_timeout",
    "id_number",
    "refuse_pickling",
    "select_ids",
]


def is_whole(value: object) -> bool:
    """An int that is not True or False (which are ints to Python, never ids to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


def id_number(
    where: str, value: object, what: str, usage: str, error: type[JobError] = JobError
) -> int:
    """``value`` as an id (a whole number), else one line: ``where: expected a <what> id
    (<usage>), not <value>``."""
    if not is_whole(value):
        raise error(f"{where}: expected a {what} id ({usage}), not {given(value)}")
    number: int = value  # type: ignore[assignment]
    return number


def check_index(index: object, title: str, what: str = "job") -> None:
    """A position in a list is a whole number or a slice of whole numbers (a step other
    than 0)."""
    if isinstance(index, slice):
        parts = (index.start, index.stop, index.step)
        if all(p is None or is_whole(p) for p in parts) and index.step != 0:
            return
    elif is_whole(index):
        return
    raise JobError(
        f"{title}: a position is a whole number or a slice of them (e.g. [0], [-1], [2:5]), "
        f"not {given(index)}; ({what} id) looks a {what} up by its id"
    )


def check_timeout(where: str, timeout: object) -> float | None:
    """A timeout is None (no limit) or a number of seconds, 0 or more and finite."""
    if timeout is None:
        return None
    number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if number and math.isfinite(timeout) and timeout >= 0:  # type: ignore[arg-type,operator]
        return float(timeout)  # type: ignore[arg-type]
    raise SchemaError(
        f"{where}: timeout expected a number of seconds, 0 or more (or None: no limit), "
        f"not {given(timeout)}"
    )


def check_lines(where: str, filename: object, lines: object) -> None:
    """``peek``'s file is a name (a string without NUL); its line count None or 0 or more."""
    if not isinstance(filename, str) or "\0" in filename:
        raise SchemaError(
            f"{where}: filename expected a file name ('stdout', 'stderr', '' for the "
            f"directory), not {given(filename)}"
        )
    if lines is not None and not (is_whole(lines) and lines >= 0):  # type: ignore[operator]
        raise SchemaError(
            f"{where}: lines expected a number of last lines, 0 or more (or None: all), "
            f"not {given(lines)}"
        )


def check_select(where: str, status: object, name: object, **plugins: object) -> None:
    """``select``'s status and name are strings; its backend and application a plugin's
    name or class."""
    for option, value in (("status", status), ("name", name)):
        if value is not None and not isinstance(value, str):
            raise SchemaError(f"{where}: {option} expected a string, not {given(value)}")
    for option, value in plugins.items():
        if value is not None and not isinstance(value, str | type):
            raise SchemaError(
                f"{where}: {option} expected a plugin's name or class (e.g. 'Local' or "
                f"Local), not {given(value)}"
            )


def select_ids(where: str, ids: object, maxid: object) -> Container[int] | None:
    """Which ids ``select`` keeps, as something ``in`` answers at once: a list, tuple, set
    or range of ids, or Ganga's ``select(minid, maxid)`` (a first id, and a last id or
    none: from that id up); None keeps every id."""
    if is_whole(ids):
        first: int = ids  # type: ignore[assignment]
        if maxid is None:
            return _FromId(first)
        if is_whole(maxid):
            return range(first, maxid + 1)  # type: ignore[operator]
        raise SchemaError(f"{where}: expected a last id (a whole number), not {given(maxid)}")
    if maxid is not None:
        raise SchemaError(
            f"{where}: a last id needs a first id (a whole number), not {given(ids)}: "
            "select(10, 20)"
        )
    if ids is None or isinstance(ids, range):
        return ids
    if isinstance(ids, Iterable) and not isinstance(ids, str | bytes | Mapping):
        chosen = list(ids)  # once: a generator of ids is read here
        for item in chosen:
            if not is_whole(item):
                raise SchemaError(f"{where}: ids expected whole numbers, not {given(item)}")
        return set(chosen)
    raise SchemaError(
        f"{where}: ids expected a list or range of ids, or a first id, not {given(ids)}"
    )


class _FromId:
    """Ids from ``first`` up, as ``select(10)`` means."""

    def __init__(self, first: int) -> None:
        self.first = first

    def __contains__(self, item: object) -> bool:
        return is_whole(item) and item >= self.first  # type: ignore[operator]


def refuse_pickling(shown: str, item: str) -> JobError:
    """``pickle.dumps(jobs)``: jobs and templates live in the repository, not in a pickle.
    ``shown`` is how the user reached them (``jobs``, ``templates``, ``jobs(3).subjobs``,
    or a slice of them, which has no name)."""
    lookup = "jobs(3).subjobs(id)" if item == "subjob" else f"{item}s(id)"
    return JobError(
        f"{shown} cannot be pickled: {item}s live in the repository; pickle their ids "
        f"(.ids()) and look each up again ({lookup}), or write their descriptions with "
        f"export(..., 'file.txt') and load() them"
    )


def storable_id(value: int) -> bool:
    """Whether an id fits a repository key (a signed 64-bit int): any other is no job's."""
    return -(2**63) <= value < 2**63
