"""Running a user's script with the GPI loaded (``ganga script.py``, ``%ganga``)."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from typing import Any

import ganga_like
from ganga_like.errors import GangaError

__all__ = ["core_namespace", "gpi_namespace", "plugin_namespace", "run_script"]


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
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    start = dict(gpi_namespace() if namespace is None else namespace)
    start.pop("__name__", None)
    try:
        names = runpy.run_path(path, init_globals=start, run_name="__main__")
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except GangaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        status = 130
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return status, names


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
