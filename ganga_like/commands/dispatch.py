"""Parsing ``ganga SUBCOMMAND ...`` and running it."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ganga_like.commands import actions, listing, maintenance, transfer
from ganga_like.commands.context import ERROR, OK, USAGE, error
from ganga_like.errors import GangaError

__all__ = ["SUBCOMMANDS", "dispatch"]

Handler = Callable[[argparse.Namespace], int]

SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], Handler]]] = {
    "jobs": ("the jobs table, optionally filtered by a query", listing.jobs_parser),
    "show": ("one job or subjob in full", listing.show_parser),
    "log": ("the event log of a job or subjob", listing.log_parser),
    "status": ("counts by status per backend, run time and queue", listing.status_parser),
    "kill": ("kill the jobs matching a query", actions.kill_parser),
    "resubmit": ("resubmit the jobs matching a query", actions.resubmit_parser),
    "remove": ("remove the jobs matching a query", actions.remove_parser),
    "export": ("write a job's definition as JSON", transfer.export_parser),
    "import": ("create a new job from a JSON definition", transfer.import_parser),
    "monitor": ("the background monitor daemon: start, stop, status",
                maintenance.monitor_parser),
    "repository": ("check or recover the repository file", maintenance.repository_parser),
}

EPILOG = ("exit codes: 0 success, 1 error, 2 bad usage or malformed query, 3 nothing "
          "matched, 4 confirmation declined")


def dispatch(argv: list[str]) -> int | None:
    """Run the subcommand named by ``argv[0]``; None when it is not a subcommand."""
    if not argv or argv[0] not in SUBCOMMANDS:
        return None
    name = argv[0]
    summary, build = SUBCOMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"ganga {name}", description=summary, epilog=EPILOG)
    handler = build(parser)
    try:
        args = parser.parse_args(argv[1:])
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0) if exc.code in (0, None) else USAGE
    try:
        return handler(args)
    except GangaError as exc:
        error(str(exc).splitlines()[0] if "\n" not in str(exc) else str(exc))
        return USAGE if type(exc).__name__ == "QuerySyntaxError" else ERROR
    except KeyboardInterrupt:
        return ERROR
    return OK
