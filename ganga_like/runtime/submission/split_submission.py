"""A split job's first submission, a part of its subjobs at a time.

A million subjobs held in memory until the one commit that records them cost 2.3 GB. They
are made, handed to the backend and recorded ``PART_SIZE`` at a time instead, all in the
one transaction that records the outcome (so the submission stays all or nothing): after
each part a ZODB savepoint writes the part to a temporary file, and the connection's
cache lets go of it; the commit copies the savepoints to the repository. What is kept in
Python from part to part is what the outcome needs: the fqids the backend refused or never
saw, and what a backend with per-job state set on each subjob.

A conflict at the commit aborts the transaction, savepoints included: the retry makes the
subjobs again by splitting again (as crash recovery does, so splitting must be
deterministic), gives each back what the backend set on it, and records the same outcome
without calling the backend again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ganga_like.errors import JobError
from ganga_like.model.interfaces import SubmitOutcome
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.model.subjob_builder import SubjobsBuilder
from ganga_like.repository.savepoints import write_out
from ganga_like.runtime.submission.splitting import (
    build_subjobs,
    split_parts,
    splitter_fixed,
    variation_parts,
)
from ganga_like.runtime.submission.variation_check import VariationChecker
from ganga_like.runtime.workflow import throttle

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["ONE_PART_MAX", "PART_SIZE", "SplitSubmission", "check_split", "part_size"]

# Subjobs made, handed over and written out at a time: a few MB of objects, and few
# enough backend calls (a real-bulk backend makes one scheduler call per part).
PART_SIZE = 5000
# A split of at most this many subjobs is submitted in one part, as before, with no
# savepoint: 10,000 subjobs in 0.8 s of CPU, where two parts took 1.05 s (the split made
# twice, the savepoint file). Larger parts throughout cost memory: a million subjobs in
# parts of 10,000 peaked at 665 MiB, in parts of 5,000 at 538 MiB.
ONE_PART_MAX = 10_000
# Test hook: a smaller part, so that a test submission spans several parts in a process
# the test starts. Unset (always, outside tests) the part is PART_SIZE.
TEST_PART_VARIABLE = "GANGA_LIKE_TEST_SUBMIT_PART"

HandOver = Callable[[Sequence[Job], bool], SubmitOutcome]


def part_size() -> int:
    try:
        return max(1, int(os.environ[TEST_PART_VARIABLE]))
    except (KeyError, ValueError):
        return PART_SIZE


def check_split(job: Job) -> tuple[list[Job], int]:
    """Check every subjob of ``job``'s split before anything is stored: its first subjobs
    made (kept, they are handed over first: every subjob for a split of at most
    ``ONE_PART_MAX``), the others' variations checked without making them (they are made
    a part at a time as they are submitted); and the number of subjobs.

    JobError when the splitter fails, a value is invalid or there is no subjob."""
    first: list[Job] = []
    count = 0
    size = part_size()
    # Made and kept while the split may fit one part (a multiple of the part's size).
    keep = ONE_PART_MAX if size == PART_SIZE else size
    checker: VariationChecker | None = None
    for position, part in variation_parts(job, size):
        if position < keep:
            first.extend(build_subjobs(job, part, first_id=position, first_position=position))
        else:
            if checker is None:
                checker = VariationChecker(job, splitter_fixed(), _one_maker(job))
            checker.check(part, position)
        count += len(part)
    if not count:
        raise JobError(f"job {job.fqid}: the splitter produced no subjobs")
    return first, count


def _one_maker(job: Job) -> Callable[[dict[str, Any], int], object]:
    def make_one(variation: dict[str, Any], position: int) -> object:
        return build_subjobs(job, [variation], first_id=position, first_position=position)

    return make_one


class SplitSubmission:
    """The submission of ``job``'s ``count`` subjobs (``first``: its first part, made)."""

    def __init__(
        self,
        session: Session,
        job: Job,
        first: list[Job],
        count: int,
        keep_going: bool,
        held: str | None = None,
    ) -> None:
        self.session = session
        # A job of a throttled workflow: no subjob is handed over, each is held waiting
        # with this cause (ganga_like.runtime.workflow.throttle).
        self.held = held
        self.job = job
        self.count = count
        self.keep_going = keep_going
        self.outcome = SubmitOutcome()
        self._first: list[Job] | None = first
        self._skipped: set[str] = set()  # outcome.not_attempted, for lookups
        # id -> the backend's state after the hand-over, for backends with per-job state
        self._backend_states: dict[int, dict[str, Any]] = {}
        self._large = count > len(first)
        self._builder = SubjobsBuilder()
        self._submitted = 0
        # Subjobs (ids 0..) whose hand-over is done: should the first attempt stop part
        # way (a conflict), a retry records the others as never handed over.
        self._reached = 0

    # -- the two ways of recording the outcome -------------------------------------------

    def hand_over_and_record(self, hand_over: HandOver) -> None:
        """The first attempt: each part is handed to the backend (``hand_over(part,
        first)``, which never raises), then recorded."""
        if not self._begin():
            return
        per_job_state = self.job.backend.per_job_state
        for index, part in enumerate(self._first_parts()):
            if self.held is not None:
                pass  # nothing goes to the backend: the monitor hands them over
            elif self.outcome.failed and not self.keep_going:
                self._skip(sj.fqid for sj in part)
            else:
                self._merge(hand_over(part, index == 0))
                if per_job_state:
                    for sj in part:
                        self._backend_states[sj.id] = sj.backend._state_copy()
            self._reached += len(part)
            self._record_part(part)
        self._finish()
        stop_point("before-commit")

    def _first_parts(self) -> Iterator[list[Job]]:
        """The parts, the first one as made by ``check_split`` (then let go)."""
        first = self._first if self._first is not None else []
        self._first = None  # a retry makes its own
        start = len(first)
        yield first
        del first
        if self._large:
            yield from split_parts(self.job, part_size(), start=start)

    def record_again(self) -> None:
        """A retry after a conflict: the subjobs made again, as the backend left them."""
        if not self._begin():
            return
        for part in split_parts(self.job, part_size()):
            for sj in part:
                state = self._backend_states.get(sj.id)
                if state is not None:
                    sj.backend._put_back(state)
            self._skip(sj.fqid for sj in part if sj.id >= self._reached)
            self._record_part(part)
        self._finish()

    def handed(self) -> list[Job]:
        """The subjobs the backend received, made again as it left them (to cancel them
        when the outcome cannot be recorded)."""
        received: list[Job] = []
        if self.held is not None:
            return received
        for part in split_parts(self.job, part_size()):
            for sj in part:
                if sj.id >= self._reached:
                    return received
                if sj.fqid in self.outcome.failed or sj.fqid in self._skipped:
                    continue
                state = self._backend_states.get(sj.id)
                if state is not None:
                    sj.backend._put_all(state)
                received.append(sj)
        return received

    # -- parts -----------------------------------------------------------------------------

    def _begin(self) -> bool:
        registry = self.session.repo.registry()
        if registry.submitting.pop(self.job.id, None) is None:
            return False  # an attempt whose answer was lost (the server died) did commit
        self._builder = SubjobsBuilder()
        self._submitted = 0
        if self._large:
            # Reachable from the master, so that each savepoint writes the parts added.
            self.job._subjobs = self._builder.tree
        return True

    def _merge(self, result: SubmitOutcome) -> None:
        outcome = self.outcome
        outcome.failed.update(result.failed)
        self._skip(result.not_attempted)
        outcome.real_bulk = outcome.real_bulk or result.real_bulk

    def _skip(self, fqids: Iterator[str] | list[str]) -> None:
        for fqid in fqids:
            if fqid not in self._skipped:
                self._skipped.add(fqid)
                self.outcome.not_attempted.append(fqid)

    def _record_part(self, part: list[Job]) -> None:
        registry = self.session.repo.registry()
        outcome = self.outcome
        for sj in part:
            fqid = sj.fqid
            message = outcome.failed.get(fqid)
            if self.held is not None:
                sj.change_status(Status.WAITING, self.held)
                self._submitted += 1
            elif message is not None:
                if outcome.real_bulk:
                    # Real bulk: a subjob the backend refused is failed, not new (design).
                    sj.change_status(Status.SUBMITTING, "user: submit")
                    sj.change_status(Status.FAILED, f"submission failed: {message}")
                else:
                    sj.log_event(f"submission failed: {message}")
            elif fqid not in self._skipped:
                sj.change_status(Status.SUBMITTED, "user: submit")
                registry.follow(sj, sj.backend.monitor_data(sj))
                self._submitted += 1
        # Each subjob record is written once, in its submitted (or new) state.
        self._builder.add(part)
        if self._large:
            # The part goes to the savepoint's file, and out of memory.
            write_out(self.session.repo.connection())

    def _finish(self) -> None:
        job = self.job
        if not self._submitted:
            # Nothing to follow: no subjobs (what the savepoints wrote is left unreachable).
            job._subjobs = None
            job.change_status(Status.NEW, "submission failed for every subjob: rolled back")
            return
        job.take_subjobs(self._builder)
        job.change_status(Status.SUBMITTED, "user: submit")
        if self.held is not None:
            throttle.join(self.session.repo.registry().root, job)
