"""The shared-mode client storage: ZEO's ClientStorage, quicker at what sessions do most.

What it changes, and why (figures in docs/performance.md, "Sessions"):

- **Spare object ids are dropped when the server goes away.** A server that was killed
  forgets which ids it gave out beyond the last commit and its successor gives them out
  again: two sessions would create different objects under one id.
- **Ids come in growing batches** (100, 200, ... up to ``MAX_OID_BATCH``, which our server
  allows; another ZEO server caps them at 100): a 10,000-subjob submission creates 21,000
  objects, 210 round trips at 100.
- **Records go to the server ``STORE_BATCH`` at a time, in one message each**
  (``storeb``), while the transaction is still being written, so that the server has
  them when the vote comes, and decodes one message instead of hundreds.
- **The transaction buffer stays in memory** (up to ``MEMORY_BUFFER`` bytes): ZEO pickles
  every record into a temporary file only to read it back after the commit, to refresh
  the client cache.
- **A commit whose only participant is this storage takes one round trip** (``vote_finish``):
  the server votes and, when the vote succeeds, finishes at once. Two-phase commit needs
  the vote and the finish to be separate only when another participant could still fail
  between them; with one participant it cannot. What the finish does on this side
  (refresh the cache, move ``lastTransaction``, tell the other connections of this
  process) is done as the answer arrives, before any later message of the server, as
  ZEO does it for its own finish.
- **Other connections of this process hear only of records that existed before** the
  commit, not of new ones (which they cannot have): a million-subjob submission told each
  of them of two million records.
- **Records another session changed are fetched again at once** when this session had
  them (for changes of at most ``PREFETCH_MAX`` records): a status change made by the
  monitor is read from the cache by the next cell instead of in a round trip.

The server side of ``storeb`` and ``vote_finish`` is :mod:`ganga_like.repository.zeo.server`;
a server that does not offer them (``FEATURES`` in its info) gets ZEO's own messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "FEATURES",
    "MAX_OID_BATCH",
    "MemoryTransactionBuffer",
    "client_storage_class",
]

# New object ids asked of the server at a time, at most.
MAX_OID_BATCH = 3200
# Records sent to the server in one message.
STORE_BATCH = 512
# Bytes of a transaction's records kept in memory before the rest goes to a temporary file
# (a 100,000-subjob submission writes 45 MB: kept whole, that was a third of its memory).
MEMORY_BUFFER = 8 << 20
# Changes of at most this many records are fetched again by the sessions that had them.
PREFETCH_MAX = 64
# The key in the server's info that names what it offers beyond ZEO's protocol.
FEATURES = "ganga_like_features"
STORE_BATCHES = "storeb"
VOTE_FINISH = "vote_finish"


class MemoryTransactionBuffer:
    """ZEO's TransactionBuffer (the records of the transaction being committed, for the
    cache refresh at its end), kept in memory until it grows past ``MEMORY_BUFFER``."""

    def __init__(self, connection_generation: int) -> None:
        self.connection_generation = connection_generation
        self.records: list[tuple[bytes, bytes | None]] = []
        self.spilled: Any = None  # ZEO's file-backed buffer, once this one grew too big
        self.count = 0
        self.size = 0
        self.blobs: list[tuple[bytes, str]] = []
        self.server_resolved: set[bytes] = set()
        self.client_resolved: dict[bytes, int] = {}
        self.exception: BaseException | None = None
        self.committed_tid: bytes | None = None  # set when the vote also finished it

    def close(self) -> None:
        self.records = []
        if self.spilled is not None:
            self.spilled.close()

    def store(self, oid: bytes, data: bytes | None) -> None:
        self.count += 1
        self.size += (len(data) if data else 0) + 31
        if self.spilled is not None:
            self.spilled.pickler.dump((oid, data))
            return
        self.records.append((oid, data))
        if self.size > MEMORY_BUFFER:
            self._spill()

    def _spill(self) -> None:
        from ZEO.TransactionBuffer import TransactionBuffer

        spilled = TransactionBuffer(self.connection_generation)
        for record in self.records:
            spilled.pickler.dump(record)
        self.records = []
        self.spilled = spilled

    def resolve(self, oid: bytes, data: bytes) -> None:
        self.store(oid, data)
        self.client_resolved[oid] = self.count - 1

    def server_resolve(self, oid: bytes) -> None:
        self.server_resolved.add(oid)

    def storeBlob(self, oid: bytes, blobfilename: str) -> None:
        self.blobs.append((oid, blobfilename))

    def __iter__(self) -> Iterator[tuple[bytes, bytes | None, bool]]:
        """(oid, data, resolved by the server) for each record, as ZEO's buffer gives
        them: a record resolved on this side replaces the one first stored."""
        if self.spilled is not None:
            self.spilled.count = self.count
            self.spilled.server_resolved = self.server_resolved
            self.spilled.client_resolved = self.client_resolved
            yield from self.spilled
            return
        server_resolved = self.server_resolved
        client_resolved = self.client_resolved
        seen = set()
        for i, (oid, data) in enumerate(self.records):
            if client_resolved.get(oid, i) == i:
                seen.add(oid)
                yield oid, data, oid in server_resolved
        for oid in server_resolved:  # undo can name records that were not stored
            if oid not in seen:
                yield oid, None, True


def _refresh_after_commit(
    client: Any, tid: bytes, tbuf: MemoryTransactionBuffer, announce: Callable[[bytes], None]
) -> None:
    """What ZEO's tpc_finish does on this side once the server committed ``tid``: the
    committed records go into the cache, then ``lastTransaction`` moves and the other
    connections of this process hear of the change, together (ZODB >= 5.6 wants the
    second only after the first).

    Records are stored until they fill half the cache: a commit larger than that (a
    submission of a million subjobs writes 900 MB) would only evict its own records again,
    at the cost of writing them all (minutes). The rest are only invalidated."""
    cache = client.cache
    room = cache.maxsize // 2
    for oid, data, resolved in tbuf:
        cache.invalidate(oid, tid)
        if data and not resolved and room > 0:
            cache.store(oid, tid, None, data)
            room -= len(data)
    with cache._lock:
        cache.setLastTid(tid)
        announce(tid)


async def _vote_finish_co(
    client: Any, txn_id: int, tbuf: MemoryTransactionBuffer, announce: Callable[[bytes], None]
) -> list[bytes]:
    """Run in the I/O thread: vote and finish in one round trip; the refresh runs as the
    answer arrives (ZEO's futures call back at once), before any later message."""
    from ZEO.Exceptions import ClientDisconnected

    if not client.operational:
        raise ClientDisconnected()
    answer = await client.protocol.server_call(VOTE_FINISH, txn_id)
    if answer is None:  # the server saw this client leave meanwhile
        raise ClientDisconnected("disconnected while voting")
    resolved, tid = answer
    for oid in resolved:
        tbuf.server_resolve(oid)
    try:
        _refresh_after_commit(client, tid, tbuf, announce)
    except Exception:
        # As ZEO does after a failed finish: a cache in an unknown state is revalidated
        # by connecting again.
        client.protocol.close()
        client.disconnected(client.protocol)
        raise
    tbuf.committed_tid = tid
    return list(resolved)


_client_class: Any = None


def client_storage_class() -> Any:
    """The ClientStorage subclass described above (built on first use: ZEO is imported
    only by sessions in shared mode)."""
    global _client_class
    if _client_class is None:
        _client_class = _build()
    return _client_class


def _build() -> Any:
    """ZEO's ClientStorage with what this module adds (see its docstring); the steps that
    need nothing of ZEO's own class are the functions below it."""
    from ZEO.ClientStorage import ClientStorage

    class SessionClientStorage(ClientStorage):  # type: ignore[misc]
        _oid_batch = 100
        _pending: list[tuple[bytes, bytes, bytes]] | None = None
        _pending_txn = 0
        _features: frozenset[str] = frozenset()
        # txn id -> the MVCC adapter instance committing it alone (see commit_at_vote)
        _sole: dict[int, Any]
        # The ids stored by the transaction being committed that are not new records.
        _existing: set[bytes]

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._sole = {}
            super().__init__(*args, **kwargs)
            _fetch_again_what_others_change(self)

        def notify_connected(self, conn: Any, info: dict[str, Any]) -> None:
            self._features = frozenset(info.get(FEATURES, ()))
            super().notify_connected(conn, info)

        def notify_disconnected(self) -> None:
            del self._oids[:]
            super().notify_disconnected()

        def new_oid(self) -> bytes:
            if self._is_read_only:
                super().new_oid()  # raises ReadOnlyError
            while not self._oids:
                fresh = self._call("new_oids", self._oid_batch)
                self._oid_batch = min(MAX_OID_BATCH, self._oid_batch * 2)
                self._oids[:0] = reversed(fresh)
            oid: bytes = self._oids.pop()
            return oid

        # -- a transaction ---------------------------------------------------------

        tpc_begin = _begin_in_memory
        store = _store_in_batches
        _send_stores = _send_kept_stores
        commit_at_vote = _commit_at_vote

        def checkCurrentSerialInTransaction(self, oid: bytes, serial: bytes, txn: Any) -> None:
            self._send_stores()
            super().checkCurrentSerialInTransaction(oid, serial, txn)

        def deleteObject(self, oid: bytes, serial: bytes, txn: Any) -> None:
            self._send_stores()
            self._existing.add(oid)
            super().deleteObject(oid, serial, txn)

        def storeBlob(self, *args: Any, **kwargs: Any) -> Any:
            self._send_stores()
            return super().storeBlob(*args, **kwargs)

        def tpc_vote(self, txn: Any) -> Any:
            self._send_stores()
            instance = self._sole.pop(id(txn), None)
            if instance is None or VOTE_FINISH not in self._features:
                return super().tpc_vote(txn)
            return _vote_and_finish(self, txn, instance)

        def tpc_finish(self, txn: Any, f: Callable[[bytes], None] = lambda tid: None) -> Any:
            try:
                tbuf = txn.data(self)
            except KeyError:
                tbuf = None
            if getattr(tbuf, "committed_tid", None) is None:
                return super().tpc_finish(txn, f)
            return _finish_committed(self, txn, f, tbuf)

        def tpc_abort(self, txn: Any, timeout: float | None = None) -> None:
            self._pending = None  # never sent: the server has nothing of them
            self._sole.pop(id(txn), None)
            super().tpc_abort(txn, timeout)

    return SessionClientStorage


def _begin_in_memory(storage: Any, txn: Any, tid: bytes | None = None, status: str = " ") -> None:
    """``SessionClientStorage.tpc_begin``: ZEO's, with the buffer in memory."""
    from ZEO.Exceptions import ClientDisconnected
    from ZODB import POSException

    if storage._is_read_only:
        raise POSException.ReadOnlyError()
    try:
        tbuf = txn.data(storage)
    except AttributeError:  # a recovery transaction (ZEO's workaround)
        table: dict[Any, Any] = {}
        txn.data = table.__getitem__
        txn.set_data = table.__setitem__
    except KeyError:
        pass
    else:
        if tbuf is not None:
            raise POSException.StorageTransactionError(
                "Duplicate tpc_begin calls for same transaction"
            )
    txn.set_data(storage, MemoryTransactionBuffer(storage._connection_generation))
    storage._commit_lock.acquire()
    storage._tbuf = txn.data(storage)
    storage._existing = set()
    try:
        storage._async("tpc_begin", id(txn), txn.user, txn.description, txn.extension, tid, status)
    except ClientDisconnected:
        storage.tpc_end(txn)
        raise


def _store_in_batches(
    storage: Any, oid: bytes, serial: bytes, data: bytes, version: str, txn: Any
) -> None:
    """``SessionClientStorage.store``: kept to be sent STORE_BATCH records at a time."""
    from ZODB.utils import z64

    assert not version
    tbuf = storage._check_trans(txn, "store")
    if storage._pending is None:
        storage._pending = []
        storage._pending_txn = id(txn)
    storage._pending.append((oid, serial, data))
    tbuf.store(oid, data)
    if serial != z64:  # a record that existed before (a new one's serial is zero)
        storage._existing.add(oid)
    if len(storage._pending) >= STORE_BATCH:
        storage._send_stores()


def _send_kept_stores(storage: Any) -> None:
    """The records kept by ``store``, sent: in one call to a server that takes batches."""
    pending, storage._pending = storage._pending, None
    if not pending:
        return
    if STORE_BATCHES in storage._features:
        storage._async(STORE_BATCHES, pending, storage._pending_txn)
    else:
        for oid, serial, data in pending:
            storage._async("storea", oid, serial, data, storage._pending_txn)


def _commit_at_vote(storage: Any, txn: Any, instance: Any) -> None:
    """Called by the connection before its vote when it is the transaction's only
    participant: the vote may finish the commit too. ``instance`` is its MVCC adapter
    instance, whose finish tells the other connections."""
    storage._sole[id(txn)] = instance


def _vote_and_finish(storage: Any, txn: Any, instance: Any) -> Any:
    """``tpc_vote`` of a transaction with one participant, on a server that finishes it
    in the same call: the vote's answer is the commit's."""
    from ZODB import POSException

    tbuf = storage._check_trans(txn, "tpc_vote")
    # Other connections of this process are told only of the records that existed
    # before: they cannot have the new ones, and a submission of a million subjobs
    # creates two million (a set of them each, 100 MB).
    instance._modified = modified = storage._existing

    def announce(tid: bytes) -> None:
        # What the instance's own finish would do (ZODB.mvccadapter).
        instance._base._invalidate_finish(tid, modified, instance)
        instance._ltid = tid

    try:
        resolved = storage._server.io_call(
            _vote_finish_co(storage._server.client, id(txn), tbuf, announce)
        )
    except POSException.StorageTransactionError:
        storage._check_trans(txn, "tpc_vote")  # a reconnection in between: say so
        raise
    except POSException.ConflictError as err:
        oid = getattr(err, "oid", None)
        if oid is not None:  # as ZEO: a stale cache entry is the likely cause
            storage._cache.invalidate(oid, None)
        raise
    return resolved or None


def _finish_committed(storage: Any, txn: Any, f: Callable[[bytes], None], tbuf: Any) -> Any:
    """``tpc_finish`` of a transaction the vote already committed."""
    tid = tbuf.committed_tid
    try:
        # Already committed and announced when the vote's answer came; the instance's
        # callback repeats the announcement, which changes nothing.
        f(tid)
    finally:
        storage.tpc_end(txn)
        storage._iterator_gc()
    storage._update_blob_cache(tbuf, tid)
    return tid


def _fetch_again_what_others_change(storage: Any) -> None:
    """Wrap the I/O side's handling of the server's invalidations: the records this
    session had in its cache are asked for again at once, so the next read finds them
    (or finds the answer already on its way)."""
    from ZODB.utils import p64, u64

    client = storage._server.client
    cache = storage._cache
    invalidate = client.invalidateTransaction

    def invalidate_and_fetch(tid: bytes, oids: list[bytes]) -> None:
        wanted = [oid for oid in oids if oid in cache.current] if len(oids) <= PREFETCH_MAX else []
        invalidate(tid, oids)
        protocol = client.protocol
        if not wanted or protocol is None or not client.operational:
            return
        # The key a connection's next load uses: its snapshot is this tid.
        before = p64(u64(tid) + 1)
        for oid in wanted:
            protocol.load_before(oid, before).add_done_callback(_quiet)

    client.invalidateTransaction = invalidate_and_fetch


def _quiet(future: Any) -> None:
    """A prefetch that failed (the server went away) is not an error: the read that
    needs the record asks again."""
    if future.exception() is not None:
        return
