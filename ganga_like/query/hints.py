"""What an index can answer: the status, name and id conditions of a query.

Every hint is a necessary condition: a job that matches the query satisfies all hints.
A caller may use them to narrow the candidates without loading jobs, then run
``matches`` on the candidates, which stays the authority (it re-checks the hinted
conditions too, which is cheap when the getter reads the same index).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ganga_like.query.ast import Query, Range, Value, format_scalar

__all__ = ["index_hints"]


def index_hints(query: Query) -> dict[str, object]:
    """Index hints for ``query``; keys appear only when some condition gives them.

    - ``"status"``: set of status names the job's status must be one of
      (from ``status=x`` and ``status=x,y``; several such conditions intersect, and
      ``status<>...`` conditions are subtracted from it).
    - ``"status_not"``: set of status names the job's status must not be, when the
      query only excludes statuses (``status<>x``, ``status<>x,y``).
    - ``"name"``: the exact name, from the first ``name=x`` with a single value.
    - ``"name_glob"``: an fnmatch pattern, from the first ``name~pattern``.
    - ``"id_range"``: ``(lo, hi)`` inclusive integer bounds on ``id``, either end None
      when unbounded, from ``id`` with =, <, <=, >, >= and a number, a numeric range or
      (with =) a list of them (``id=1,5,10..20`` gives ``(1, 20)``); several conditions
      intersect, and ``lo > hi`` means no job can match. The bounds are only an
      envelope: ids inside them may still fail the condition.
    """
    hints: dict[str, object] = {}
    allowed: set[str] | None = None
    excluded: set[str] = set()
    lo: int | None = None
    hi: int | None = None
    has_id = False
    for condition in query.conditions:
        path, op, value = condition.path, condition.op, condition.value
        names = _texts(value)
        if path == ("status",) and op in ("=", "<>") and names is not None:
            if op == "=":
                allowed = names if allowed is None else allowed & names
            else:
                excluded |= names
        elif path == ("name",) and op == "=" and names is not None and len(names) == 1:
            hints.setdefault("name", next(iter(names)))
        elif path == ("name",) and op == "~" and isinstance(value, str):
            hints.setdefault("name_glob", value)
        elif path == ("id",):
            bounds = _id_bounds(op, value)
            if bounds is not None:
                has_id = True
                lo = _tighter(lo, bounds[0], max)
                hi = _tighter(hi, bounds[1], min)
    if allowed is not None:
        hints["status"] = allowed - excluded
    elif excluded:
        hints["status_not"] = excluded
    if has_id:
        hints["id_range"] = (lo, hi)
    return hints


def _texts(value: Value) -> set[str] | None:
    """The texts the evaluator compares a string attribute with; None if a range is in."""
    items = value if isinstance(value, tuple) else (value,)
    texts: set[str] = set()
    for item in items:
        if isinstance(item, Range):
            return None
        texts.add(item if isinstance(item, str) else format_scalar(item, "="))
    return texts


def _id_bounds(op: str, value: Value) -> tuple[int | None, int | None] | None:
    """Inclusive integer bounds implied by ``id op value``; None if it implies none."""
    # Ids are integers, so a float bound rounds inwards: id<2.5 is id<=2.
    if isinstance(value, tuple):
        # A list holds for any of its items: the envelope of their bounds, if all have one.
        if op != "=":
            return None
        parts = [_id_bounds(op, item) for item in value]
        los = [p[0] for p in parts if p is not None]
        his = [p[1] for p in parts if p is not None]
        if len(los) < len(parts) or None in los or None in his:
            return None
        return min(x for x in los if x is not None), max(x for x in his if x is not None)
    if isinstance(value, Range):
        lo, hi = value.lo, value.hi
        if op == "=" and isinstance(lo, int | float) and isinstance(hi, int | float):
            return math.ceil(lo), math.floor(hi)
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if op == "=":
        return math.ceil(value), math.floor(value)
    if op == "<":
        return None, math.ceil(value) - 1
    if op == "<=":
        return None, math.floor(value)
    if op == ">":
        return math.floor(value) + 1, None
    if op == ">=":
        return math.ceil(value), None
    return None


def _tighter(current: int | None, new: int | None, pick: Callable[[int, int], int]) -> int | None:
    if new is None:
        return current
    return new if current is None else pick(current, new)
