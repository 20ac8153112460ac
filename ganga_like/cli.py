"""The ``ganga`` command's entry point; the command itself is
:class:`ganga_like.shell.app.GangaApp`.

    ganga                      interactive shell with the GPI names
    ganga SUBCOMMAND [...]     jobs, show, log, status, kill, resubmit, remove, ... (docs/cli.md)
    ganga script.py [args...]  run the script (sys.argv set), exit with its status
    ganga -i script.py         run the script, then stay interactive
    ganga --version | --help | --help-all | --generate-config
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ganga_like.shell.app import USAGE as USAGE
    from ganga_like.shell.user_script import gpi_namespace as gpi_namespace

__all__ = ["USAGE", "gpi_namespace", "main"]

# A subcommand (``ganga jobs``) needs neither the shell application nor IPython's
# configuration: they are imported only when the command is not a plain subcommand.
_LAZY = {"USAGE": "ganga_like.shell.app", "gpi_namespace": "ganga_like.shell.user_script"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Subcommands (`ganga jobs`, `ganga kill ...`) run without the shell; anything else
    is the shell application."""
    args = list(sys.argv[1:] if argv is None else argv)
    _debug_dump_modules_at_exit()
    from ganga_like.commands.dispatch import dispatch, quiet_closed_pipe

    try:
        # A subcommand with options of ganga (``ganga --gangadir=X jobs``, ``ganga jobs
        # --readonly``) goes through the application, which reads them first.
        code = dispatch(args) if not _has_ganga_options(args) else None
        if code is None:
            from ganga_like.shell import collector

            collector.pause()  # until the first prompt, or whatever ends the start-up
            from ganga_like.shell.app import main as shell_main

            code = shell_main(args)
        sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        return quiet_closed_pipe()
    return code


def _has_ganga_options(args: list[str]) -> bool:
    # Told from the option names alone: building the shell application for this would
    # import traitlets' application machinery into every subcommand.
    from ganga_like.commands.cli_options import ganga_options_among
    from ganga_like.commands.dispatch import SUBCOMMANDS

    if not args or args[0] not in SUBCOMMANDS:
        return bool(args) and args[0].startswith("-")
    return bool(ganga_options_among(args[1:])[0])


# Set to a file name, the modules loaded when the command ends are written there, one a
# line: how the tests check that a subcommand imports neither IPython nor the shell.
MODULES_DUMP = "GANGA_DEBUG_MODULES_FILE"


def _debug_dump_modules_at_exit() -> None:
    import os

    path = os.environ.get(MODULES_DUMP)
    if path:
        import atexit

        def dump() -> None:
            with open(path, "w") as out:
                out.write("".join(f"{name}\n" for name in sorted(sys.modules)))

        atexit.register(dump)


if __name__ == "__main__":
    sys.exit(main())
