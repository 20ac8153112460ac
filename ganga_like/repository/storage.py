"""Opening the job database from a storage URI in one of the repository modes.

``embedded`` (default): a FileStorage in this process; a second process gets a one-line
error naming the holder's PID. ``readonly``: a read-only view of the same file, allowed
beside a writer. The opening code takes a URI so other storages slot in without changes
elsewhere (``file:///path/Data.fs`` today).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import unquote, urlparse

import zc.lockfile
import ZODB
from ZODB.FileStorage import FileStorage

from ganga_like.errors import RepositoryBusyError, RepositoryError

__all__ = ["MODES", "default_uri", "ensure_private_dir", "open_database"]

MODES = ("embedded", "readonly", "shared", "auto")
# Large enough that a 10,000-subjob job (3 records per subjob) stays in memory between
# transactions; the default of 400 reloads it after every commit.
CACHE_SIZE = 100_000


def default_uri(gangadir: Path) -> str:
    return (gangadir / "repository" / "Data.fs").resolve().as_uri()


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (mode 0700) or check that an existing one is usable and ours."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise RepositoryError(f"cannot create {path}: {exc.strerror}") from None
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise RepositoryError(f"{path} exists and is not a directory")
    if info.st_uid != os.getuid():
        raise RepositoryError(f"{path} belongs to another user (uid {info.st_uid}); "
                              "refusing to use it")
    if not os.access(path, os.W_OK | os.X_OK):
        raise RepositoryError(f"{path} is not writable; choose another gangadir "
                              "(GANGA_DIR=...)")


def open_database(uri: str, mode: str = "embedded") -> ZODB.DB:
    """A ZODB.DB for ``uri`` in ``mode``; clear RepositoryErrors for every failure."""
    if mode not in MODES:
        raise RepositoryError(f"unknown repository mode {mode!r}; expected one of {MODES}")
    if mode in ("shared", "auto"):
        raise RepositoryError(f"repository mode {mode!r} is not available in this version; "
                              "use 'embedded' or 'readonly'")
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise RepositoryError(f"unsupported storage URI {uri!r}: only file:// is supported")
    path = Path(unquote(parsed.path))
    ensure_private_dir(path.parent)
    read_only = mode == "readonly"
    if read_only and not path.exists():
        raise RepositoryError(f"no repository at {path} to open read-only")
    try:
        storage = FileStorage(str(path), read_only=read_only)
    except zc.lockfile.LockError:
        pid = _lock_holder(path)
        holder = f"PID {pid}" if pid else "another process"
        raise RepositoryBusyError(
            f"repository {path.parent} is in use by {holder}; close that session, or open it "
            "read-only (--Repository.mode=readonly)", pid=pid) from None
    except OSError as exc:
        raise RepositoryError(f"cannot open repository {path}: {exc.strerror}") from None
    if not read_only:
        for suffix in ("", ".index", ".lock", ".tmp"):
            candidate = Path(str(path) + suffix)
            if candidate.exists():
                candidate.chmod(0o600)
    return ZODB.DB(storage, cache_size=CACHE_SIZE, large_record_size=1 << 26)


def _lock_holder(path: Path) -> int | None:
    try:
        text = Path(str(path) + ".lock").read_text().strip()
    except OSError:
        return None
    first = text.split()[0] if text else ""
    return int(first) if first.isdigit() else None
