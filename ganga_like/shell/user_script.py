"""Running a user's script with the GPI loaded (``ganga script.py``, ``%ganga``, ``runfile``)."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from typing import Any

import ganga_like
from ganga_like.errors import GangaError, LoadError

__all__ = [
    "core_namespace",
    "execute_script",
    "gpi_namespace",
    "plugin_namespace",
    "run_script",
    "runfile",
]


def gpi_namespace() -> dict[str, Any]:
    """The names a script, the shell or a notebook starts with."""
    return {name: getattr(ganga_like, name) for name in ganga_like.__all__}


def core_namespace() -> dict[str, Any]:
    """The GPI names that need no plugin import (Job, jobs, config, the errors, ...)."""
    return {name: getattr(ganga_like, name) for name in ganga_like._CORE}


def plugin_namespace() -> dict[str, Any]:
    """The plugin classes (Executable, Local, ...): importing them is most of the cost."""
    return {
        name: getattr(ganga_like, name)
        for name in ganga_like.__all__
        if name not in ganga_like._CORE
    }


def run_script(
    path: str, args: list[str], namespace: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """Run ``path`` as ``__main__`` with ``sys.argv = [path, *args]``.

    Returns its exit status (0, its ``sys.exit`` code, 1 on an error, 2 when the file is
    missing, 130 on Ctrl-C) and its global names. A GPI error is one ``ERROR:`` line; any
    other error shows its traceback.
    """
    if not os.path.isfile(path):
        print(f"ganga: no such script: {path}", file=sys.stderr)
        return 2, {}
    names: dict[str, Any] = {}
    try:
        names = execute_script(path, args, gpi_namespace() if namespace is None else namespace)
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except GangaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt as exc:
        # One line, as in the shell: what was stopped, and what became of the jobs.
        print(f"KeyboardInterrupt{': ' if str(exc) else ''}{exc}", file=sys.stderr)
        status = 130
    except BaseException:
        traceback.print_exc()
        status = 1
    return status, names


def execute_script(path: str, args: list[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Run ``path`` as ``__main__``, starting with ``namespace``, ``sys.argv = [path, *args]``
    and the script's folder first on ``sys.path`` (both restored after); its global names.

    What the script raises is raised here, unchanged: ``run_script`` (``ganga script.py``,
    ``%ganga``) reports it, ``runfile`` lets its caller see it."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    start = dict(namespace)
    start.pop("__name__", None)
    try:
        return runpy.run_path(path, init_globals=start, run_name="__main__")
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def runfile(path: str | os.PathLike[str], *args: object) -> dict[str, Any]:
    """Run a script with the GPI names, as ``ganga script.py args ...`` does, from a script,
    the shell or a notebook: ``runfile("scan.py", 100)``.

    The script sees ``Job``, ``jobs``, ``templates``, the plugin classes ... without
    importing them, and ``sys.argv == ["scan.py", "100"]``. An error in it is raised here
    as it was raised there (a GPI error shows as one line, anything else with its
    traceback, wherever that is reported). Returns the names the script defined."""
    script = os.fspath(path)
    if not os.path.isfile(script):
        raise LoadError(f"runfile: no such script: {script}")
    start = gpi_namespace()
    names = execute_script(script, [str(a) for a in args], start)
    return {k: v for k, v in names.items() if not k.startswith("__") and k not in start}


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
