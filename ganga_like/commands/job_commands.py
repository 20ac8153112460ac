"""Subcommands that act on jobs: kill, resubmit, remove, freeze, unfreeze.

They act on exactly the jobs named: bare ids (``ganga kill 3 4.1``) or the jobs a query
selects (``ganga kill 'status=running'``). A query that selects every job in the
repository needs ``--all`` on top of the confirmation (or ``--yes``), so that a query
that is broader than meant cannot empty the repository; ``--all`` alone names every job.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ganga_like.batch.quantities import parse_memory
from ganga_like.commands.context import (
    DECLINED,
    ERROR,
    NOTHING,
    OK,
    UsageError,
    error,
    monitoring_asked,
    session_for,
)
from ganga_like.commands.lookup import Selection, select
from ganga_like.errors import GangaError, JobError
from ganga_like.gpi import workflow
from ganga_like.model.job import Job
from ganga_like.runtime import failure_groups
from ganga_like.runtime.session import Session
from ganga_like.runtime.stats.compute import job_stats
from ganga_like.runtime.stats.data import FailureGroup
from ganga_like.runtime.submission import actions as job_actions
from ganga_like.runtime.submission import lifecycle

__all__ = [
    "first_ids",
    "freeze_parser",
    "kill_parser",
    "remove_parser",
    "resubmit_parser",
    "unfreeze_parser",
]

Action = Callable[[Session, Job], object]
# Run on each chosen job before the confirmation is asked: a GangaError ends the command
# with its one line and nothing done (what cannot be done is never asked about).
Check = Callable[[Session, Job], None]
SHOWN = 10  # ids listed in a confirmation or a refusal


def _parser(
    parser: argparse.ArgumentParser, verb: str, action: Action, check: Check | None = None
) -> Any:
    parser.add_argument(
        "jobs",
        nargs="*",
        metavar="ID|QUERY",
        help='job ids (3, 3.1, "1,4") or a query, e.g. "status=failed; name~scan*"',
    )
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument(
        "--all",
        action="store_true",
        help=f"{verb} every job; needed too when a query selects every job",
    )

    def run(args: argparse.Namespace) -> int:
        return _run(args, verb, action, check)

    return run


def kill_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument(
        "--dependents",
        choices=workflow.DEPENDENTS_CHOICES,
        help="what becomes of the jobs waiting for a killed job: skip them, or keep them "
        "waiting for its resubmission (needed when some wait)",
    )
    given: dict[str, str | None] = {}

    def kill(session: Session, job: Job) -> bool:
        how = "--dependents skip or --dependents keep"
        return workflow.kill(session, job, True, given.get("dependents"), how)

    run = _parser(parser, "kill", kill)

    def run_kill(args: argparse.Namespace) -> int:
        given["dependents"] = args.dependents
        return int(run(args))

    return run_kill


def resubmit_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument(
        "--group",
        type=int,
        metavar="N",
        help="only the subjobs of failure group N (as `ganga stats ID` numbers them), with "
        "twice the memory after out_of_memory, twice the walltime after timeout",
    )
    parser.add_argument(
        "--memory", type=_memory, help="with --group: the memory to ask for, e.g. 4G"
    )
    parser.add_argument("--walltime", help="with --group: the walltime to ask for, e.g. 2:00:00")
    given: dict[str, Any] = {}

    groups: dict[str, FailureGroup] = {}

    def sizes() -> dict[str, Any]:
        return {k: given.get(k) for k in ("memory", "walltime")}

    def check_group(session: Session, job: Job) -> None:
        if given.get("group") is not None:
            where = f"job {job.fqid}: resubmit()"
            failures = job_stats([job], job.fqid).failures
            group = failure_groups.group_of(failures, given["group"], where)
            more = sizes()
            failure_groups.planned_resubmission(
                session, group, more["memory"], more["walltime"], job
            )
            groups[job.fqid] = group

    def resubmit(session: Session, job: Job) -> bool:
        group = given.get("group")
        if group is None:
            return job_actions.resubmit(session, job, keep_going=True)
        chosen = groups.get(job.fqid, group)
        return failure_groups.resubmit_job_group(session, job, chosen, None, sizes())

    run = _parser(parser, "resubmit", resubmit, check_group)

    def run_resubmit(args: argparse.Namespace) -> int:
        if args.group is None and (args.memory is not None or args.walltime is not None):
            raise UsageError("--memory and --walltime go with --group N (a failure group)")
        given.update(group=args.group, memory=args.memory, walltime=args.walltime)
        return int(run(args))

    return run_resubmit


def _memory(text: str) -> str:
    """``--memory``: a size as the backends take it (4G), refused as bad usage otherwise."""
    try:
        parse_memory(text)
    except ValueError as bad:
        raise argparse.ArgumentTypeError(str(bad)) from None
    return text


def remove_parser(parser: argparse.ArgumentParser) -> Any:
    return _parser(parser, "remove", _remove)


def _remove(session: Session, job: Job) -> bool:
    if job.master is not None:
        raise JobError(
            f"subjob {job.fqid} cannot be removed on its own (nothing removed); "
            f"remove its master with: ganga remove {job.master.id}"
        )
    return job_actions.remove(session, job)


def freeze_parser(parser: argparse.ArgumentParser) -> Any:
    return _parser(parser, "freeze", lifecycle.freeze)


def unfreeze_parser(parser: argparse.ArgumentParser) -> Any:
    return _parser(parser, "unfreeze", lifecycle.unfreeze)


def first_ids(found: list[Job]) -> str:
    shown = ", ".join(j.fqid for j in found[:SHOWN])
    return shown + (f", ... ({len(found) - SHOWN} more)" if len(found) > SHOWN else "")


def _chosen(session: Session, args: argparse.Namespace, verb: str) -> Selection | int:
    """The jobs to act on, or the exit status when there are none to act on."""
    if not args.jobs:
        if not args.all:
            raise UsageError(
                f"name the jobs to {verb}: ids (3 4.1), a query "
                "('status=failed'), or --all for every job"
            )
        registry = session.registry()
        every: list[Job] = list(registry.jobs.values())
        if not every:
            error("there are no jobs")
            return NOTHING
        return Selection("--all", every, by_id=False)
    chosen = select(session, args.jobs)
    if chosen.missing:
        error(f"no job {', '.join(chosen.missing)}; nothing done")
        return NOTHING
    if not chosen.jobs:
        error(f"no job matches {chosen.text!r}")
        return NOTHING
    total = len(session.registry().jobs)
    if not chosen.by_id and len(chosen.jobs) == total and not args.all:
        raise UsageError(
            f"{chosen.text!r} selects every job in the repository ({total}: "
            f"{first_ids(chosen.jobs)}); add --all to {verb} them all"
        )
    return chosen


def _run(args: argparse.Namespace, verb: str, action: Action, check: Check | None) -> int:
    with session_for(write=True, refresh=True) as session:
        chosen = _chosen(session, args, verb)
        if isinstance(chosen, int):
            return chosen
        found = chosen.jobs
        refused = _refused(session, found, check)
        if refused is not None:
            error(refused)
            return ERROR
        if not args.yes and not _confirm(
            f"{verb} {len(found)} job(s) ({first_ids(found)})? [y/N] "
        ):
            error("nothing done")
            return DECLINED
        failures = 0
        for job in found:
            try:
                done = action(session, job)
            except GangaError as exc:
                failures += 1
                error(_about(job.fqid, str(exc)))
                continue
            if done is False:  # refused without a reason of its own: never counted as done
                failures += 1
                error(f"job {job.fqid}: nothing done")
        print(f"{verb}: {len(found) - failures} of {len(found)} job(s) done")
        if monitoring_asked():
            session.monitor.run_once()
        return ERROR if failures else OK


def _refused(session: Session, found: list[Job], check: Check | None) -> str | None:
    """The line refusing the whole command when ``check`` refuses one of ``found``."""
    if check is None:
        return None
    for job in found:
        try:
            check(session, job)
        except GangaError as exc:
            return f"{_about(job.fqid, str(exc))}; nothing done"
    return None


def _about(fqid: str, message: str) -> str:
    """``message`` naming the job once: the job actions' own errors already start with
    "job 3 ..." (or "subjob 3.1 ..."), others (a backend's) get the prefix."""
    if message.startswith((f"job {fqid} ", f"job {fqid}:", f"subjob {fqid} ", f"subjob {fqid}:")):
        return message
    return f"job {fqid}: {message}"


def _confirm(prompt: str) -> bool:
    try:
        # Asked inside the try: a Ctrl-C as soon as the question shows, before the read
        # has begun, declines it too.
        print(prompt, end="", flush=True)
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        answer = ""  # Ctrl-C at the question declines it
    if not answer:
        print()
    return answer.strip().lower() in ("y", "yes")
