"""The FileStorage the repository opens: ZODB's, with a failed commit fully undone and its
index file private.

When writing a transaction fails (a full disk), FileStorage cuts the file back to where
the transaction began. But its file object still holds the bytes it could not write, and
cutting the file flushes them first, which fails the same way: the cut is not made, and
those bytes are written at the next seek once space is free again, leaving the rest of the
failed transaction behind the next one (a file that no longer reads to its end). Here the
file object and its unwritten bytes are dropped, and the file is cut through a fresh one.

The temporary file the transaction was first written to is on the same disk and keeps its
largest size: after a failed write it is emptied (a fresh file object, whose unwritten
bytes go with the old one), so that a small commit - the rollback of what failed - fits
again. The shared server's file storage is this one too: without it the server's abort
failed the same way, left the client's transaction open, and the client's next
transaction was refused and its connection dropped.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ZODB.FileStorage import FileStorage
from ZODB.FileStorage.FileStorage import FileIterator
from ZODB.utils import u64

from ganga_like.private import touch_private

__all__ = ["INVALIDATIONS_READ_MAX", "RepositoryFileStorage"]

# Bytes of recent transactions the shared server reads at its start (see lastInvalidations).
INVALIDATIONS_READ_MAX = 16 << 20


class RepositoryFileStorage(FileStorage):  # type: ignore[misc]
    _write_failed = False

    def lastInvalidations(self, count: int) -> list[tuple[bytes, list[bytes]]]:
        """The oids of the last ``count`` transactions, which ZEO's server reads when it
        starts (to tell a returning session what changed while it was away), stopping at
        ``INVALIDATIONS_READ_MAX`` bytes: after a submission of 1,000,000 subjobs reading
        its 2,000,000 records took 2.3 s of every server start. A session whose cache is
        older than the transactions read starts with an empty cache, as after any change
        too large to list."""
        file = self._file
        with self._lock:
            pos = self._pos
            room = INVALIDATIONS_READ_MAX
            while count > 0 and pos > 4:
                file.seek(pos - 8)
                length = u64(file.read(8))
                if length > room:
                    break
                room -= length
                count -= 1
                pos = pos - 8 - length
            file.seek(0)
            return [
                (trans.tid, [record.oid for record in trans])
                for trans in FileIterator(self._file_name, pos=pos)
            ]

    def store(
        self, oid: bytes, oldserial: bytes, data: bytes, version: str, transaction: Any
    ) -> Any:
        try:
            return super().store(oid, oldserial, data, version, transaction)
        except OSError:
            self._write_failed = True  # into the temporary file
            raise

    def tpc_vote(self, transaction: Any) -> Any:
        try:
            return super().tpc_vote(transaction)
        except OSError:
            with self._lock:
                self._drop_unwritten()
                self._write_failed = True
            raise

    def _clear_temp(self) -> None:
        # Between transactions (under the storage's lock).
        self._tindex.clear()
        if self._tfile is None:
            return
        if self._write_failed:
            self._write_failed = False
            self._renew_temporary_file()
            return
        try:
            self._tfile.seek(0)  # flushes what it still buffers
        except OSError:
            self._renew_temporary_file()

    def _renew_temporary_file(self) -> None:
        """An empty temporary file: the space the failed transaction took is given back."""
        from ZODB.FileStorage.FileStorage import TempFormatter

        stale: Any = getattr(self, "_tfile")  # noqa: B009 - untyped in ZODB
        with contextlib.suppress(OSError):
            stale.close()  # its flush may fail again; the unwritten bytes go with it
        self._tfile = open(self._file_name + ".tmp", "w+b")  # noqa: SIM115 - truncated, kept open
        self._tfmt = TempFormatter(self._tfile)

    def _drop_unwritten(self) -> None:
        stale: Any = getattr(self, "_file")  # noqa: B009 - untyped in ZODB
        self._file = open(self._file_name, "r+b")  # noqa: SIM115 - kept open like FileStorage's
        with contextlib.suppress(OSError):
            stale.close()  # its flush fails again; the unwritten bytes go with it
        self._file.truncate(self._pos)
        self._files.flush()

    def _save_index(self) -> None:
        # The index file is rewritten at each close and pack; FileStorage would create it
        # with the umask's mode.
        if not self._is_read_only:
            touch_private(self.__name__ + ".index.index_tmp")
        super()._save_index()
