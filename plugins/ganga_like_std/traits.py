"""Trait types shared by the built-in plugins."""

from __future__ import annotations

from typing import Any

import traitlets

__all__ = ["Arg"]


class Arg(traitlets.Unicode):  # type: ignore[type-arg]
    """A command-line argument: a string; numbers are accepted and turned into strings."""

    info_text = "a string or a number"

    def validate(self, obj: Any, value: Any) -> str:
        if isinstance(value, bool):
            self.error(obj, value)
        if isinstance(value, int | float):
            return str(value)
        result: str = super().validate(obj, value)
        return result
