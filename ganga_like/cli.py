"""The ``ganga`` command's entry point; the command itself is
:class:`ganga_like.shell.app.GangaApp`.

    ganga                      interactive shell with the GPI names
    ganga script.py [args...]  run the script (sys.argv set), exit with its status
    ganga -i script.py         run the script, then stay interactive
    ganga --version | --help | --help-all | --generate-config
"""

from __future__ import annotations

import sys

from ganga_like.shell.app import USAGE
from ganga_like.shell.app import main as shell_main
from ganga_like.shell.script import gpi_namespace

__all__ = ["USAGE", "gpi_namespace", "main"]


def main(argv: list[str] | None = None) -> int:
    """Subcommands (`ganga jobs`, `ganga kill ...`) run without the shell; anything else
    is the shell application."""
    args = list(sys.argv[1:] if argv is None else argv)
    from ganga_like.commands import dispatch

    code = dispatch(args)
    if code is not None:
        return code
    return shell_main(args)


if __name__ == "__main__":
    sys.exit(main())
