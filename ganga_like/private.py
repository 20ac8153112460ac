"""Files and directories only their owner can read: everything ganga_like creates in the
gangadir (the repository, its logs and state files, workspaces) is made with these.

The modes are given when a file or directory is created, so the umask can only take
bits away (``umask 000`` still gives 0600 and 0700). A file that already exists with a
wider mode (left by an older version) is narrowed when it is written again.

The Local runner keeps its own copy of the two modes (``ganga_like_local.runner_client``):
it must start without importing this package.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "make_private_dirs", "touch_private", "write_private"]

FILE_MODE = 0o600
DIR_MODE = 0o700


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and any missing parents, each 0700 (``os.makedirs`` gives parents
    the default 0777 less the umask)."""
    path = Path(path)
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise


def touch_private(path: str | os.PathLike[str]) -> None:
    """Make sure ``path`` exists, created 0600 (for files a library then opens itself,
    such as lock files, which it would create with the umask's mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    os.close(fd)


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` (created or replaced in place), mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)
