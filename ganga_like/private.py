"""Files and directories only their owner can read: everything ganga_like creates in the
gangadir (the repository, its logs and state files, workspaces) is made with these.

The modes are given when a file or directory is created, so the umask can only take
bits away (``umask 000`` still gives 0600 and 0700). A file that already exists with a
wider mode (left by an older version) is narrowed when it is written again.

The Local runner keeps its own copy of the two modes (``ganga_like_runner.protocol``):
it must start without importing this package.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "copy_private",
    "make_private_dirs",
    "touch_private",
    "write_private",
]

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


def copy_private(source: str, target: str) -> None:
    """Copy the file ``source`` to ``target`` (replaced if present): a new file, never a
    link, so a job writing to its copy cannot change the user's original. Mode 0600 plus the
    owner's execute bit of the source (an input may be a script to run).

    ``os.copy_file_range`` copies inside the kernel (a reflink where the file system can
    share blocks, e.g. btrfs, XFS, NFS 4.2); a plain read/write copy is the fallback.
    The Local runner has a twin of this (``ganga_like_runner.task_files``): it must start
    without importing this package."""
    if os.path.lexists(target):
        os.unlink(target)  # a new inode: never write through an earlier link or copy
    with open(source, "rb") as src:
        mode = FILE_MODE | (os.fstat(src.fileno()).st_mode & 0o100)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        with open(fd, "wb") as dst:
            try:
                while os.copy_file_range(src.fileno(), fd, 1 << 30):
                    pass
            except OSError:  # not supported here (old kernel, across file systems, ...)
                src.seek(0)
                dst.seek(0)
                dst.truncate()
                shutil.copyfileobj(src, dst, 1 << 20)
