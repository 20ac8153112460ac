"""The FileStorage the repository opens: ZODB's, with a failed commit fully undone and its
index file private.

When writing a transaction fails (a full disk), FileStorage cuts the file back to where
the transaction began. But its file object still holds the bytes it could not write, and
cutting the file flushes them first, which fails the same way: the cut is not made, and
those bytes are written at the next seek once space is free again, leaving the rest of the
failed transaction behind the next one (a file that no longer reads to its end). Here the
file object and its unwritten bytes are dropped, and the file is cut through a fresh one.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ZODB.FileStorage import FileStorage

from ganga_like.private import touch_private

__all__ = ["RepositoryFileStorage"]


class RepositoryFileStorage(FileStorage):  # type: ignore[misc]
    def tpc_vote(self, transaction: Any) -> Any:
        try:
            return super().tpc_vote(transaction)
        except OSError:
            with self._lock:
                self._drop_unwritten()
            raise

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
