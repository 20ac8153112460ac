"""Attributes of batch backends that every batch system validates the same way, each
checked on assignment: a string that becomes one line of a batch script, an option of
the submit command, a memory size."""

from __future__ import annotations

from typing import Any

import traitlets

from .quantities import MAX_MEMORY, ResourceError, parse_memory

__all__ = ["Memory", "SingleLine", "SubmitOption", "array_throttle", "setup_lines"]


class SingleLine(traitlets.Unicode):  # type: ignore[type-arg]
    """A string that stays on one line (it becomes one line of the batch script)."""

    info_text = "a single-line string"

    def validate(self, obj: Any, value: Any) -> str:
        result: str = super().validate(obj, value)
        if any(ch in result for ch in "\n\r\0"):
            self.error(obj, value)
        return result


class SubmitOption(SingleLine):
    """One more option of the submit command, as a directive line of the script: it
    starts with '-' (the submit command refuses any other directive)."""

    def __init__(self, example: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.info_text = f"a single-line option starting with '-', such as {example!r}"

    def validate(self, obj: Any, value: Any) -> str:
        result = super().validate(obj, value)
        if not result.startswith("-"):
            self.error(obj, value)
        return result


def setup_lines() -> traitlets.List[str]:
    """The ``setup`` attribute: shell lines the batch script runs before the program."""
    return traitlets.List(
        SingleLine(), help="Shell lines run before the program, e.g. ['module load gcc']."
    )


def array_throttle(option: str) -> traitlets.Int[int | None, int | None]:
    """The ``array_throttle`` attribute: at most this many elements of an array run at
    once (the scheduler's ``option``)."""
    return traitlets.Int(
        None,
        allow_none=True,
        min=1,
        help=f"At most this many subjobs of an array run at once ({option}); None: no limit.",
    )


class Memory(traitlets.TraitType[Any, Any]):
    """A memory size: bytes (int) or a string such as ``"2G"``; stored as bytes."""

    info_text = "bytes or a size such as '2G' or '500M' (binary units; at most 1P)"
    allow_none = True
    default_value = None

    def validate(self, obj: Any, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, int | str) and not isinstance(value, bool):
            try:
                size = parse_memory(value)
            except (ResourceError, OverflowError):
                self.error(obj, value)
            if not 0 < size <= MAX_MEMORY:
                self.error(obj, value)
            return size
        self.error(obj, value)
