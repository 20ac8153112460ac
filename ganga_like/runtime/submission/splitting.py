"""Turning a master and its splitter's variations into validated subjobs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any, TypeVar, cast

from ganga_like.errors import GangaError, JobError
from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts

__all__ = [
    "build_subjobs",
    "calling_splitter",
    "split_parts",
    "splitter_fixed",
    "variation_parts",
]

T = TypeVar("T")

# What a subjob takes from its master is Job's schema's ``subjob`` tag (model.parts): the
# parts tagged "copy" are copied (each subjob may differ and keeps its own backend data);
# those tagged "share" (file lists, the dataset, the name) are shared until varied.

# Read-only values a job derives rather than stores (besides its protected attributes).
_DERIVED = frozenset({"time"})


def build_subjobs(
    master: Job,
    variations: list[dict[str, Any]],
    *,
    origin: Job | None = None,
    first_id: int = 0,
    first_position: int = 0,
) -> list[Job]:
    """One subjob of ``master`` per variation, ids first_id.., every varied value validated.

    ``origin`` is the job the subjobs are made from, the master itself unless a subjob is
    split again (``resplit``): then its pieces take its description and join its master.
    ``first_position``: the place of the first variation in the whole split, which an
    error names (a large split is built a part at a time)."""
    subjobs = []
    origin = master if origin is None else origin
    source = origin.stored()
    parts = job_parts()
    copied, shared_names = parts.subjob_copied, parts.subjob_shared
    fixed = splitter_fixed()
    for index, variation in enumerate(variations):
        sj = Job.new_subjob(master, first_id + index)
        state: dict[str, Any] = {"submit_count": 1}  # subjobs are created by a submission
        for name in copied:
            value = source.get(name)
            if isinstance(value, GangaObject):
                # A component with no per-job state (Local) is shared, not copied: one
                # record less per subjob.
                state[name] = value if not value.per_job_state else value._copy()
        for name in shared_names:
            if name in source:
                state[name] = source[name]
        sj._put_all(state)
        for path, value in variation.items():
            try:
                _apply(sj, origin, path, value, fixed)
            except GangaError as exc:
                raise JobError(f"splitter: subjob {first_position + index}: {exc}") from None
        subjobs.append(sj)
    return subjobs


def splitter_fixed() -> frozenset[str]:
    """What no splitter may set: what a job records of its own runs."""
    return job_parts().protected | _DERIVED


def split_parts(job: Job, size: int, start: int = 0) -> Iterator[list[Job]]:
    """The subjobs of ``job``'s own split from id ``start`` on, ``size`` at a time (ids in
    order), made as they are asked for; JobError when the splitter fails or a value is
    invalid."""
    for first, part in variation_parts(job, size, start):
        yield build_subjobs(job, part, first_id=first, first_position=first)


def variation_parts(
    job: Job, size: int, start: int = 0
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """``job``'s splitter's variations from ``start`` on, ``size`` at a time, each part
    with the position of its first; JobError when the splitter fails."""
    variations = calling_splitter(
        job, lambda: islice(job.splitter.iter_variations(job), start, None)
    )
    while True:
        part = calling_splitter(job, lambda: list(islice(variations, size)))
        if not part:
            return
        yield start, part
        start += len(part)


def calling_splitter(job: Job, call: Callable[[], T]) -> T:
    """``call()``, a call into ``job``'s splitter, whose failure becomes one JobError."""
    try:
        return call()
    except GangaError as exc:
        raise JobError(f"job {job.fqid}: splitting failed: {exc}") from None
    except Exception as exc:  # a splitter plugin's bug is reported, nothing is stored
        raise JobError(f"job {job.fqid}: the splitter failed: {type(exc).__name__}: {exc}") from exc


def _apply(sj: Job, master: Job, path: str, value: Any, fixed: frozenset[str]) -> None:
    parts = path.split(".")
    target: GangaObject = sj
    origin: GangaObject | None = master
    for name in parts[:-1]:
        current: GangaObject | None = target.stored().get(name)
        if not isinstance(current, GangaObject):
            raise JobError(
                f"cannot set {path!r}: {type(target).__name__}.{name} is not an "
                "object with attributes"
            )
        if origin is not None and current is origin.stored().get(name):
            # Shared with the master: give this subjob its own copy before changing it.
            copied = cast(GangaObject, current)._copy()
            target._put(name, copied)
            current = copied
        origin = None
        target = current
    attribute = parts[-1]
    if attribute in fixed:
        raise JobError(f"a splitter cannot set {path!r}")
    target._assign(attribute, value)
