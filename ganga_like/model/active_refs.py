"""The (sub)jobs the monitor follows, as backends see them when they poll: one ``ActiveRef``
each, kept per backend in an ``ActiveRefs`` that logs its changes (part of the contracts of
``ganga_like.model.interfaces``, which exports them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, overload

__all__ = ["ActiveRef", "ActiveRefs", "Change"]


class ActiveRef(NamedTuple):
    """A (sub)job the monitor follows, and the backend data it needs to poll it.

    A named tuple rather than a frozen dataclass: the monitor makes one per followed job
    on every cycle, and a tuple is made several times faster."""

    job_id: int
    subjob_id: int | None
    run: int  # submit count: tells a resubmission from its earlier run
    backend_data: Mapping[str, Any]

    @property
    def fqid(self) -> str:
        return str(self.job_id) if self.subjob_id is None else f"{self.job_id}.{self.subjob_id}"


# One entry of the change log of ``ActiveRefs``: (True, ref) added, (False, ref) removed.
Change = tuple[bool, ActiveRef]


class ActiveRefs(Sequence[ActiveRef]):
    """The (sub)jobs of one backend the monitor follows, kept from cycle to cycle.

    The monitor keeps one per backend and changes it in place as jobs start and stop being
    followed, instead of building a new list on every cycle: with 100,000 subjobs followed,
    that list alone cost more than everything else a quiet cycle does. A backend that keeps
    maps derived from the refs (the Local backend's fqid -> run) keeps them up to date from
    :meth:`changes_since` and rebuilds them only when it is told None.

    A sequence in no particular order: a removal moves the last ref into the gap, so that
    every change costs O(1).
    """

    # The change log is kept at most this long, or as long as the refs if that is longer;
    # a backend further behind rebuilds from the refs themselves.
    LOG_MIN = 4096

    def __init__(self, refs: Iterable[ActiveRef] = ()) -> None:
        self._refs: list[ActiveRef] = []
        self._where: dict[tuple[int, int | None], int] = {}  # (job id, subjob id) -> position
        self._log: list[Change] = []
        self._log_start = 0  # the version before the first change of ``_log``
        for ref in refs:
            self.add(ref)

    @property
    def version(self) -> int:
        """Grows by one with every change."""
        return self._log_start + len(self._log)

    def __len__(self) -> int:
        return len(self._refs)

    @overload
    def __getitem__(self, index: int) -> ActiveRef: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[ActiveRef]: ...
    def __getitem__(self, index: int | slice) -> ActiveRef | Sequence[ActiveRef]:
        return self._refs[index]

    def __iter__(self) -> Iterator[ActiveRef]:
        return iter(self._refs)

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, ActiveRef):
            return False
        return self.get(ref.job_id, ref.subjob_id) == ref

    def get(self, job_id: int, subjob_id: int | None) -> ActiveRef | None:
        where = self._where.get((job_id, subjob_id))
        return None if where is None else self._refs[where]

    def add(self, ref: ActiveRef) -> None:
        """Follow ``ref``, replacing what was followed for the same (sub)job."""
        key = (ref.job_id, ref.subjob_id)
        where = self._where.get(key)
        if where is not None:
            if self._refs[where] == ref:
                return
            self.discard(ref.job_id, ref.subjob_id)
        self._where[key] = len(self._refs)
        self._refs.append(ref)
        self._logged((True, ref))

    def discard(self, job_id: int, subjob_id: int | None) -> None:
        where = self._where.pop((job_id, subjob_id), None)
        if where is None:
            return
        ref = self._refs[where]
        last = self._refs.pop()
        if where < len(self._refs):
            self._refs[where] = last
            self._where[(last.job_id, last.subjob_id)] = where
        self._logged((False, ref))

    def changes_since(self, version: int) -> Sequence[Change] | None:
        """What changed after ``version``, oldest first; None when that is no longer
        known (the caller rebuilds what it derived from the refs themselves)."""
        if version < self._log_start or version > self.version:
            return None
        return self._log[version - self._log_start :]

    def _logged(self, change: Change) -> None:
        self._log.append(change)
        if len(self._log) > max(self.LOG_MIN, 2 * len(self._refs)):
            drop = len(self._log) // 2
            del self._log[:drop]
            self._log_start += drop
