"""One line for a GPI error that a plain Python script (``python script.py``, ``python -c``)
does not catch, as ``ganga script.py`` and the shell print it.

Installed when ``ganga_like`` is imported, and only over Python's own hook: an application
(IPython, a debugger, a test runner) that installed its own keeps it. Any other exception
goes to the hook that was there. ``GANGA_TRACEBACK=1`` shows GPI errors in full too.
IPython and Jupyter never reach this hook: they report a cell's exception themselves (the
ganga shell and ``%load_ext ganga_like`` make that one line as well).
"""

from __future__ import annotations

import os
import sys
from types import TracebackType

from ganga_like.errors import GangaError

__all__ = ["TRACEBACK_ENV", "install"]

TRACEBACK_ENV = "GANGA_TRACEBACK"
HINT = f"(set {TRACEBACK_ENV}=1 to see the traceback)"


def install() -> None:
    """Put the hook in place, unless something other than Python's default is there."""
    previous = sys.excepthook
    if previous is not sys.__excepthook__:
        return

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, GangaError) and os.environ.get(TRACEBACK_ENV, "") in ("", "0"):
            print(f"ERROR: {_one_line(str(value))} {HINT}", file=sys.stderr)
            return
        previous(kind, value, tb)

    hook.ganga_like = True  # type: ignore[attr-defined]  # recognisable when inspected
    sys.excepthook = hook


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "(no message)"
