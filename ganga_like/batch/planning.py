"""From (job, RunSpec) pairs to batches: one submission each, a plain job or an array.

Subjobs whose scheduler options are equal share ONE array whose task ids are their
subjob ids (real bulk); past the scheduler's array size limit, one array per that many
subjobs, each with task ids from 0. A job without subjobs, and every subjob of a backend
set not to bulk, is a plain job of its own. No side effects.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from ganga_like.model.interfaces import RunSpec, SubmitContext
from ganga_like.model.job import Job

__all__ = [
    "Batch",
    "Member",
    "PlacementError",
    "batch_name",
    "compress",
    "consecutive_arrays",
    "plan_batches",
    "render_pinned",
]

Opts = TypeVar("Opts", bound=Hashable)  # the job-level options: equal options share an array
C = TypeVar("C")  # what one member runs, in the backend's terms


class PlacementError(ValueError):
    """No queue (partition...) can take a job; the message says why."""


@dataclass
class Member(Generic[C]):
    """One (sub)job in a batch: its array index (None in a plain job) and command."""

    job: Job
    index: int | None
    root: str  # its workspace directory
    command: C
    inputs: tuple[str, ...]


@dataclass
class Batch(Generic[Opts, C]):
    """One submission: a plain job (one member) or an array (members by index)."""

    name: str  # unique: an ambiguous failure is resolved by looking the job up by name
    top: str  # workspace directory of the top-level job
    options: Opts
    queue: str  # where it goes (a Slurm partition, a PBS queue); "" for the default
    members: list[Member[C]] = field(default_factory=list)
    queue_chosen: bool = False  # the queue was chosen to fit, not named by the user

    @property
    def is_array(self) -> bool:
        return bool(self.members) and self.members[0].index is not None

    @property
    def first_id(self) -> int:
        """The subjob id of array task 0: non-zero for the arrays past the scheduler's
        array size limit, whose task ids start again from 0 (0 for a plain job)."""
        first = self.members[0] if self.members else None
        if first is None or first.index is None:
            return 0
        return first.job.id - first.index


def batch_name(job: Job) -> str:
    """A new name for a submission of ``job`` (or of subjobs of master ``job``), unique: a
    retry after an ambiguous failure looks the job up by its name."""
    return f"ganga-{job.fqid}-{secrets.token_hex(3)}"


def plan_batches(
    ctx: SubmitContext,
    pairs: Sequence[tuple[Job, RunSpec]],
    *,
    options_of: Callable[[Job], tuple[Opts, str, bool]],
    place: Callable[[Opts], str],
    command: Callable[[Job, RunSpec, str, Opts], C],
    array_size: Callable[[], int],
    new_name: Callable[[Job], str],
) -> tuple[list[Batch[Opts, C]], dict[str, str]]:
    """The batches to submit, in subjob order, and fqid -> error for jobs that cannot be.

    ``options_of(job)`` gives the job's options, the queue it names ("" to have one
    chosen) and whether its subjobs go in arrays; ``place(options)`` chooses a queue or
    raises :class:`PlacementError`; ``command`` makes a member's command from its job,
    spec and workspace directory; ``array_size()`` (asked once, and only when an array is
    made) is the most members an array may have.
    """
    batches: list[Batch[Opts, C]] = []
    arrays: dict[tuple[str, Opts, int], Batch[Opts, C]] = {}
    size: int | None = None
    failed: dict[str, str] = {}
    for job, spec in pairs:
        options, queue, bulk = options_of(job)
        master = job.master
        top = ctx.paths(master).location if master is not None else ctx.paths(job).location
        root = ctx.paths(job).location
        chosen = not queue
        if chosen:
            try:
                queue = place(options)
            except PlacementError as exc:
                failed[job.fqid] = str(exc)
                continue
        member = Member(job, None, root, command(job, spec, root, options), spec.inputs)
        if master is None or not bulk:
            batches.append(Batch(new_name(job), top, options, queue, [member], chosen))
            continue
        if size is None:
            size = max(1, array_size())
        # Task id = subjob id below the limit; past it, one more array per ``size``
        # subjobs, each with task ids from 0.
        chunk, member.index = divmod(job.id, size)
        key = (top, options, chunk)
        batch = arrays.get(key)
        if batch is None:
            batch = arrays[key] = Batch(new_name(master), top, options, queue, queue_chosen=chosen)
            batches.append(batch)
        batch.members.append(member)
    return batches, failed


def consecutive_arrays(
    batches: Sequence[Batch[Opts, C]], new_name: Callable[[Job], str]
) -> list[Batch[Opts, C]]:
    """``batches`` with each array cut where its indices stop being consecutive, for a
    scheduler whose array takes one range of task ids (Grid Engine's ``qsub -t n-m``):
    a resubmission of subjobs 1 and 3 is two arrays. Each new array gets a name of its own
    from ``new_name(master)``."""
    result: list[Batch[Opts, C]] = []
    for batch in batches:
        if not batch.is_array:
            result.append(batch)
            continue
        members = sorted(batch.members, key=lambda m: m.index or 0)
        run: list[Member[C]] = []
        for member in members:
            if run and member.index != (run[-1].index or 0) + 1:
                result.append(replace(batch, members=run))
                master = member.job.master
                batch = replace(batch, name=new_name(master if master is not None else member.job))
                run = []
            run.append(member)
        result.append(replace(batch, members=run))
    return result


def compress(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"`` (sorted, duplicates dropped; "" for none)."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = prev = ordered[0] if ordered else 0
    for index in ordered[1:]:
        if index == prev + 1:
            prev = index
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = index
    if ordered:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def render_pinned(
    render: Callable[[Sequence[Member[C]]], str],
    members: Sequence[Member[C]],
    error: type[Exception],
) -> tuple[str | None, dict[str, str]]:
    """``render(members)``, and fqid -> message for the members it cannot hold.

    A rendering ``error`` is pinned on the members that cause it (each rendered alone,
    which only happens on that rare path), so that the others can still be submitted;
    when every member renders alone, the job-level part is wrong and fails them all.
    """
    members = list(members)
    try:
        return render(members), {}
    except error as exc:
        whole = str(exc)
    bad: dict[str, str] = {}
    for member in members:
        try:
            render([member])
        except error as exc:
            bad[member.job.fqid] = f"cannot write the batch script: {exc}"
    good = [m for m in members if m.job.fqid not in bad]
    if not bad:
        return None, {m.job.fqid: f"cannot write the batch script: {whole}" for m in members}
    if not good:
        return None, bad
    text, more = render_pinned(render, good, error)
    return text, {**bad, **more}
