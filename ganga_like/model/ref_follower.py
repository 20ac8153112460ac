"""Maps derived from the refs a backend follows, kept up to date from their change log.

A backend whose poll needs, say, fqid -> run of the followed (sub)jobs should not rebuild it
from 100,000 refs on every cycle: :class:`RefFollower` builds it once, then applies only
what :meth:`ActiveRefs.changes_since` says changed since it last looked, so a cycle costs
what changed. When the log no longer reaches that far, or the refs are another object
(a new monitoring tenure) or a plain sequence (tests), it reads every ref again.

The maps derive from the refs alone, which change only with what the monitor committed: a
poller keeps them as they are whether or not its cycle commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ganga_like.model.active_refs import ActiveRef, ActiveRefs, Change

__all__ = ["RefFollower"]


class RefFollower:
    """fqid -> run (:attr:`runs`) and job id -> how many of its (sub)jobs are followed
    (:attr:`masters`: the journals to read) of the refs ``wanted`` accepts (all of them by
    default). Subclasses derive more by extending :meth:`added` and :meth:`removed`."""

    def __init__(self, wanted: Callable[[ActiveRef], bool] | None = None) -> None:
        self.wanted = wanted
        self.runs: dict[str, int] = {}
        self.masters: dict[int, int] = {}
        self._refs: ActiveRefs | None = None
        self._version = 0

    def follow(self, refs: Sequence[ActiveRef]) -> None:
        """Bring the maps up to date with ``refs``."""
        changes: Sequence[Change] | None = None
        if isinstance(refs, ActiveRefs) and self._refs is refs:
            changes = refs.changes_since(self._version)
        if changes is None:
            self.clear()
            wanted = self.wanted
            for ref in refs:
                if wanted is None or wanted(ref):
                    self.added(ref)
        else:
            wanted = self.wanted
            for added, ref in changes:
                if wanted is not None and not wanted(ref):
                    continue
                if added:
                    self.added(ref)
                else:
                    self.removed(ref)
        if isinstance(refs, ActiveRefs):
            self._refs, self._version = refs, refs.version
        else:
            self._refs = None

    def clear(self) -> None:
        self.runs = {}
        self.masters = {}

    def added(self, ref: ActiveRef) -> None:
        self.runs[ref.fqid] = ref.run
        self.masters[ref.job_id] = self.masters.get(ref.job_id, 0) + 1

    def removed(self, ref: ActiveRef) -> None:
        # A (sub)job followed again under a new run is logged removed (the old run) before
        # it is added: only the run being removed is forgotten.
        if self.runs.get(ref.fqid) == ref.run:
            del self.runs[ref.fqid]
        left = self.masters.get(ref.job_id, 1) - 1
        if left:
            self.masters[ref.job_id] = left
        else:
            self.masters.pop(ref.job_id, None)
