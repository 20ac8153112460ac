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
  serial it had when last read, and for each bucket the keys it held. A record that became
  a ghost and reloads with another serial was changed elsewhere: only those buckets are
  read again (:meth:`ActiveView._reread`; after a split or merge, which changes an inner
  node, also the new buckets) and the refs changed by the difference of those alone, since
  a bucket whose serial did not move holds what it held.

Which records were invalidated is told by the connection when it can
(:meth:`GuardedConnection.collect_invalidations`: the oids other commits invalidated since
the last cycle), so that a cycle looks at those records only. Otherwise every record is
looked at, and only when the database's last transaction moved (this cycle or the one
before, as a commit's invalidations may arrive just after its transaction id): with the
monitor committing every cycle, that cost grows with the followed jobs (0.9 ms a cycle at
100,000 subjobs). Either way a cycle in a quiet repository costs a constant. A full read
(:meth:`ActiveView.resync`) happens at the start, after the view was dropped (a new lease,
a new connection) and when a record of the index is gone.
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
    """The persistent records of a BTree: the tree, its inner nodes and its buckets."""
    inner, leaves = _structure(tree)
    return [*inner, *(leaf for leaf in leaves if leaf is not tree)]


def _structure(tree: Any) -> tuple[list[Any], list[Any]]:
    """The tree and its inner nodes; and the records that hold its items: its buckets, or
    the tree itself when it is small enough to keep its only bucket inside its record.

    A larger tree refers to children, every other element of its state (the others are
    separator keys)."""
    inner: list[Any] = []
    leaves: list[Any] = []
    nodes = [tree]
    kind = type(tree)
    while nodes:
        node = nodes.pop()
        inner.append(node)
        state = node.__getstate__()
        if state is None:
            continue  # empty
        children = state[0]
        if len(state) == 1 and len(children) == 1 and isinstance(children[0], tuple):
            leaves.append(node)  # the bucket is inline
            continue
        for child in children[::2]:
            if isinstance(child, kind):
                nodes.append(child)
            else:
                leaves.append(child)
    return inner, leaves


class ActiveView:
    """Per backend, the refs of the active index; see the module docstring."""

    def __init__(self) -> None:
        self.backends: dict[str, ActiveRefs] = {}
        self._entries: dict[Key, Entry] = {}
        self._tree: Any = None
        self._inner: list[Any] = []  # the tree and its inner nodes
        self._leaves: list[Any] = []  # the records holding items: buckets (or the tree)
        self._serials: dict[int, bytes] = {}  # id(record) -> its serial when read
        self._by_oid: dict[bytes, Any] = {}  # oid -> record, of the tree and its leaves
        self._keys: dict[int, set[Key]] = {}  # id(leaf) -> the keys it held when read
        self._where: dict[Key, int] = {}  # key -> id(leaf) holding it
        self._last_tid: bytes | None = None
        self._tid_moved = True
        self.resyncs = 0  # full reads of the index, for tests and benchmarks
        self.partial_reads = 0  # reads of only the records another connection changed
        self.records_reread = 0  # leaves read by those
        self.records_checked = 0  # records looked at for a change, for tests

    def refresh(
        self, tree: Any, last_tid: bytes | None, invalidated: set[bytes] | None = None
    ) -> bool:
        """Bring the view up to date with ``tree`` (the index as this transaction sees
        it); ``last_tid`` is the database's last transaction, read before the transaction
        began; ``invalidated``, when known, the oids other commits invalidated since the
        last refresh. True when some of the index had to be read again."""
        moved = last_tid != self._last_tid
        check = moved or self._tid_moved
        self._last_tid, self._tid_moved = last_tid, moved
        if tree is not self._tree:
            self.resync(tree)
            return True
        if invalidated is not None:
            changed = self._changed_among(invalidated)
        elif not check:
            return False
        else:
            changed = self._changed_elsewhere()
        if changed is None:
            self.resync(tree)
            return True
        if not changed:
            return False
        self._reread(changed)
        return True

    def resync(self, tree: Any) -> None:
        """Read the whole index and change the refs by difference."""
        self._tree = tree
        self._set_structure(_structure(tree))
        entries: dict[Key, Entry] = {}
        self._keys, self._where = {}, {}
        for leaf in self._leaves:
            items = dict(leaf.items())
            self._keys[id(leaf)] = set(items)
            self._where.update(dict.fromkeys(items, id(leaf)))
            entries.update(items)
        # Read once loaded: a bucket's serial is known only when its state is.
        self._serials = {id(r): r._p_serial for r in (*self._inner, *self._leaves)}
        old = self._entries
        for key, entry in old.items():
            if entries.get(key) != entry:
                self._forget(key, entry)
        for key, entry in entries.items():
            if old.get(key) != entry:
                self._follow(key, entry)
        self._entries = entries
        self.resyncs += 1

    def discard(self, keys: Iterable[Key]) -> None:
        """The monitor's own committed removals from the index."""
        keys_list = list(keys)
        for key in keys_list:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._forget(key, entry)
            leaf = self._where.pop(key, None)
            if leaf is not None:
                self._keys[leaf].discard(key)
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
        if set(self._where) != set(entries) or any(
            key not in self._keys.get(leaf, ()) for key, leaf in self._where.items()
        ):
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

    def _changed_elsewhere(self) -> list[Any] | None:
        """The records another connection changed since they were read (an empty list:
        none); None when one of them is gone (packed away: read everything again)."""
        serials = self._serials
        changed = []
        self.records_checked += len(self._inner) + len(self._leaves)
        for record in (*self._inner, *self._leaves):
            if record._p_changed is None:  # a ghost: invalidated, or evicted from the cache
                try:
                    record._p_activate()
                except Exception:  # gone (packed away): the tree changed shape
                    return None
                if record._p_serial != serials.get(id(record)):
                    changed.append(record)
        return changed

    def _changed_among(self, invalidated: set[bytes]) -> list[Any] | None:
        """Like :meth:`_changed_elsewhere`, for the records among ``invalidated`` only."""
        records = self._by_oid
        changed = []
        for oid in invalidated:
            record = records.get(oid)
            if record is None:
                continue
            self.records_checked += 1
            try:
                record._p_activate()
            except Exception:  # gone (packed away): the tree changed shape
                return None
            if record._p_serial != self._serials.get(id(record)):
                changed.append(record)
        return changed

    def _set_structure(self, structure: tuple[list[Any], list[Any]]) -> None:
        self._inner, self._leaves = structure
        self._by_oid = {r._p_oid: r for r in (*self._inner, *self._leaves)}

    def _reread(self, changed: list[Any]) -> None:
        """Read again only the leaves that changed (and, if the tree's shape changed, the
        leaves that are new), and change the refs by the difference of those alone: a key
        held by an unchanged leaf is unchanged."""
        ids = {id(record) for record in changed}
        old_leaves = {id(leaf): leaf for leaf in self._leaves}
        if any(id(node) in ids for node in self._inner):
            self._set_structure(_structure(self._tree))
        new_leaves = {id(leaf): leaf for leaf in self._leaves}
        to_read = [leaf for i, leaf in new_leaves.items() if i in ids or i not in old_leaves]
        dropped = [i for i in old_leaves if i in ids or i not in new_leaves]
        old_part: dict[Key, Entry] = {}
        for leaf_id in dropped:
            for key in self._keys.pop(leaf_id, ()):
                if self._where.get(key) == leaf_id:
                    del self._where[key]
                    old_part[key] = self._entries.pop(key)
            if leaf_id not in new_leaves:
                self._serials.pop(leaf_id, None)
        new_part: dict[Key, Entry] = {}
        for leaf in to_read:
            items = dict(leaf.items())
            self._keys[id(leaf)] = set(items)
            self._where.update(dict.fromkeys(items, id(leaf)))
            new_part.update(items)
        for key, entry in old_part.items():
            if new_part.get(key) != entry:
                self._forget(key, entry)
        for key, entry in new_part.items():
            if old_part.get(key) != entry:
                self._follow(key, entry)
        self._entries.update(new_part)
        for record in (*self._inner, *to_read):
            self._serials[id(record)] = record._p_serial
        self.partial_reads += 1
        self.records_reread += len(to_read)

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
