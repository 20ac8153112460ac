"""``Dask.address``: a scheduler's network address, checked when it is set.

A typo (a newline pasted with it, ``file:///...`` for a scheduler file, a missing port)
would otherwise be found only at submit, by ``distributed``, with its own traceback.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import traitlets

from ganga_like.model.text import Text, forbidden_in

__all__ = ["SCHEMES", "SchedulerAddress", "address_problem"]

# The network protocols ``distributed`` connects over (its "inproc" reaches only a
# cluster inside the same process, which a job outlives).
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")


def address_problem(text: str) -> str | None:
    """Why ``text`` is not a scheduler address (``tcp://host:8786``, or ``host:8786``),
    or None when it is one."""
    held = forbidden_in(text, "\0\n\r")
    if held is not None:
        return f"it holds {held}"
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        return "it holds a space or a control character"
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text  # distributed's default protocol
    if scheme.lower() not in SCHEMES:
        return f"{scheme}:// is not a protocol Dask connects over ({', '.join(SCHEMES)})"
    try:
        parts = urlsplit(f"{scheme}://{rest}")
        port = parts.port
    except ValueError as exc:
        return f"its port is not a number from 1 to 65535 ({exc})"
    if parts.path or parts.query or parts.fragment:
        return "a scheduler address is a host and a port, with no path after them"
    if not parts.hostname:
        return "it names no host"
    if port is None or not 0 < port < 65536:
        return "it names no port (e.g. tcp://host:8786)"
    return None


class SchedulerAddress(Text):
    """A Dask scheduler's address, or empty for the gangadir's own cluster."""

    info_text = (
        "a Dask scheduler address such as 'tcp://host:8786', or '' for the gangadir's own cluster"
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", forbidden="", **kwargs)

    def validate(self, obj: Any, value: Any) -> str:
        text = super().validate(obj, value)
        problem = address_problem(text) if text else None
        if problem is not None:
            raise traitlets.TraitError(f"expected {self.info_text}, got {text!r}: {problem}")
        return text
