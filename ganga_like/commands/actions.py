"""Subcommands that act on the jobs a query selects: kill, resubmit, remove."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ganga_like.commands.context import DECLINED, ERROR, NOTHING, OK, error, session_for
from ganga_like.commands.lookup import matching_jobs
from ganga_like.errors import GangaError
from ganga_like.model.job import Job
from ganga_like.runtime import actions as job_actions
from ganga_like.runtime.session import Session

__all__ = ["kill_parser", "remove_parser", "resubmit_parser"]

Action = Callable[[Session, Job], object]


def _parser(parser: argparse.ArgumentParser, verb: str, action: Action) -> Any:
    parser.add_argument("query", nargs="+", help='a query, e.g. "status=failed; name~scan*"')
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    def run(args: argparse.Namespace) -> int:
        return _run(args, verb, action)

    return run


def kill_parser(parser: argparse.ArgumentParser) -> Any:
    return _parser(parser, "kill", lambda s, j: job_actions.kill(s, j, keep_going=True))


def resubmit_parser(parser: argparse.ArgumentParser) -> Any:
    return _parser(parser, "resubmit",
                   lambda s, j: job_actions.resubmit(s, j, keep_going=True))


def remove_parser(parser: argparse.ArgumentParser) -> Any:
    return _parser(parser, "remove", job_actions.remove)


def _run(args: argparse.Namespace, verb: str, action: Action) -> int:
    with session_for(write=True) as session:
        found = matching_jobs(session, " ".join(args.query))
        if not found:
            error(f"no job matches {' '.join(args.query)!r}")
            return NOTHING
        ids = ", ".join(j.fqid for j in found[:10]) + (" ..." if len(found) > 10 else "")
        if not args.yes and not _confirm(f"{verb} {len(found)} job(s) ({ids})? [y/N] "):
            error("nothing done")
            return DECLINED
        failures = 0
        for job in found:
            try:
                action(session, job)
            except GangaError as exc:
                failures += 1
                error(f"job {job.fqid}: {exc}")
        print(f"{verb}: {len(found) - failures} of {len(found)} job(s) done")
        session.monitor.run_once()
        return ERROR if failures else OK


def _confirm(prompt: str) -> bool:
    print(prompt, end="", flush=True)
    answer = sys.stdin.readline()
    if not answer:
        print()
    return answer.strip().lower() in ("y", "yes")
