"""Sections of a config file that look like a mistyped ganga section.

A config file may hold sections that are not ganga's: the shell passes them on to IPython
(``c.TerminalInteractiveShell.confirm_exit = False``). So a section ganga does not know
cannot simply be refused; but ``c.Monitr.max_interval = 5`` must not be ignored in silence
either. A section that is not the name of a class ganga, IPython or traitlets configures,
and that is close to one of them, is taken for a typo.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterable

from traitlets.config import Configurable

__all__ = ["IPYTHON_SECTIONS", "closest_section", "configurable_names", "mistyped_sections"]

# IPython's sections users set most (a subset of what configurable_names() finds, which a
# test checks): a config file naming only these is known without importing IPython, which
# would double the start of a command such as ``ganga jobs``.
IPYTHON_SECTIONS = frozenset(
    {
        "Application",
        "BaseIPythonApplication",
        "Completer",
        "DisplayFormatter",
        "HistoryAccessor",
        "HistoryManager",
        "IPCompleter",
        "InteractiveShell",
        "InteractiveShellApp",
        "MagicsManager",
        "PlainTextFormatter",
        "ScriptMagics",
        "StoreMagics",
        "TerminalIPythonApp",
        "TerminalInteractiveShell",
    }
)


def configurable_names() -> set[str]:
    """The names of every configurable class the shell may pass settings on to: those of
    IPython's terminal application and of whatever else is loaded."""
    with contextlib.suppress(ImportError):
        import IPython.terminal.ipapp  # noqa: F401  (loads IPython's configurables)
    names: set[str] = set()
    stack: list[type] = [Configurable]
    while stack:
        cls = stack.pop()
        names.add(cls.__name__)
        stack.extend(cls.__subclasses__())
    return names


def closest_section(name: str, ours: Iterable[str]) -> str | None:
    """The section of ``ours`` that ``name`` most likely means, whatever its case
    (``local`` and ``LOCAL`` mean ``Local``), or None."""
    by_lower = {section.lower(): section for section in ours}
    match = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
    return by_lower[match[0]] if match else None


def mistyped_sections(given: Iterable[str], ours: list[str]) -> dict[str, str]:
    """The sections of ``given`` taken for typos, each with the section it is closest to:
    one of ``ours``, or one of the classes IPython configures (``InteractiveShel``)."""
    unknown = [name for name in given if name not in ours and name not in IPYTHON_SECTIONS]
    if not unknown:  # the usual case: only otherwise are IPython's classes loaded
        return {}
    others = configurable_names()
    known = [*sorted(others), *ours]  # ours last: one of ours wins a tie of case
    close = {}
    for name in unknown:
        if name in others:
            continue
        match = closest_section(name, known)
        if match:
            close[name] = match
    return close
