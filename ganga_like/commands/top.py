"""``ganga top [ID]``: the live view of the repository's active jobs (needs Textual, the
``top`` extra). Checked before the screen is taken: the options, the job id, a terminal."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from ganga_like.commands.context import ERROR, NOTHING, OK, configured_settings, error, session_for

__all__ = ["INSTALL_HINT", "top_parser"]

INSTALL_HINT = "ganga top needs Textual: pip install 'ganga_like[top]'"
# How long the reading thread is given to close the session once the screen is gone.
CLOSE_WAIT = 5.0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number), not {text!r}") from None
    if not 0 < value < float("inf"):  # nan fails too
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds above 0, not {text!r}"
        )
    return value


def top_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("id", nargs="?", help="a job to open at once (its stats)")
    parser.add_argument(
        "--interval", type=_seconds, default=2.0, help="seconds between reads (default 2)"
    )
    parser.add_argument(
        "--recent",
        type=_seconds,
        default=600.0,
        help="jobs that ended this many seconds ago are still listed (default 600)",
    )
    return run_top


def run_top(args: argparse.Namespace) -> int:
    try:
        importlib.import_module("textual")
    except ImportError:
        error(INSTALL_HINT)
        return ERROR
    job_id = None
    if args.id is not None:
        job_id = _existing_job(args.id)
        if job_id is None:
            return NOTHING
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        error("ganga top needs a terminal (`ganga jobs` and `ganga stats ID` print the same)")
        return ERROR
    from ganga_like.commands.top_app import TopApp

    settings = configured_settings()
    settings.monitoring = False
    app = TopApp(settings, args.interval, args.recent, job_id)
    app.run()
    if not app.source.stop(CLOSE_WAIT):
        # A read still waits for a repository that went away: the screen is restored,
        # and nothing of ours is left to write.
        error(f"the repository did not answer within {CLOSE_WAIT:.0f} s; left without closing")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(OK)
    return OK


def _existing_job(text: str) -> int | None:
    """The id of the top-level job ``text`` names; None (said) when there is none."""
    from ganga_like.commands.context import UsageError
    from ganga_like.commands.lookup import find_job

    if not text.isdigit():
        raise UsageError(f"not a job id: {text!r}; use 12 (ganga top opens a job, not a subjob)")
    with session_for(write=False, refresh=False) as session:
        found = find_job(session, text)
    if found is None:
        error(f"no job {text}")
        return None
    return int(text)
