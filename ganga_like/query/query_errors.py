"""The two errors of the query language: one for bad text, one for bad comparisons."""

from __future__ import annotations

from ganga_like.errors import GangaError

__all__ = ["QueryError", "QuerySyntaxError"]


class QuerySyntaxError(GangaError):
    """The query text cannot be parsed.

    ``position`` is a 0-based offset into ``text``; it may equal ``len(text)`` when the
    query ended too early. ``str()`` is meant to be printed as is: the message, then the
    offending line of the query with a caret under the character at ``position``.
    """

    def __init__(self, message: str, text: str, position: int) -> None:
        # All three go to Exception.args so that the error survives pickling.
        super().__init__(message, text, position)
        self.message = message
        self.text = text
        self.position = max(0, min(position, len(text)))

    def __str__(self) -> str:
        start = self.text.rfind("\n", 0, self.position) + 1
        end = self.text.find("\n", self.position)
        if end < 0:
            end = len(self.text)
        # Tabs and control characters would push the caret out of line (or garble the
        # terminal), so each is shown as one space: one character, one column.
        line = "".join(ch if ch.isprintable() else " " for ch in self.text[start:end])
        column = self.position - start
        return f"{self.message}\n  {line}\n  {' ' * column}^"


class QueryError(GangaError):
    """A well-formed query cannot be evaluated, e.g. ``id < abc`` against a numeric id."""
