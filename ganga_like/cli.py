"""The ``ganga`` command: run a script with the GPI loaded, or start IPython with it.

    ganga                      interactive IPython with the GPI names
    ganga script.py [args...]  run the script (sys.argv set), exit with its status
    ganga -i script.py         run the script, then stay interactive
    ganga --version | --help
"""

from __future__ import annotations

import logging
import os
import runpy
import sys
import traceback
from typing import Any

import ganga_like
from ganga_like.errors import GangaError

__all__ = ["gpi_namespace", "main"]

USAGE = """usage: ganga [-i] [script.py [args ...]]
       ganga --version | --help

Runs script.py with the GPI names (Job, jobs, Executable, ArgSplitter, Local, ...) loaded,
sys.argv set to [script.py, args...], and exits with the script's status. Without a script,
starts an interactive IPython shell with the same names; -i runs the script first.

The repository is in $GANGA_DIR (default ~/gangadir).
"""


def gpi_namespace() -> dict[str, Any]:
    """The names a script or the shell starts with."""
    return {name: getattr(ganga_like, name) for name in ganga_like.__all__}


def _configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logger = logging.getLogger("ganga_like")
    if not logger.handlers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _run_script(path: str, args: list[str]) -> int:
    if not os.path.isfile(path):
        print(f"ganga: no such script: {path}", file=sys.stderr)
        return 2
    sys.argv = [path, *args]
    script_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, script_dir)
    try:
        runpy.run_path(path, init_globals=gpi_namespace(), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except GangaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _interactive(namespace: dict[str, Any]) -> int:
    from IPython import start_ipython

    start_ipython(argv=["--no-banner"], user_ns=namespace)  # type: ignore[no-untyped-call]
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["--version"], ["-V"]):
        print(f"ganga_like {ganga_like.__version__}")
        return 0
    if args[:1] in (["--help"], ["-h"]):
        print(USAGE, end="")
        return 0
    interactive = False
    if args[:1] == ["-i"]:
        interactive = True
        args = args[1:]
    if args and args[0].startswith("-"):
        print(f"ganga: unknown option {args[0]}\n{USAGE}", file=sys.stderr, end="")
        return 2
    _configure_logging()
    status = 0
    if args:
        status = _run_script(args[0], args[1:])
        if not interactive:
            return _finish(status)
    namespace = gpi_namespace()
    if interactive and args:
        namespace.update({k: v for k, v in sys.modules["__main__"].__dict__.items()
                          if not k.startswith("__")})
    return _finish(_interactive(namespace) or status)


def _finish(status: int) -> int:
    from ganga_like.runtime.session import close_session

    try:
        close_session()
    except GangaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
