"""The job query language: ``jobs.query("status=failed; time.submitted>2d-ago")``.

``parse`` turns text into a :class:`Query`, ``matches`` evaluates it against one job
through a getter, and ``index_hints`` extracts what an index can answer up front.
See docs/query-language.md for the language itself.

The names are imported on first access: ``from ganga_like.query.query_errors import QueryError``
(what ``ganga``'s command line needs to tell a usage error) loads no parser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ganga_like.query.ast import Condition as Condition
    from ganga_like.query.ast import Query as Query
    from ganga_like.query.ast import Range as Range
    from ganga_like.query.ast import RelativeTime as RelativeTime
    from ganga_like.query.ast import Scalar as Scalar
    from ganga_like.query.ast import Value as Value
    from ganga_like.query.evaluate import Getter as Getter
    from ganga_like.query.evaluate import matches as matches
    from ganga_like.query.hints import index_hints as index_hints
    from ganga_like.query.parser import parse as parse
    from ganga_like.query.query_errors import QueryError as QueryError
    from ganga_like.query.query_errors import QuerySyntaxError as QuerySyntaxError

# name -> the submodule defining it
_LAZY = {
    "Condition": "ast",
    "Query": "ast",
    "Range": "ast",
    "RelativeTime": "ast",
    "Scalar": "ast",
    "Value": "ast",
    "QueryError": "query_errors",
    "QuerySyntaxError": "query_errors",
    "Getter": "evaluate",
    "matches": "evaluate",
    "index_hints": "hints",
    "parse": "parser",
}

__all__ = [
    "Condition",
    "Getter",
    "Query",
    "QueryError",
    "QuerySyntaxError",
    "Range",
    "RelativeTime",
    "Scalar",
    "Value",
    "index_hints",
    "matches",
    "parse",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
