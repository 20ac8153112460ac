"""The job query language: ``jobs.query("status=failed; time.submitted>2d-ago")``.

``parse`` turns text into a :class:`Query`, ``matches`` evaluates it against one job
through a getter, and ``index_hints`` extracts what an index can answer up front.
See docs/query-language.md for the language itself.
"""

from ganga_like.query.ast import Condition, Query, Range, RelativeTime, Scalar, Value
from ganga_like.query.errors import QueryError, QuerySyntaxError
from ganga_like.query.evaluate import Getter, matches
from ganga_like.query.hints import index_hints
from ganga_like.query.parser import parse

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
