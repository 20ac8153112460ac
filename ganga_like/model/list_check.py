"""Checking a long list attribute in one pass.

traitlets checks a ``List`` element by element through ``TraitType._validate``, which for
each element also looks up cross-validation handlers and, for a list of lists, repeats that
per inner list: most of the time of loading an export or setting a splitter of many
thousand points. ``checked_list`` calls each element trait's own ``validate`` directly,
which is what that path amounts to for the schema twins this project validates with (they
declare no cross-validation). Only a value it fully accepts is answered here; anything it
cannot decide, or any element refused, goes the ordinary way, so every refusal keeps the
message it always had.
"""

from __future__ import annotations

from typing import Any

import traitlets

# "Not decided here": the caller checks the value the ordinary way.
UNDECIDED: Any = object()


def checked_list(
    trait: traitlets.TraitType[Any, Any], checker: Any, value: Any, inner_tuples: bool = False
) -> Any:
    """What ``trait._validate(checker, value)`` returns, for an exact ``traitlets.List``
    given a list or tuple whose every element its element trait accepts; else UNDECIDED.

    ``inner_tuples``: the lists inside the list come as tuples, the form they are stored
    in, so that storing them copies none (a splitter's million points made a million
    lists, then a million tuples from them, both held at once)."""
    if type(trait) is not traitlets.List or type(value) not in (list, tuple):
        return UNDECIDED
    if not trait._minlen <= len(value) <= trait._maxlen:
        return UNDECIDED
    element = trait._trait
    if element is None or isinstance(element, traitlets.Any):
        return UNDECIDED
    if type(element) is traitlets.List:
        inner = []
        for item in value:
            got = checked_list(element, checker, item)
            if got is UNDECIDED:
                return UNDECIDED
            inner.append(tuple(got) if inner_tuples else got)
        return inner
    check = getattr(element, "validate", None)
    if check is None:
        return UNDECIDED
    allow_none = element.allow_none
    out = []
    try:
        for item in value:
            out.append(item if item is None and allow_none else check(checker, item))
    except Exception:
        return UNDECIDED  # refused (or raised): the ordinary way says why, in its words
    return out
