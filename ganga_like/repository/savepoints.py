"""Savepoints for transactions of millions of records: written out, and out of memory.

A savepoint writes the transaction's changes so far to a temporary file (ZODB's TmpStore),
after which the connection's cache can let the objects go. What stays in memory is the
file's index: ZODB keeps two dicts by object id (the position of each record, and whether
it is new), 160 B per record, 34 MB for a 100,000-subjob submission, 340 MB for a million.
Kept in ``fsIndex`` tables (6 bytes per value, 2 per key) instead, they cost a tenth.

Each savepoint also copies both tables, for a rollback to it: with one savepoint every few
thousand subjobs, that copying grows with the square of the submission. These savepoints
cannot be rolled back to (nothing here does): the copy is a marker that refuses it.

At the commit, ZODB sorts a list of every id the savepoints hold and copies their
``creating`` table into a dict (200 MB for a million subjobs) before it copies the records
to the storage; ``commit_savepoints`` copies them in the order of the file, read once from
start to end, and keeps the table as the connection's ``_creating``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ZODB.Connection import Connection, TmpStore
from ZODB.fsIndex import fsIndex
from ZODB.mvccadapter import MVCCAdapterInstance
from ZODB.utils import p64, u64, z64

from ganga_like.errors import RepositoryError

__all__ = ["commit_savepoints", "write_out"]


class _NoRollback:
    """The state a rollback would need, which is not kept."""

    def __contains__(self, oid: object) -> bool:
        raise RepositoryError("a compact savepoint cannot be rolled back to")


class _Table(fsIndex):  # type: ignore[misc]
    """An ``fsIndex`` that is also what ZODB asks of a TmpStore's dicts: a sequence of its
    object ids for the pickle cache's ``invalidate`` (the abort of the transaction), and a
    cheap ``copy``."""

    _oids: list[bytes] | None = None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):  # the cache's invalidate walks it as a sequence
            if self._oids is None:
                self._oids = list(self.keys())
            return self._oids[key]
        return super().__getitem__(key)

    def __setitem__(self, key: bytes, value: int) -> None:
        self._oids = None
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, bytes):
            self._oids = None
            super().__delitem__(key)
            return
        # The cache's invalidate empties the sequence it walked (its slice 0..len).
        self.clear()
        self._oids = None

    def copy(self) -> _NoRollback:
        return _NoRollback()


class _AppendingStore(TmpStore):  # type: ignore[misc]
    """A TmpStore that appends each record in one write, without a seek: a seek of the
    buffered file flushes its buffer, so ZODB's store made a system call per record."""

    _at_end = True

    def store(self, oid: bytes, serial: bytes | None, data: bytes, version: str, txn: Any) -> bytes:
        if not self._at_end:
            self._file.seek(self.position)
            self._at_end = True
        if serial is None:
            serial = z64
        self._file.write(b"".join((p64(len(oid)), oid, serial, p64(len(data)), data)))
        self.index[oid] = self.position
        self.position += 24 + len(oid) + len(data)
        return serial

    def load(self, oid: bytes, version: str = "") -> Any:
        self._at_end = False  # reading moves the file's position
        return super().load(oid, version)

    def reset(self, position: int, index: Any, creating: Any) -> None:
        self._at_end = False
        super().reset(position, index, creating)


def write_out(connection: Connection) -> None:
    """Write the changes of ``connection``'s transaction so far to its savepoint file and
    let every object not changed since leave memory (``cacheMinimize``); the commit (or
    the abort) of the transaction takes the file as usual."""
    if connection._savepoint_storage is None:
        store = _AppendingStore(connection._normal_storage)
        store.index = _Table()
        store.creating = _Table()
        connection._savepoint_storage = connection._storage = store
    connection.transaction_manager.savepoint(optimistic=True)
    connection.cacheMinimize()


def commit_savepoints(connection: Connection, transaction: Any) -> bool:
    """What ``Connection._commit_savepoint`` does (copy what the savepoints wrote to the
    storage, in the commit of ``transaction``), for a compact store; False for another
    store, which ZODB's own code commits. The repository stores no blobs."""
    src = connection._savepoint_storage
    if not isinstance(src.creating, _Table):
        return False
    connection._storage = connection._normal_storage
    connection._savepoint_storage = None
    try:
        storage = connection._storage
        # A new record goes past the MVCC adapter, which notes every id stored so as to
        # tell the process's other connections (a set of two million for a million
        # subjobs): they cannot have a record that did not exist.
        store_new = (
            storage._storage.store if isinstance(storage, MVCCAdapterInstance) else storage.store
        )
        store = storage.store
        creating = src.creating
        modified = connection._modified
        read_current = connection._readCurrent
        for oid, serial, data in _latest_records(src):
            read_current.pop(oid, None)
            if oid in creating:  # in _creating, which covers it
                store_new(oid, serial, data, "", transaction)
            else:
                store(oid, serial, data, "", transaction)
                modified.append(oid)
        # New records the final savepoint found are in the table already.
        creating.update(connection._creating)
        connection._creating = creating
    finally:
        src.close()
    return True


def _latest_records(src: TmpStore) -> Iterator[tuple[bytes, bytes, bytes]]:
    """(oid, serial, data) of the last version of each record in ``src``'s file, read from
    start to end (ZODB reads each record where its index says, four calls each, in the
    ids' order: a quarter of a large commit's time); an earlier version of a record
    written again by a later savepoint is skipped."""
    file, index, end = src._file, src.index, src.position
    src._at_end = False
    file.flush()
    file.seek(0)
    read = file.read
    pos = 0
    while pos < end:
        oid = read(u64(read(8)))
        header = read(16)
        data = read(u64(header[8:]))
        if index.get(oid) == pos:
            yield oid, header[:8], data
        pos += 24 + len(oid) + len(data)  # the oid's length, serial and data's length
