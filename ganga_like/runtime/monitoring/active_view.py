"""The monitor's in-memory view of the active index, kept up to date from what changed.

A monitoring cycle used to read the whole active index (``Registry.active``) and build one
ref per followed (sub)job: with 100,000 subjobs followed, about 100 ms of CPU on every
cycle, for cycles that mostly find nothing new. The view instead keeps one
:class:`~ganga_like.model.interfaces.ActiveRefs` per backend from cycle to cycle and
changes it only where the index changed:

* the monitor's own changes (a job that reached a final status is no longer followed) are
  applied once the cycle's commit succeeded (:meth:`ActiveView.discard`);
* any other change (a submission, kill, resubmission or removal, from this process or
  another session) is a commit of another connection, which ZODB turns into invalidations
  of the index's own persistent records (its tree nodes and buckets) at the start of the
  monitor's next transaction. The view holds every record of the index together with the
  serial it had when last read; one of them that became a ghost and reloads with another
  serial means the index changed in a way the view did not see: it is read again in full
  (:meth:`ActiveView.resync`) and the refs are brought up to date by difference.

Which records were invalidated is only looked for when the database's last transaction
moved (this cycle or the one before, as a commit's invalidations may arrive just after its
transaction id), so a cycle in a quiet repository costs a constant, whatever the number of
followed jobs. A full read happens at the start, after the view was dropped (a new lease,
a new connection) and when another session changed the index.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from ganga_like.model.interfaces import ActiveRef, ActiveRefs
from ganga_like.repository.registry import TOP

__all__ = ["ActiveView", "index_records"]

Key = tuple[int, int]
Entry = tuple[str, int, Any]  # (backend name, run, backend data), as the index stores it


def index_records(tree: Any) -> list[Any]:
    """The persistent records of a BTree: the tree, its inner nodes and its buckets.

    A small tree keeps its only bucket inside its own record; a larger one refers to
    children, every other element of its state (the others are separator keys)."""
    records = [tree]
    nodes = [tree]
    kind = type(tree)
    while nodes:
        state = nodes.pop().__getstate__()
        if state is None:
            continue
        children = state[0]
        if len(state) == 1 and len(children) == 1 and isinstance(children[0], tuple):
            continue  # the bucket is inline
        for child in children[::2]:
            records.append(child)
            if isinstance(child, kind):
                nodes.append(child)
    return records


class ActiveView:
    """Per backend, the refs of the active index; see the module docstring."""

    def __init__(self) -> None:
        self.backends: dict[str, ActiveRefs] = {}
        self._entries: dict[Key, Entry] = {}
        self._records: list[Any] = []  # the index's persistent records
        self._serials: dict[int, bytes] = {}  # id(record) -> its serial when read
        self._tree: Any = None
        self._last_tid: bytes | None = None
        self._tid_moved = True
        self.resyncs = 0  # full reads of the index, for tests and benchmarks

    def refresh(self, tree: Any, last_tid: bytes | None) -> bool:
        """Bring the view up to date with ``tree`` (the index as this transaction sees
        it); ``last_tid`` is the database's last transaction, read before the transaction
        began. True when the index had to be read in full."""
        moved = last_tid != self._last_tid
        check = moved or self._tid_moved
        self._last_tid, self._tid_moved = last_tid, moved
        if tree is not self._tree or (check and self._changed_elsewhere()):
            self.resync(tree)
            return True
        return False

    def resync(self, tree: Any) -> None:
        """Read the whole index and change the refs by difference."""
        entries: dict[Key, Entry] = dict(tree.items())
        old = self._entries
        for key, entry in old.items():
            if entries.get(key) != entry:
                self._forget(key, entry)
        for key, entry in entries.items():
            if old.get(key) != entry:
                self._follow(key, entry)
        self._entries = entries
        self._tree = tree
        self._records = index_records(tree)
        self._serials = {id(record): record._p_serial for record in self._records}
        self.resyncs += 1

    def discard(self, keys: Iterable[Key]) -> None:
        """The monitor's own committed removals from the index."""
        keys_list = list(keys)
        for key in keys_list:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._forget(key, entry)
        # The records those removals changed carry the monitor's own serial now; noted so
        # that their being evicted from the cache later is not taken for a change. Found
        # by descending the tree (a few records per key), not by looking at every record.
        if self._tree is None:
            return
        for key in keys_list:
            for record in _path(self._tree, key):
                if id(record) in self._serials and record._p_changed is not None:
                    self._serials[id(record)] = record._p_serial

    def matches(self, tree: Any) -> bool:
        """Whether the view holds exactly what ``tree`` holds (the proof of the fast path
        against the slow one, in tests)."""
        entries = dict(tree.items())
        if entries != self._entries:
            return False
        expected: dict[str, dict[tuple[int, int | None], ActiveRef]] = {}
        for key, entry in entries.items():
            ref = _ref(key, entry)
            expected.setdefault(entry[0], {})[(ref.job_id, ref.subjob_id)] = ref
        for backend in expected.keys() | self.backends.keys():
            refs = self.backends.get(backend, ActiveRefs())
            held = {(ref.job_id, ref.subjob_id): ref for ref in refs}
            if len(held) != len(refs) or held != expected.get(backend, {}):
                return False
            if any(refs.get(*key) != ref for key, ref in held.items()):
                return False
        return True

    def _changed_elsewhere(self) -> bool:
        serials = self._serials
        for record in self._records:
            if record._p_changed is None:  # a ghost: invalidated, or evicted from the cache
                try:
                    record._p_activate()
                except Exception:  # gone (packed away): the tree changed shape
                    return True
                if record._p_serial != serials[id(record)]:
                    return True
        return False

    def _follow(self, key: Key, entry: Entry) -> None:
        refs = self.backends.get(entry[0])
        if refs is None:
            refs = self.backends[entry[0]] = ActiveRefs()
        refs.add(_ref(key, entry))

    def _forget(self, key: Key, entry: Entry) -> None:
        refs = self.backends.get(entry[0])
        if refs is not None:
            refs.discard(key[0], None if key[1] == TOP else key[1])


def _path(tree: Any, key: Key) -> list[Any]:
    """The records from ``tree`` down to the bucket where ``key`` is (or would be)."""
    path = [tree]
    node, kind = tree, type(tree)
    while True:
        state = node.__getstate__()
        if state is None:
            return path
        children = state[0]
        if len(state) == 1 and len(children) == 1 and isinstance(children[0], tuple):
            return path  # the bucket is inline
        child = children[2 * bisect_right(children[1::2], key)]
        path.append(child)
        if not isinstance(child, kind):
            return path
        node = child


def _ref(key: Key, entry: Entry) -> ActiveRef:
    return ActiveRef(key[0], None if key[1] == TOP else key[1], entry[1], entry[2])
