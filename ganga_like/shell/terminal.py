"""Whether the shell's output may carry colours (ANSI escape codes).

The shell colours its output only for a person at a terminal: with input piped in
(``echo 'print(1)' | ganga``, ``ganga < cells.py``) or output piped out (``ganga > log``)
it is plain, as IPython's ``--colors=NoColor``, so a file or a program reading it gets no
escape codes. ``NO_COLOR`` set to anything but empty (https://no-color.org) makes it plain
everywhere. An explicit ``colors`` in the user's IPython configuration (or the ganga config
file's ``InteractiveShell`` section) still wins for IPython's own output, as the convention
asks of a user's configuration; ``Display.colours = False`` turns ganga's own colours off.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["NO_COLOR", "colours_on", "no_color", "shell_colours"]

NO_COLOR = "NO_COLOR"


def no_color() -> bool:
    """Whether ``NO_COLOR`` asks for no colours (set, and not empty)."""
    return os.environ.get(NO_COLOR, "") != ""


def colours_on(stream: Any) -> bool:
    """Whether text written to ``stream`` may be coloured: a terminal, and no NO_COLOR."""
    return _is_terminal(stream) and not no_color()


def shell_colours() -> bool:
    """Whether the interactive shell colours its output: a person types at a terminal and
    reads it (stdin and stdout are both terminals), and no NO_COLOR."""
    return _is_terminal(sys.stdin) and colours_on(sys.stdout)


def _is_terminal(stream: Any) -> bool:
    # A replaced stream may be None, lack isatty, or be closed (ValueError).
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        return False
