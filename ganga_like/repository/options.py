"""How a repository is served and kept, and its private directories.

Shared by the opening code (:mod:`ganga_like.repository.storage`) and the shared-mode
client and server (:mod:`ganga_like.repository.zeo.shared`), which import nothing of each
other's through here.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ganga_like.errors import RepositoryError

__all__ = ["MAX_SOCKET_PATH", "StorageOptions", "ensure_private_dir", "socket_path"]


@dataclass(frozen=True)
class StorageOptions:
    """How a repository is served and kept (filled from ``Settings``)."""

    # "" serves shared mode on a Unix socket inside the gangadir (owner only); "HOST:PORT"
    # listens on TCP instead. Never set by default: nothing listens on the network.
    address: str = ""
    # Seconds the shared server stays up with no client before it exits.
    idle_exit: float = 60.0
    # Size of each session's persistent ZEO client cache, in MB.
    cache_mb: float = 100.0
    # Automatic packing when the file is opened: at this size (MB; 0: never) ...
    pack_threshold_mb: float = 256.0
    # ... keeping this many days of history (undo information).
    pack_keep_days: float = 7.0
    # Seconds to wait for a shared server to start or answer.
    connect_timeout: float = 30.0
    # A client that keeps nothing alive (the jobs-table server): the shared server does
    # not count it as a session (it leaves when idle, or for maintenance, with it
    # connected), and nothing restarts the server when it is gone.
    follower: bool = False


def ensure_private_dir(path: Path, read_only: bool = False) -> None:
    """Create ``path`` (mode 0700) or check that an existing one is usable and ours.

    ``read_only``: only looked at (a read-only view of an archived gangadir, on a
    read-only filesystem perhaps): it must exist and be readable, and is never created."""
    try:
        if read_only:
            info = path.stat()
        else:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = path.stat()
    except FileNotFoundError:
        raise RepositoryError(f"no repository at {path} to open read-only") from None
    except OSError as exc:
        raise RepositoryError(
            f"cannot {'read' if read_only else 'create'} {path}: {exc.strerror}"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise RepositoryError(f"{path} exists and is not a directory")
    if info.st_uid != os.getuid():
        raise RepositoryError(
            f"{path} belongs to another user (uid {info.st_uid}); refusing to use it"
        )
    if read_only and not os.access(path, os.R_OK | os.X_OK):
        raise RepositoryError(f"{path} cannot be read; choose another gangadir (GANGA_DIR=...)")
    if not read_only and not os.access(path, os.W_OK | os.X_OK):
        raise RepositoryError(
            f"{path} is not writable; choose another gangadir (GANGA_DIR=...), or look at "
            "this one read-only (--Repository.mode=readonly)"
        )


# A Unix socket path must fit in sockaddr_un.sun_path (108 bytes on Linux).
MAX_SOCKET_PATH = 100


def socket_path(repo_dir: Path, name: str, short_suffix: str) -> Path:
    """Where a server of ``repo_dir`` listens on a Unix socket: ``name`` in it, or, when
    that path is too long for a socket, a name derived from the directory (ending in
    ``short_suffix``) in a private directory of ours under the temporary directory."""
    path = repo_dir / name
    if len(str(path).encode()) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(repo_dir.resolve()).encode()).hexdigest()[:20]
    short_dir = Path(tempfile.gettempdir()) / f"ganga-{os.getuid()}"
    ensure_private_dir(short_dir)
    return short_dir / f"{digest}{short_suffix}"
