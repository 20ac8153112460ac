"""String attributes that end up in a command line, an environment or a path.

The operating system cannot pass a NUL byte in a program's arguments, its environment or a
file name: a value holding one is accepted by a plain string trait and fails only when the
job runs. These traits refuse it when it is set, in one line.
"""

from __future__ import annotations

from typing import Any

import traitlets

__all__ = ["EnvName", "Text", "forbidden_in"]

_NAMES = {"\0": "a NUL byte", "\n": "a newline", "\r": "a carriage return"}


def forbidden_in(text: str, forbidden: str) -> str | None:
    """What ``text`` holds of the characters ``forbidden`` ("a NUL byte"), or None."""
    for char in forbidden:
        if char in text:
            return _NAMES.get(char, repr(char))
    return None


class Text(traitlets.Unicode):  # type: ignore[type-arg]
    """A string that may not hold the characters of ``forbidden`` (by default a NUL byte,
    which no argument, environment value or path can hold) and, unless ``empty`` is True,
    may not be empty (a program's name)."""

    def __init__(
        self,
        default_value: Any = "",
        *,
        forbidden: str = "\0",
        what: str = "",
        empty: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(default_value, **kwargs)
        self.forbidden = forbidden
        self.empty = empty
        if what:
            self.info_text = what

    def validate(self, obj: Any, value: Any) -> str:
        text: str = super().validate(obj, value)
        if not text and not self.empty:
            self.error(obj, value, info=f"{self.info_text}, not empty")
        # Checked inline, character by character: this runs for every argument of every
        # subjob, and a call per value would double its cost.
        for char in self.forbidden:
            if char in text:
                break
        else:
            return text
        held = forbidden_in(text, self.forbidden)
        if held is not None:
            # Through error(): in a list or dict, the container words the message.
            self.error(obj, value, info=f"{self.info_text}, without {held}")
        return text


class EnvName(Text):
    """The name of an environment variable: not empty, no ``=`` and no NUL byte."""

    info_text = "an environment variable name"

    def validate(self, obj: Any, value: Any) -> str:
        text = super().validate(obj, value)
        if not text or "=" in text:
            self.error(obj, value, info=f"{self.info_text} (not empty, without '=')")
        return text
