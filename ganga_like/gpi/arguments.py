"""How GPI actions take their arguments: what to act on by position, options by keyword.

A flag given by position is easy to mean as something else: ``jobs.remove(10)`` read as
``keep_going=10`` would remove every job. So every action's options are keyword-only, a
flag is True or False, and an argument that does not fit is one line naming the method,
what it takes and what was given, before anything is done.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ganga_like.errors import SchemaError
from ganga_like.model.values import safe_repr, shown_failed

__all__ = ["given", "keyword_options", "wanted_ids"]

Method = TypeVar("Method", bound=Callable[..., Any])

_BY_POSITION = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_SHOWN_CHARS = 60


def given(value: object) -> str:
    """``the int 10``: a value as an error message names it (short, even if repr fails)."""
    if shown_failed(value):
        return safe_repr(value)
    text = " ".join(repr(value).split())  # one line, whatever the repr (a table)
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 3] + "..."
    return f"the {type(value).__name__} {text}"


def shown_name(obj: object) -> str:
    """How a user reaches ``obj``'s methods: ``jobs``, ``templates`` or its class name."""
    return str(getattr(obj, "_shown_as", None) or type(obj).__name__)


def keyword_options(method: Method) -> Method:
    """Check a GPI action's arguments before it runs: no more positional arguments than it
    names, only the options it has (with a suggestion for a misspelt one), and every
    option annotated ``bool`` given True or False."""
    signature = inspect.signature(method)
    parameters = list(signature.parameters.values())[1:]  # self
    by_position = [p.name for p in parameters if p.kind in _BY_POSITION]
    required = [
        p.name
        for p in parameters
        if p.kind in _BY_POSITION and p.default is inspect.Parameter.empty
    ]
    takes_many = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    options = [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    flags = {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY and _is_bool(p)}
    keywords = set(options) | set(by_position)
    usage = f"{method.__name__}({', '.join(f'{o}=...' for o in options)})"

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = f"{shown_name(self)}.{method.__name__}()"
        if not takes_many and len(args) > len(by_position):
            extra = given(args[len(by_position)])
            if by_position:
                keywords_too = f" and its options as keywords, {usage}" if options else ""
                takes = f"takes {', '.join(by_position)} by position{keywords_too}; not also"
            elif options:
                takes = f"takes its options as keywords, {usage}; not by position"
            else:
                takes = "takes no argument, not"
            raise SchemaError(f"{where} {takes} {extra}")
        missing = [n for n in required[len(args) :] if n not in kwargs]
        if missing:
            raise SchemaError(f"{where} needs {', '.join(missing)}: {method.__name__}(...)")
        for name in kwargs:
            if name not in keywords:
                close = difflib.get_close_matches(name, sorted(keywords), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                known = f" (options: {', '.join(options)})" if options else ""
                raise SchemaError(f"{where} has no option {name!r}{hint}{known}")
        for name in flags & kwargs.keys():
            if not isinstance(kwargs[name], bool):
                raise SchemaError(
                    f"{where}: {name} expected True or False, not {given(kwargs[name])}"
                )
        return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]


def _is_bool(parameter: inspect.Parameter) -> bool:
    return parameter.annotation in (bool, "bool")


def wanted_ids(
    where: str,
    ids: tuple[Any, ...],
    what: str = "job",
    held: Callable[[Any], Any] | None = None,
) -> list[Any]:
    """What an action's positional arguments name, in order and once each: ids, and the
    objects ``held`` recognises (a GPI job given to a slice of jobs), each as ``held``
    returns it; each argument one of them or a list, tuple, range or slice of them.
    Anything else is one line."""
    chosen: list[Any] = []
    for item in ids:
        items: Iterable[Any] = (
            item if isinstance(item, list | tuple | range | set | frozenset) else [item]
        )
        for value in items:
            if isinstance(value, bool):
                raise SchemaError(
                    f"{where}: expected {what} ids or {what}s, not {given(value)}; options "
                    "are keywords, e.g. keep_going=True"
                )
            target = held(value) if held is not None else None
            if target is None and not isinstance(value, int):
                raise SchemaError(
                    f"{where}: expected {what} ids or {what}s (e.g. 3, or a list of them), "
                    f"not {given(value)}"
                )
            named = value if target is None else target
            if not any(named is c or (isinstance(named, int) and named == c) for c in chosen):
                chosen.append(named)
    return chosen


def refuse_positional(name: str, args: tuple[Any, ...]) -> None:
    """``Job(3)`` or ``Job("scan")``: the one positional argument a job or template takes
    is what to copy, so say that rather than counting arguments."""
    if args:
        shown = ", ".join(given(a) for a in args)
        raise SchemaError(
            f"{name}() takes a job or a JobTemplate to copy, not {shown}; give the rest as "
            f"keywords: {name}(name=..., application=..., backend=...)"
        )
