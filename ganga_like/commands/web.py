"""``ganga web``: the jobs, their stats and subjob grids in a browser (ganga_like.web).

Never started by anything else: a user runs it, and it serves until Ctrl-C. Needs the
``web`` extra; without it, one line says how to install it.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from ganga_like.commands.context import ERROR, OK, configured_settings, error

__all__ = ["INSTALL_HINT", "web_parser"]

INSTALL_HINT = (
    "ganga web needs Starlette and uvicorn, which are not installed: pip install 'ganga_like[web]'"
)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, not {port}")
    return port


def web_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument(
        "--port",
        type=_port,
        default=0,
        help="the port on 127.0.0.1 to listen on (default: a free one)",
    )
    return run_web


def run_web(args: argparse.Namespace) -> int:
    if any(importlib.util.find_spec(name) is None for name in ("starlette", "uvicorn")):
        error(INSTALL_HINT)
        return ERROR
    from ganga_like.web.serve import serve

    serve(configured_settings(), args.port)
    return OK
