"""`ganga monitor start|stop|status` and `ganga repository check|recover`."""

from __future__ import annotations

import argparse
from typing import Any

from ganga_like.commands.context import ERROR, OK, UsageError, configured_settings

__all__ = ["monitor_parser", "repository_parser"]


def monitor_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument(
        "action",
        choices=("start", "stop", "status"),
        help="start the background monitor daemon, stop it, or show it",
    )
    return run_monitor


def run_monitor(args: argparse.Namespace) -> int:
    from ganga_like.runtime.monitoring import daemon

    settings = configured_settings()
    if args.action == "start":
        pid = daemon.start(settings)
        print(f"monitor daemon running, PID {pid}")
    elif args.action == "stop":
        stopped = daemon.stop(settings.gangadir)
        print("monitor daemon stopped" if stopped else "no monitor daemon was running")
    else:
        print(daemon.status(settings.gangadir, settings.repository_url))
    return OK


def repository_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument(
        "action",
        choices=("check", "recover", "reset", "migrate"),
        help="check: read every record and report damage; recover: "
        "rebuild a damaged file from what is intact (a dated backup "
        "is kept); reset: move aside the workspaces of jobs the "
        "repository lost, so it can be used again; migrate TO_URI: copy the "
        "repository into an empty PostgreSQL database or a new file, and check both",
    )
    parser.add_argument(
        "target",
        nargs="?",
        default="",
        help="migrate: where to copy to, postgresql://user@host:port/dbname or "
        "file:///path/Data.fs",
    )
    return run_repository


def run_repository(args: argparse.Namespace) -> int:
    from ganga_like.runtime import repository_check

    settings = configured_settings()
    gangadir = settings.gangadir
    if args.action == "migrate" or (args.action == "check" and settings.repository_url):
        return _run_on_location(args, settings)
    if args.target:
        raise UsageError(f"repository {args.action} takes no TO_URI (only migrate does)")
    if args.action == "recover":
        print(_recover(gangadir, settings.repository_url))
        return OK
    if args.action == "reset":
        from ganga_like.repository.checks import reset

        url = settings.repository_url
        print(
            reset.reset_orphans_in_database(gangadir, url) if url else reset.reset_orphans(gangadir)
        )
        return OK
    report = repository_check.full_check(gangadir)
    for line in report.lines():
        print(line)
    print(report.summary())
    return OK if report.sound else ERROR


def _recover(gangadir: Any, url: str) -> object:
    """Rebuild a damaged Data.fs; a database server keeps its own data whole."""
    if url:
        from ganga_like.repository.postgres import server_of

        return (
            f"nothing to recover: the repository is in PostgreSQL ({server_of(url)}), whose "
            "server recovers its own data after a crash; `recover` rebuilds a damaged Data.fs "
            "only, and `ganga repository check` reads every record of the database"
        )
    from ganga_like.runtime import repository_check

    return repository_check.recover_repository(gangadir)


def _run_on_location(args: argparse.Namespace, settings: Any) -> int:
    """``migrate TO_URI`` from the configured repository; ``check`` of one in PostgreSQL."""
    from ganga_like.repository import migrate
    from ganga_like.repository.storage import default_uri
    from ganga_like.runtime.repository_check import MODEL_JOBS

    source = settings.repository_url or default_uri(settings.gangadir.expanduser().resolve())
    if args.action == "check":
        report = migrate.check_location(source, MODEL_JOBS)
        for line in report.lines():
            print(line)
        print(report.summary())
        return OK if report.sound else ERROR
    if not args.target:
        raise UsageError("repository migrate needs TO_URI (postgresql://... or file:///...)")
    result = migrate.migrate(source, args.target, MODEL_JOBS)
    for line in result.lines():
        print(line)
    return OK if result.sound else ERROR
