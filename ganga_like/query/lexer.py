"""Splitting query text into tokens, and deciding which literal a bare word stands for.

The lexer is lazy: the parser pulls one token at a time, so the first error reported is
always the leftmost one, even when the text further on is broken too.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from ganga_like.query import dates
from ganga_like.query.query_errors import QuerySyntaxError

__all__ = [
    "BARE_PUNCTUATION",
    "OPERATOR_CHARS",
    "Token",
    "TokenKind",
    "WordKind",
    "classify_word",
    "is_bare_char",
    "tokenize",
]

BARE_PUNCTUATION = frozenset("_-./*?[]:+")
OPERATOR_CHARS = frozenset("=<>!~")

ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_LIST = ", ".join("\\" + ch for ch in ESCAPES)

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
# A decimal point with digits on both sides: "1." and ".5" stay text, and there is no
# exponent form, so job names such as "1e5" are not silently turned into numbers.
_FLOAT = re.compile(r"[+-]?[0-9]+\.[0-9]+", re.ASCII)


class TokenKind(enum.Enum):
    WORD = "word"  # a bare word: a path or an unquoted value
    STRING = "string"  # a quoted string
    OP = "operator"  # a run of operator characters, valid or not (the parser judges)
    SEMI = "';'"
    COMMA = "','"
    OTHER = "character"  # one character that starts no token
    END = "end of the query"


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str  # exactly as written
    value: str  # for STRING the content with escapes resolved, else the same as text
    position: int


def is_bare_char(ch: str) -> bool:
    return ch.isalnum() or ch in BARE_PUNCTUATION


def tokenize(text: str) -> Iterator[Token]:
    """Yield the tokens of ``text``, always ending with one END token."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch == ";":
            yield Token(TokenKind.SEMI, ch, ch, i)
            i += 1
        elif ch == ",":
            yield Token(TokenKind.COMMA, ch, ch, i)
            i += 1
        elif ch in "\"'":
            token = _read_string(text, i)
            yield token
            i += len(token.text)
        elif ch in OPERATOR_CHARS or is_bare_char(ch):
            # Maximal munch: "=>" becomes one (unknown) operator so the error can name it,
            # rather than "=" followed by a confusing complaint about ">".
            kind = TokenKind.OP if ch in OPERATOR_CHARS else TokenKind.WORD
            belongs = OPERATOR_CHARS.__contains__ if kind is TokenKind.OP else is_bare_char
            j = i + 1
            while j < n and belongs(text[j]):
                j += 1
            yield Token(kind, text[i:j], text[i:j], i)
            i = j
        else:
            yield Token(TokenKind.OTHER, ch, ch, i)
            i += 1
    yield Token(TokenKind.END, "", "", n)


def _read_string(text: str, start: int) -> Token:
    quote = text[start]
    parts: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return Token(TokenKind.STRING, text[start : i + 1], "".join(parts), start)
        if ch == "\\" and i + 1 < len(text):
            escaped = text[i + 1]
            if escaped not in ESCAPES:
                raise QuerySyntaxError(
                    f"unknown escape '\\{escaped}' in a quoted string; "
                    f"expected one of {_ESCAPE_LIST}",
                    text,
                    i,
                )
            parts.append(ESCAPES[escaped])
            i += 2
        elif ch == "\\":
            break  # a backslash as the last character escapes nothing: unterminated
        else:
            parts.append(ch)
            i += 1
    raise QuerySyntaxError(
        f"unterminated string: expected a closing {quote} for the quote opened here",
        text,
        start,
    )


WordKind = Literal["range", "int", "float", "relative", "datetime", "text"]


def classify_word(word: str) -> WordKind:
    """Which literal a bare value word is meant to be; the parser then checks it.

    This is the single rule deciding when a bare word is text, shared by the parser and by
    the canonical printer (which must quote any text that would read back as something
    else). A word containing '..' is always a range: quote it to mean text.
    """
    if ".." in word:
        return "range"
    if _INT.fullmatch(word):
        return "int"
    if _FLOAT.fullmatch(word):
        return "float"
    if word == "now" or dates.looks_like_relative(word):
        return "relative"
    if dates.looks_like_datetime(word):
        return "datetime"
    return "text"
