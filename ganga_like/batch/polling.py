"""One monitoring cycle of a batch backend: one queue query and at most one history
query for every active (sub)job, whatever their number; :mod:`.tracker` decides.

Only changes are reported: what was last reported is kept in the backend's poller
(:class:`BatchPoller`), staged until the monitor says the cycle's commit succeeded.

The scheduler is asked at most once per an adaptive gap (:func:`next_poll_gap`), as the
monitor adapts its own cycle: ``min_poll_interval`` after a poll that saw (sub)jobs change
state or finish, doubling after each poll that saw nothing new, up to the configured
``poll_interval``. A run of short subjobs is then followed closely and a queue of long ones
costs the controller one query per ``poll_interval``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from ganga_like.errors import BackendError
from ganga_like.model.interfaces import ActiveRef, PollContext, Poller, Staged, StatusReport
from ganga_like.model.status import Status

from .scheduler import BatchScheduler
from .scheduler_commands import CommandError
from .tracker import FINAL, Observation, Seen, Sighting, Tracker, TrackerSettings

__all__ = [
    "BatchPoller",
    "PollSettings",
    "Unaccounted",
    "next_poll_gap",
    "poll",
    "query_ids",
    "question_ids",
]

# Called for a failure with exit code 1, which may hide a reason the job left on disk.
FailureReader = Callable[[PollContext, ActiveRef, Observation], Observation]


class PollSettings(TrackerSettings, Protocol):
    @property
    def poll_interval(self) -> float: ...  # the scheduler is asked at most this often
    @property
    def min_poll_interval(self) -> float: ...  # ...and this often while jobs change
    @property
    def command_timeout(self) -> float: ...
    @property
    def usage_grace_seconds(self) -> float: ...  # an ended job's use is looked for so long


class Unaccounted(NamedTuple):
    """An ended (sub)job whose use the scheduler's history has not accounted yet."""

    fqid: str
    status: str  # the final status reported
    since: float  # monotonic: when its end was reported
    ended: float  # wall clock: when it ended


class BatchPoller(Poller):
    """What a batch backend keeps between monitor cycles, each kept once committed."""

    def __init__(self) -> None:
        # Scheduler id -> what was last reported about it (tracker).
        self.seen: Staged[dict[str, Seen]] = Staged({})
        # Why the scheduler's history cannot be asked (then exit codes are not known).
        self.history_off: Staged[str | None] = Staged(None)
        # When the scheduler was last asked (monotonic), and the gap before it is again.
        self.polled_at: Staged[float | None] = Staged(None)
        self.poll_gap: Staged[float | None] = Staged(None)
        # Scheduler id -> an ended (sub)job still looked for in the history until what it
        # used is accounted there (schedulers that account use: ``accounts_usage``).
        self.unaccounted: Staged[dict[str, Unaccounted]] = Staged({})

    def keeps_following(self) -> bool:
        return bool(self.unaccounted.value)


def query_ids(scheduler: BatchScheduler, scheduler_ids: Iterable[str]) -> list[list[str]]:
    """The ids to ask about (an array's id covers all its elements), in batches that fit
    one command line."""
    return question_ids(scheduler, scheduler_ids, nameable=())


def question_ids(
    scheduler: BatchScheduler,
    scheduler_ids: Iterable[str],
    nameable: Container[str] | None = None,
) -> list[list[str]]:
    """The ids one question names, in batches that fit one command line: an array's
    elements one by one while at most ``scheduler.max_named_elements`` are named in all
    (the arrays with fewest first) and each of them is ``nameable`` (None: any is), else
    the array's id, which covers all its elements. Near its end an array of 10,000 is
    then asked about its last few elements, not all of them."""
    limit = scheduler.max_named_elements
    by_base: dict[str, list[str]] = {}
    for sid in scheduler_ids:
        by_base.setdefault(scheduler.split_id(sid)[0], []).append(sid)
    named = 0
    ids: list[str] = []
    for base, members in sorted(by_base.items(), key=lambda item: len(item[1])):
        if (
            base not in members
            and named + len(members) <= limit
            and (nameable is None or all(sid in nameable for sid in members))
        ):
            ids.extend(members)
            named += len(members)
        else:
            ids.append(base)
    ids.sort(key=lambda sid: _id_key(scheduler, sid))
    return _fitting(ids, scheduler.max_query_chars)


def _id_key(scheduler: BatchScheduler, scheduler_id: str) -> tuple[Any, int]:
    base, index = scheduler.split_id(scheduler_id)
    return scheduler.id_order(base), -1 if index is None else index


def _fitting(ids: Sequence[str], limit: int) -> list[list[str]]:
    """``ids`` in lists whose joined length fits ``limit`` characters."""
    batches: list[list[str]] = []
    size = limit + 1
    for sid in ids:
        if size + len(sid) + 1 > limit:
            batches.append([])
            size = 0
        batches[-1].append(sid)
        size += len(sid) + 1
    return batches


def next_poll_gap(gap: float, changing: bool, floor: float, ceiling: float) -> float:
    """Seconds before the scheduler is asked again, after a poll that took ``gap`` after
    the one before: ``floor`` when that poll saw (sub)jobs change state (or finishing,
    waiting for the history's word), else twice ``gap``; never above ``ceiling`` (the
    configured poll interval), never below ``floor`` unless ``ceiling`` is lower."""
    if changing:
        return min(floor, ceiling)
    return min(max(gap, floor) * 2, ceiling)


def _ask(
    scheduler: BatchScheduler,
    command: Callable[..., dict[str, Sighting]],
    ids: Iterable[str],
    timeout: float,
    nameable: Container[str] | None = None,
) -> dict[str, Sighting]:
    rows: dict[str, Sighting] = {}
    for batch in question_ids(scheduler, ids, nameable):
        rows.update(command(batch, timeout=timeout))
    return rows


def poll(
    scheduler: BatchScheduler,
    ctx: PollContext,
    refs: Sequence[ActiveRef],
    settings: PollSettings,
    read_failure: FailureReader | None = None,
) -> list[StatusReport]:
    """Reports for the (sub)jobs of ``refs`` whose status changed since the last cycle."""
    log = logging.getLogger(f"ganga_like.{scheduler.label.lower()}")
    poller = ctx.poller_as(BatchPoller)
    previous = poller.seen.value
    history_off = poller.history_off.value
    if not scheduler.history_name:
        history_off = f"{scheduler.label} keeps no job history"
    now, wall = time.monotonic(), time.time()

    last = poller.polled_at.value
    gap = poller.poll_gap.value
    if gap is None:
        gap = settings.poll_interval
    if last is not None and now - last < min(gap, settings.poll_interval):
        return []  # too soon: a busy scheduler serves many users
    poller.polled_at.stage(now)

    tracked = _tracked(scheduler, refs, log)
    unaccounted = poller.unaccounted.value
    if not tracked and not unaccounted:
        return []

    try:
        queue = _ask(scheduler, scheduler.query, tracked, settings.command_timeout)
    except CommandError as exc:
        raise BackendError(
            f"{scheduler.query_name}: {exc.message}", transient=exc.transient
        ) from None

    neither = (
        f"neither {scheduler.query_name} nor {scheduler.history_name}"
        if scheduler.history_name
        else scheduler.query_name
    )
    tracker = Tracker(
        settings,
        previous,
        now,
        wall,
        history_off=history_off is not None,
        lost=f"lost: {scheduler.label} no longer lists it ({neither})",
        cancelled=f"cancelled while pending: {scheduler.label} no longer lists it",
    )
    ask = tracker.queue(tracked, queue)
    # Jobs finishing (waiting for the history) or missing are changing too.
    changing = bool(ask)
    history = None
    if ask and history_off is None:
        history = _ask_history(scheduler, poller, tracker, ask, settings, log)
    tracker.history(history)
    poller.seen.stage(tracker.seen)
    changing = changing or bool(tracker.changes)
    poller.poll_gap.stage(
        next_poll_gap(gap, changing, settings.min_poll_interval, settings.poll_interval)
    )

    reports = _reports(ctx, tracker, tracked, read_failure)
    if (scheduler.accounts_usage and history_off is None) or unaccounted:
        reports.extend(_usage_reports(scheduler, poller, tracker, tracked, settings, now, log))
    return reports


def _tracked(
    scheduler: BatchScheduler, refs: Sequence[ActiveRef], log: logging.Logger
) -> dict[str, ActiveRef]:
    """The refs to ask the scheduler about, by scheduler id; one without a usable id is
    said in the log and left as it is."""
    tracked: dict[str, ActiveRef] = {}
    for ref in refs:
        scheduler_id = str(ref.backend_data.get("id") or "")
        if scheduler.valid_id(scheduler_id):
            tracked[scheduler_id] = ref
        else:  # one bad record must not stop the monitoring of all the others
            log.warning(
                "%s: no usable %s id (%r); its status is left as it is",
                ref.fqid,
                scheduler.label,
                scheduler_id,
            )
    return tracked


def _ask_history(
    scheduler: BatchScheduler,
    poller: BatchPoller,
    tracker: Tracker,
    ask: list[str],
    settings: PollSettings,
    log: logging.Logger,
) -> dict[str, Sighting] | None:
    """The scheduler's history of the jobs ``ask``; None when it could not be read (a
    scheduler without one is remembered, and exit codes are then not known)."""
    try:
        # Those the queue shows ended after running have rows of their own in the history;
        # a pending element cancelled is only in its array's row. (One failed before it
        # started, a deadline passed while pending, then waits for final_grace_seconds.)
        ended = tracker.ended_in_queue()
        return _ask(scheduler, scheduler.history, ask, settings.command_timeout, ended)
    except CommandError as exc:
        if scheduler.history_unavailable(exc):
            poller.history_off.stage(exc.message)
            tracker.history_off = True
            log.info(
                "%s is not available (%s): exit codes are not known",
                scheduler.history_name,
                exc.message,
            )
        else:
            log.warning(
                "%s failed (%s); finished jobs are confirmed later", scheduler.history_name, exc
            )
    return None


def _reports(
    ctx: PollContext,
    tracker: Tracker,
    tracked: dict[str, ActiveRef],
    read_failure: FailureReader | None,
) -> list[StatusReport]:
    """A report for each change the tracker saw."""
    reports: list[StatusReport] = []
    for change in tracker.changes:
        ref, observation = tracked[change.scheduler_id], change.observation
        if (
            read_failure is not None
            and observation.status == "failed"
            and observation.exit_code == 1
        ):
            observation = read_failure(ctx, ref, observation)
        # "running: running" says nothing; "failed: walltime exceeded" does.
        reason = "" if observation.reason == observation.status else observation.reason
        reports.append(
            StatusReport(
                fqid=ref.fqid,
                status=Status.parse(observation.status),
                time=change.time,
                reason=reason,
                exit_code=observation.exit_code,
                started=change.started,
                cause=observation.cause,
            )
        )
    return reports


def _usage_reports(
    scheduler: BatchScheduler,
    poller: BatchPoller,
    tracker: Tracker,
    tracked: dict[str, ActiveRef],
    settings: PollSettings,
    now: float,
    log: logging.Logger,
) -> list[StatusReport]:
    """What the (sub)jobs that ended this poll, and those followed since an earlier one,
    used: ONE question to the history about exactly them (by element, not by array),
    after their ends were reported. Those it has not accounted yet are followed (staged)
    until it does, for ``usage_grace_seconds`` at most; one active again (resubmitted) is
    no longer followed: its earlier run's use is of no interest."""
    active = {ref.fqid for ref in tracked.values()}
    following = {
        sid: entry
        for sid, entry in poller.unaccounted.value.items()
        if entry.fqid not in active and now - entry.since < settings.usage_grace_seconds
    }
    for change in tracker.changes:
        if change.observation.status in FINAL and change.started:
            fqid = tracked[change.scheduler_id].fqid
            ended = Unaccounted(fqid, change.observation.status, now, change.time)
            following[change.scheduler_id] = ended
    used: dict[str, tuple[int, float, float, float]] = {}
    if following:
        asked = sorted(following)
        if 0 < scheduler.max_named_elements < len(asked):
            # Named one by one: the earliest ended now, the others in the next polls.
            asked = sorted(asked, key=lambda sid: following[sid].since)
            asked = sorted(asked[: scheduler.max_named_elements])
        try:
            used = scheduler.usage(asked, timeout=settings.command_timeout)
        except CommandError as exc:  # asked again next poll, within the grace
            log.info("%s: what ended jobs used is not known yet (%s)", scheduler.label, exc)
    reports: list[StatusReport] = []
    for sid, (kib, user, system, elapsed) in used.items():
        entry = following.pop(sid, None)
        if entry is not None:
            status = Status.parse(entry.status)
            reports.append(
                StatusReport(
                    entry.fqid,
                    status,
                    entry.ended,
                    usage=(kib, user, system),
                    wall=elapsed,
                    usage_only=True,
                )
            )
    if following or poller.unaccounted.value:
        poller.unaccounted.stage(following)
    return reports
