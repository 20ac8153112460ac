"""Recursive-descent parser: query text to :class:`Query`, or a QuerySyntaxError.

Grammar (whitespace is allowed between any two tokens)::

    query     := [condition] (';' [condition])*
    condition := PATH OP value (',' value)*
    value     := WORD | STRING

Empty conditions are skipped, so '', ';', 'a=1;' and 'a=1;;b=2' are all valid: a query
assembled by joining pieces with ';' never fails because a piece was empty.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Iterator, Mapping

from ganga_like.errors import safe_repr
from ganga_like.query import dates
from ganga_like.query.ast import (
    EQUALITY_OPERATORS,
    GLOB_OPERATORS,
    IDENTIFIER,
    OPERATORS,
    ORDER_OPERATORS,
    Condition,
    Item,
    Query,
    Range,
    Scalar,
    Value,
    range_is_empty,
)
from ganga_like.query.lexer import Token, TokenKind, classify_word, tokenize
from ganga_like.query.query_errors import QueryError, QuerySyntaxError

__all__ = ["parse"]

_OPERATOR_LIST = ", ".join(OPERATORS)
_ALIASES = {"!=": "<>"}
# Spellings from other languages, answered with the one this language uses.
_DID_YOU_MEAN = {
    "==": "'='",
    "=>": "'>='",
    "=<": "'<='",
    "=~": "'~'",
    "!": "'!=' or '!~'",
    "><": "'<>'",
}
_PATH_PREFIX = re.compile(IDENTIFIER.pattern + r"(?:\." + IDENTIFIER.pattern + r")*", re.ASCII)
_JOB_ID = re.compile(r"(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?$", re.ASCII)
# Python refuses to convert integers of more than 4300 digits; stop well before that.
_MAX_DIGITS = 1000


def parse(
    text: str,
    *,
    known_roots: Collection[str] | None = None,
    known_values: Mapping[str, Collection[str]] | None = None,
    id_paths: Collection[str] = (),
) -> Query:
    """Parse ``text``; raise QuerySyntaxError at the first problem.

    With ``known_roots``, the first name of every path must be one of them (so a typo
    like ``stauts=failed`` is an error instead of a query that silently matches nothing).
    With ``known_values``, a text compared with ``=`` or ``<>`` to a path it names (e.g.
    ``"status"``) must be one of that path's values, for the same reason; these values are
    words of any case (``status=Completed`` is ``status=completed``). The paths
    ``id_paths`` hold job ids as text (``after``: "12", "12.10"): a bare value compared to
    them with ``=`` or ``<>`` must be such an id and stays the text it was written as (a
    number would read ``12.10`` as ``12.1``).
    """
    if not isinstance(text, str):  # jobs.query(3): one line, not the lexer's TypeError
        raise QueryError(f"a query is text such as 'status=failed', not {safe_repr(text)}")
    return _Parser(text, known_roots, known_values, id_paths).parse_query()


class _Parser:
    def __init__(
        self,
        text: str,
        known_roots: Collection[str] | None,
        known_values: Mapping[str, Collection[str]] | None = None,
        id_paths: Collection[str] = (),
    ) -> None:
        self._text = text
        self._id_paths = id_paths
        self._known_roots = known_roots
        self._known_values = known_values or {}
        self._tokens: Iterator[Token] = tokenize(text)
        self._token = next(self._tokens)

    def _advance(self) -> Token:
        token = self._token
        if token.kind is not TokenKind.END:
            self._token = next(self._tokens)
        return token

    def _error(self, message: str, position: int) -> QuerySyntaxError:
        return QuerySyntaxError(message, self._text, position)

    def parse_query(self) -> Query:
        conditions: list[Condition] = []
        while True:
            if self._token.kind not in (TokenKind.SEMI, TokenKind.END):
                conditions.append(self._condition())
            if self._advance().kind is TokenKind.END:
                return Query(tuple(conditions))

    def _condition(self) -> Condition:
        start = self._token
        path = self._path()
        written = self._token.text  # "!=" stays "!=" in messages, though it means "<>"
        op = self._operator(path)
        values = [self._known(path, op, self._token.position, self._item(path, op, written))]
        while self._token.kind is TokenKind.COMMA:
            if op in ORDER_OPERATORS:
                raise self._error(
                    f"'{written}' takes a single value; a list of values needs =, <>, ~ or !~",
                    self._token.position,
                )
            self._advance()
            position = self._token.position
            values.append(self._known(path, op, position, self._item(path, op, ",")))
        if self._token.kind not in (TokenKind.SEMI, TokenKind.END):
            separators = "';'" if op in ORDER_OPERATORS else "',', ';'"
            raise self._error(
                f"expected {separators} or the end of the query after the value of "
                f"'{'.'.join(path)}', found {_describe(self._token)}",
                self._token.position,
            )
        value: Value = values[0] if len(values) == 1 else tuple(values)
        return Condition(path, op, value, start.position)

    def _path(self) -> tuple[str, ...]:
        token = self._token
        if token.kind is not TokenKind.WORD:
            raise self._error(
                "expected an attribute name such as 'status' or 'backend.id' to start a "
                f"condition, found {_describe(token)}",
                token.position,
            )
        match = _PATH_PREFIX.match(token.text)
        if match is None:
            raise self._error(
                "expected an attribute name such as 'status' or 'backend.id' to start a "
                f"condition, found '{token.text}'",
                token.position,
            )
        name = match.group()
        end = token.position + len(name)
        if match.end() < len(token.text):
            if token.text[match.end()] == ".":
                raise self._error(f"expected an attribute name after '{name}.'", end + 1)
            raise self._error(self._expected_operator(name), end)
        self._check_root(name.split(".")[0], token.position)
        self._advance()
        return tuple(name.split("."))

    def _check_root(self, root: str, position: int) -> None:
        if self._known_roots is None or root in self._known_roots:
            return
        message = f"unknown attribute '{root}'"
        close = difflib.get_close_matches(root, list(self._known_roots), n=1)
        if close:
            message += f"; did you mean '{close[0]}'?"
        else:
            message += f"; expected one of: {', '.join(sorted(self._known_roots))}"
        raise self._error(message, position)

    @staticmethod
    def _expected_operator(name: str) -> str:
        return f"expected an operator ({_OPERATOR_LIST}) after '{name}'"

    def _operator(self, path: tuple[str, ...]) -> str:
        token = self._token
        if token.kind is not TokenKind.OP:
            raise self._error(self._expected_operator(".".join(path)), token.position)
        op = _ALIASES.get(token.text, token.text)
        if op not in OPERATORS:
            hint = _DID_YOU_MEAN.get(token.text)
            message = f"unknown operator '{token.text}'"
            message += f" (did you mean {hint}?)" if hint else ""
            raise self._error(f"{message}; expected one of: {_OPERATOR_LIST}", token.position)
        self._advance()
        return op

    def _known(self, path: tuple[str, ...], op: str, position: int, value: Item) -> Item:
        """``value``, unless it is a text ``path`` never holds (``status=complete``)."""
        name = ".".join(path)
        allowed = self._known_values.get(name)
        if allowed is None or op not in ("=", "<>") or not isinstance(value, str):
            return value
        if value.lower() in allowed:
            return value.lower()
        close = difflib.get_close_matches(value.lower(), list(allowed), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"expected one of: {', '.join(allowed)}"
        raise self._error(f"unknown {name} '{value}'; {hint}", position)

    def _item(self, path: tuple[str, ...], op: str, after: str) -> Item:
        """The next value; a bare job id, as text, for a path of ``id_paths``."""
        token = self._token
        name = ".".join(path)
        if name not in self._id_paths or op not in EQUALITY_OPERATORS:
            return self._value(op, after)
        if token.kind is TokenKind.WORD and not _JOB_ID.match(token.text):
            raise self._error(
                f"{name} holds job ids such as 12 or 12.3, not '{token.text}'", token.position
            )
        if token.kind is TokenKind.WORD:
            self._advance()
            return token.text
        return self._value(op, after)

    def _value(self, op: str, after: str) -> Item:
        token = self._token
        if token.kind is TokenKind.STRING:
            self._advance()
            return token.value  # quoting always means text
        if token.kind is not TokenKind.WORD:
            raise self._error(
                f"expected a value after '{after}', found {_describe(token)}", token.position
            )
        self._advance()
        if op in GLOB_OPERATORS:
            return token.text  # a pattern: "10" or "a..b" are globs, not a number or range
        value = self._literal(token.text, token.position)
        if isinstance(value, Range) and op in ORDER_OPERATORS:
            raise self._error(
                f"a range such as {token.text} can only be used with = or <>, not '{after}'",
                token.position,
            )
        return value

    def _literal(self, word: str, position: int) -> Item:
        kind = classify_word(word)
        if kind == "range":
            return self._range(word, position)
        try:
            if kind in ("int", "float") and len(word) > _MAX_DIGITS:
                raise ValueError(f"number {word[:12]}... is too long")
            if kind == "int":
                return int(word)
            if kind == "float":
                number = float(word)
                if not math.isfinite(number):
                    raise ValueError(f"number {word[:12]}... is too large")
                return number
            if kind == "relative":
                return dates.parse_relative(word)
            if kind == "datetime":
                return dates.parse_datetime(word)
        except ValueError as error:
            raise self._error(f"{error}; quote the value if you meant text", position) from None
        return word

    def _range(self, word: str, position: int) -> Range:
        lo_text, hi_text = word.split("..", 1)
        hi_position = position + len(lo_text) + 2
        expected = "expected a number or a date"
        if not lo_text:
            raise self._error(f"bad range '{word}': {expected} before '..'", position)
        if not hi_text:
            raise self._error(f"bad range '{word}': {expected} after '..'", hi_position)
        lo = self._range_end(word, lo_text, position, "before")
        hi = self._range_end(word, hi_text, hi_position, "after")
        if _is_time(lo) != _is_time(hi):
            raise self._error(
                f"bad range '{word}': both ends must be numbers or both dates", hi_position
            )
        if range_is_empty(lo, hi):
            raise self._error(
                f"empty range '{word}': the first end must not be greater than the second",
                position,
            )
        return Range(lo, hi)

    def _range_end(self, word: str, end: str, position: int, side: str) -> Scalar:
        value = self._literal(end, position) if classify_word(end) != "range" else end
        if isinstance(value, str | Range):
            raise self._error(
                f"bad range '{word}': expected a number or a date {side} '..', found '{end}'",
                position,
            )
        return value


def _is_time(value: Scalar) -> bool:
    return not isinstance(value, int | float)


def _describe(token: Token) -> str:
    if token.kind is TokenKind.END:
        return "the end of the query"
    if token.kind is TokenKind.STRING:
        return "a quoted string"
    return f"'{token.text}'"
