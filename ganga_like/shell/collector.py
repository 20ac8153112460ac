"""Python's cyclic garbage collector, paused while the ``ganga`` shell starts.

Starting the shell creates several hundred thousand objects (modules, classes, functions,
IPython's and prompt-toolkit's machinery, the repository's first records) and nearly all
of them live as long as the shell. The collector would go over them again and again
before the first prompt (a tenth of the start-up CPU, about 40 ms under load) and find
almost nothing to free. ``ganga`` pauses it once it knows it starts the shell and resumes
it when the first prompt is drawn, before a script runs, or when anything else ends the
start-up: the work it postpones is then done while the prompt waits.

Only a pause made here is resumed here: a shell or notebook that loads the extension,
or a user who turned the collector off, is left as it was.
"""

from __future__ import annotations

import gc
from typing import Any

__all__ = ["pause", "paused", "resume"]

_paused = False


def pause() -> None:
    """Stop automatic collection until :func:`resume` (nothing if it is off already)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume(*_: Any) -> None:
    """Undo :func:`pause` (idempotent; any arguments, to serve as a callback)."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()


def paused() -> bool:
    return _paused
