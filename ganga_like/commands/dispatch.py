"""Parsing ``ganga SUBCOMMAND ...`` and running it."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ganga_like.commands.context import (
    ERROR,
    PIPE_CLOSED,
    USAGE,
    UsageError,
    error,
    from_configuration,
    using_settings,
)
from ganga_like.errors import ConfigError, GangaError

if TYPE_CHECKING:
    from ganga_like.runtime.settings import Settings

__all__ = ["EPILOG", "SUBCOMMANDS", "dispatch", "quiet_closed_pipe", "unknown_subcommand"]

Handler = Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], int]]


class _Parser(argparse.ArgumentParser):
    """A subcommand's parser whose usage errors are one line (argparse's own print the
    usage first); ``--help`` shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {message}; {self.prog} --help explains it\n")


def _builder(module: str, function: str) -> Handler:
    """The parser builder ``function`` of ``ganga_like.commands.<module>``, imported when
    called: a subcommand imports only its own module (``ganga jobs`` none of the actions')."""

    def build(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
        found: Handler = getattr(importlib.import_module(f"ganga_like.commands.{module}"), function)
        return found(parser)

    return build


SUBCOMMANDS: dict[str, tuple[str, Handler]] = {
    "jobs": (
        "the jobs table, optionally filtered by ids or a query",
        _builder("jobs", "jobs_parser"),
    ),
    "show": ("one job or subjob in full", _builder("listing", "show_parser")),
    "log": ("the event log of a job or subjob", _builder("listing", "log_parser")),
    "why": (
        "why a job was skipped (the chain to the root failure) or what it waits for",
        _builder("listing", "why_parser"),
    ),
    "status": (
        "counts by status per backend, run time and queue",
        _builder("listing", "status_parser"),
    ),
    "stats": (
        "a job's stats: counts, run times, time left, failures by cause, resources used",
        _builder("listing", "stats_parser"),
    ),
    "top": (
        "a live full-screen view of the active jobs (keys: open, output, kill, resubmit)",
        _builder("top", "top_parser"),
    ),
    "kill": ("kill the jobs named by ids or a query", _builder("job_commands", "kill_parser")),
    "resubmit": (
        "resubmit the jobs named by ids or a query",
        _builder("job_commands", "resubmit_parser"),
    ),
    "remove": (
        "remove the jobs named by ids or a query",
        _builder("job_commands", "remove_parser"),
    ),
    "freeze": (
        "freeze the finished jobs or subjobs named by ids or a query",
        _builder("job_commands", "freeze_parser"),
    ),
    "unfreeze": (
        "unfreeze the frozen jobs or subjobs named by ids or a query",
        _builder("job_commands", "unfreeze_parser"),
    ),
    "export": ("write a job's definition as JSON", _builder("transfer", "export_parser")),
    "import": ("create a new job from a JSON definition", _builder("transfer", "import_parser")),
    "monitor": (
        "the background monitor daemon: start, stop, status",
        _builder("maintenance", "monitor_parser"),
    ),
    "repository": (
        "check or recover the repository file",
        _builder("maintenance", "repository_parser"),
    ),
    "web": (
        "serve the jobs, their stats and subjob grids to a browser on this machine",
        _builder("web", "web_parser"),
    ),
}

EPILOG = (
    "exit codes: 0 success, 1 error, 2 bad usage, setting or query, 3 nothing "
    "matched, 4 confirmation declined, 141 output pipe closed early"
)


def _is_usage_error(exc: GangaError) -> bool:
    """Whether ``exc`` says the command line is wrong rather than that something failed.
    A bad setting (in the config file or the environment) is one too, as it is for the
    shell and scripts. (The query package is imported only here: ``ganga jobs`` answered
    from its cache parses no query.)"""
    from ganga_like.query.query_errors import QueryError, QuerySyntaxError

    return isinstance(exc, (UsageError, QuerySyntaxError, QueryError, ConfigError))


def dispatch(argv: list[str], settings: Callable[[], Settings] | None = None) -> int | None:
    """Run the subcommand named by ``argv[0]`` with the session settings ``settings()``
    gives (the caller's configuration; by default the process's, from the config file and
    the environment); None when it is not a subcommand."""
    if not argv:
        return None
    if argv[0] not in SUBCOMMANDS:
        return unknown_subcommand(argv[0])
    name = argv[0]
    summary, build = SUBCOMMANDS[name]
    parser = _Parser(prog=f"ganga {name}", description=summary, epilog=EPILOG)
    handler = build(parser)
    try:
        args = parser.parse_args(argv[1:])
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0) if exc.code in (0, None) else USAGE
    try:
        with using_settings(settings or from_configuration):
            return handler(args)
    except GangaError as exc:
        error(str(exc))
        return USAGE if _is_usage_error(exc) else ERROR
    except KeyboardInterrupt as exc:
        # One line, never silence: a submission stopped says what became of its job.
        error(f"stopped by Ctrl-C{': ' if str(exc) else ''}{exc}")
        return ERROR


def unknown_subcommand(word: str) -> int | None:
    """Status 2 with a hint for a word that is neither a subcommand nor a script; None
    (let the shell application run it) for options and anything that may be a script."""
    if word.startswith("-") or word.endswith(".py") or os.sep in word or Path(word).exists():
        return None
    close = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.6)
    if close:
        error(f"no subcommand {word!r}; did you mean `{close[0]}`? (ganga --help lists them)")
    else:
        error(
            f"{word!r} is neither a subcommand nor a script (subcommands: "
            f"{', '.join(SUBCOMMANDS)}; ganga --help explains them)"
        )
    return USAGE


def quiet_closed_pipe() -> int:
    """After a BrokenPipeError on stdout: point stdout at /dev/null so that Python's
    flush at exit does not complain, and give the status of a filter killed by SIGPIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return PIPE_CLOSED
