"""Whether two glob patterns (``*``, ``?``, ``[...]``, as ``fnmatch`` reads them) can match
one same name: what ``JobOutput(job, pattern)`` asks of the patterns of ``job``'s output
files before anything runs. Decided on the patterns alone, in time proportional to the
product of their lengths."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

__all__ = ["globs_overlap"]


@dataclass(frozen=True)
class _Chars:
    """One character position of a pattern: a literal, ``?`` (any), or a ``[...]`` set."""

    chars: frozenset[str] = frozenset()
    negated: bool = False
    anything: bool = False

    def meets(self, other: _Chars) -> bool:
        """Whether one character can be matched by both."""
        if self.anything or other.anything:
            return True
        if self.negated and other.negated:
            return True  # two exclusions leave all the other characters
        if self.negated:
            return bool(other.chars - self.chars)
        if other.negated:
            return bool(self.chars - other.chars)
        return bool(self.chars & other.chars)


_STAR = None  # a ``*``: any run of characters, the empty one too
_Token = _Chars | None


def _class_end(pattern: str, start: int) -> int:
    """The index of the ``]`` closing the set opened at ``start`` (as fnmatch finds it:
    a ``]`` right after ``[`` or ``[!`` is a member), or -1 when it is not closed."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "!":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    end = pattern.find("]", i)
    return end


def _set_members(body: str) -> frozenset[str]:
    members: set[str] = set()
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            members.update(chr(c) for c in range(ord(low), ord(high) + 1))
            i += 3
        else:
            members.add(body[i])
            i += 1
    return frozenset(members)


def _tokens(pattern: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
            i += 1
        elif char == "?":
            tokens.append(_Chars(anything=True))
            i += 1
        elif char == "[" and (end := _class_end(pattern, i)) != -1:
            body = pattern[i + 1 : end]
            negated = body.startswith("!")
            tokens.append(_Chars(_set_members(body[1:] if negated else body), negated))
            i = end + 1
        else:
            tokens.append(_Chars(frozenset(char)))
            i += 1
    return tuple(tokens)


def globs_overlap(first: str, second: str) -> bool:
    """Whether some name matches both glob patterns ``first`` and ``second``."""
    a, b = _tokens(first), _tokens(second)

    @cache
    def meet(i: int, j: int) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] is _STAR:
            # The star matches nothing more, or also the next character the other takes.
            return meet(i + 1, j) or (j < len(b) and meet(i, j + 1))
        if j < len(b) and b[j] is _STAR:
            return meet(i, j + 1) or (i < len(a) and meet(i + 1, j))
        if i == len(a) or j == len(b):
            return False
        left, right = a[i], b[j]
        assert left is not None and right is not None
        return left.meets(right) and meet(i + 1, j + 1)

    return meet(0, 0)
