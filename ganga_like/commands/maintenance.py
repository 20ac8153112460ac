"""`ganga monitor start|stop|status` and `ganga repository check|recover`."""

from __future__ import annotations

import argparse
from typing import Any

from ganga_like.commands.context import ERROR, OK, configured_settings

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
        choices=("check", "recover", "reset"),
        help="check: read every record and report damage; recover: "
        "rebuild a damaged file from what is intact (a dated backup "
        "is kept); reset: move aside the workspaces of jobs the "
        "repository lost, so it can be used again",
    )
    return run_repository


def run_repository(args: argparse.Namespace) -> int:
    from ganga_like.runtime import repository_check

    gangadir = configured_settings().gangadir
    if args.action == "recover":
        print(repository_check.recover_repository(gangadir))
        return OK
    if args.action == "reset":
        from ganga_like.repository.checks.reset import reset_orphans

        print(reset_orphans(gangadir))
        return OK
    report = repository_check.full_check(gangadir)
    for line in report.lines():
        print(line)
    print(report.summary())
    return OK if report.sound else ERROR
