"""The shared-mode client cache, made to survive a full disk.

ZEO's persistent client cache writes into the gangadir.  When that disk fills up, its writes
fail with ``OSError`` - possibly in the second phase of a commit the server already made,
which would leave the session unsure of what it saved.  This subclass turns the first such
failure into a cache that is off for the rest of the session: it forgets the file (so that
the next session starts with a fresh one), answers every read with a miss, and drops every
write.  Nothing is lost: the server has all the data; reads are only slower.

Opening a persistent cache, ZEO reads the header of every record in the file to rebuild its
index: about 0.8 s for a 100 MB cache full of the records of a 100,000-subjob job, paid by
every new process (``ganga jobs``, a script) before it reads anything. So when a session
closes its cache, the records of older revisions (useful only to the session that read
them) are marked free and the index of the current ones is saved beside the file; the next
process loads that (a few ms) instead of scanning, provided the file is exactly as it was
left (size, modification time and last transaction). The saved index is deleted when it is
read, so a session that dies leaves none to be trusted.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pickle
import struct
from collections.abc import Callable
from typing import Any

from ZEO.cache import ZEC_HEADER_SIZE, ClientCache
from ZEO.cache import magic as ZEC_MAGIC

INDEX_SUFFIX = ".index"
_INDEX_VERSION = 1

__all__ = ["ResilientClientCache"]

log = logging.getLogger("ganga_like")


def _off_on_write_error(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of a cache that may be off: then, or when it fails, a miss (None)."""

    @functools.wraps(method)
    def guarded(self: ResilientClientCache, *args: Any, **kwargs: Any) -> Any:
        if self.disabled:
            return None
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self._disable(exc)
            return None

    return guarded


class ResilientClientCache(ClientCache):  # type: ignore[misc]
    """A ZEO client cache that switches itself off instead of failing a commit."""

    disabled = False

    def _disable(self, exc: OSError) -> None:
        if self.disabled:
            return
        self.disabled = True
        log.warning(
            "the repository client cache cannot be written (%s); going on without "
            "it for this session",
            exc.strerror or exc,
        )
        path = getattr(self, "path", None)
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)

    load = _off_on_write_error(ClientCache.load)
    loadBefore = _off_on_write_error(ClientCache.loadBefore)
    store = _off_on_write_error(ClientCache.store)
    invalidate = _off_on_write_error(ClientCache.invalidate)
    clear = _off_on_write_error(ClientCache.clear)

    def setLastTid(self, tid: bytes) -> None:
        if not self.disabled:
            try:
                super().setLastTid(tid)
                return
            except OSError as exc:
                self._disable(exc)
        current: bytes | None = self.getLastTid()
        if tid and (current is None or tid > current):
            self.tid = tid  # still the client's idea of where it is

    def _initfile(self, fsize: int) -> None:
        if self.path and fsize == self.maxsize and self._load_index():
            return
        try:
            super()._initfile(fsize)
        except Exception as exc:
            if not self.path:
                raise
            # ZEO would move the file aside (keeping up to 100 MB of a cache nobody reads
            # again) and say so on the session's terminal; it is only a cache.
            log.info(
                "the repository client cache %s could not be read (%s): started afresh",
                self.path,
                type(exc).__name__,
            )
            self.f.seek(0)
            self.f.truncate()
            self.f.write(ZEC_MAGIC + b"\0" * 8)
            super()._initfile(ZEC_HEADER_SIZE)

    def _load_index(self) -> bool:
        """The index saved when the file was last closed, if it still describes it."""
        index_path = self.path + INDEX_SUFFIX
        try:
            with open(index_path, "rb") as handle:
                os.unlink(index_path)
                saved = pickle.load(handle)
            st = os.stat(self.path)
            self.f.seek(4)
            tid = self.f.read(8)
        except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError):
            return False
        if not isinstance(saved, dict) or saved.get("version") != _INDEX_VERSION:
            return False
        if (saved["size"], saved["mtime_ns"], saved["tid"], saved["maxsize"]) != (
            st.st_size,
            st.st_mtime_ns,
            tid,
            self.maxsize,
        ):
            return False
        self.tid = tid
        self.current = saved["current"]
        self.currentofs = saved["currentofs"]
        self._len = len(self.current)
        return True

    def _save_index(self) -> None:
        """Free the records of older revisions and save the index of the current ones."""
        f = self.f
        for by_tid in self.noncurrent.values():
            for _tid, ofs in by_tid.items():
                f.seek(ofs + 1)
                (size,) = struct.unpack(">I", f.read(4))
                f.seek(ofs)
                f.write(b"f" + struct.pack(">I", size))
                self._len -= 1
        self.noncurrent.clear()
        f.flush()
        os.fsync(f.fileno())
        st = os.stat(self.path)
        f.seek(4)
        saved = {
            "version": _INDEX_VERSION,
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "tid": f.read(8),
            "maxsize": self.maxsize,
            "currentofs": self.currentofs,
            "current": self.current,
        }
        temporary = f"{self.path}{INDEX_SUFFIX}.tmp"
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            pickle.dump(saved, out, protocol=5)
        os.replace(temporary, self.path + INDEX_SUFFIX)

    def close(self) -> None:
        if self.path and not self.disabled and getattr(self, "f", None) is not None:
            with self._lock:
                try:
                    self._save_index()
                except OSError:  # a full disk: the next process scans the file
                    with contextlib.suppress(OSError):
                        os.unlink(self.path + INDEX_SUFFIX)
        try:
            super().close()
        except OSError as exc:
            self._disable(exc)
            handle = getattr(self, "f", None)
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()
            lock = getattr(self, "_lock_file", None)
            if lock is not None:
                lock.close()
