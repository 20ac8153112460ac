"""Which committed state a FileStorage file holds, told from its last bytes alone.

FileStorage only ever appends: a commit writes its transaction at the end, flagged "being
committed" (``c``) until the last step flips the flag in place; an abandoned commit is cut
off again; a pack writes a new file and renames it over the old one. Each transaction ends
with its own length, so the header of the last one is found from the end of the file in
two reads. So a file whose inode and size are unchanged and whose last transaction is the
same finished one holds the same committed state, and that is all
:func:`file_stamp` records (with the modification time, for good measure).

Importing this module imports no ZODB (the jobs-table cache checks its stamp before
anything heavy is loaded); the format constants are ZODB's, checked by a test.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["FINISHED", "MAGIC", "TRANS_HDR", "TRANS_HDR_LEN", "FileStamp", "file_stamp", "tail"]

MAGIC = b"FS30"  # ZODB.FileStorage.FileStorage.packed_version
TRANS_HDR = ">8sQcHHH"  # ZODB.FileStorage.format: tid, length, status, user/desc/ext lengths
TRANS_HDR_LEN = 23
FINISHED = b" pu"  # committed, packed, undone: every status a finished transaction has
_TRAILER = 8  # each transaction ends with its length again, as 8 bytes


def tail(f: BinaryIO, size: int) -> tuple[bytes, bytes] | None:
    """(tid, status) of the transaction whose trailer ends ``f`` (``size`` bytes long), or
    None when the end of the file is not the end of a transaction (an empty repository,
    a commit being written, a cut or damaged end)."""
    if size < len(MAGIC) + TRANS_HDR_LEN + _TRAILER:
        return None
    f.seek(size - _TRAILER)
    (length,) = struct.unpack(">Q", f.read(_TRAILER))
    start = size - _TRAILER - length
    if length < TRANS_HDR_LEN or start < len(MAGIC):
        return None
    f.seek(start)
    tid, recorded, status, *_ = struct.unpack(TRANS_HDR, f.read(TRANS_HDR_LEN))
    return (tid, status) if recorded == length else None


@dataclass(frozen=True)
class FileStamp:
    """The identity of a repository file's committed state."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int
    tid: str  # the last transaction's id, in hex

    def as_list(self) -> list[object]:
        return [self.path, self.device, self.inode, self.size, self.mtime_ns, self.tid]


def file_stamp(path: Path) -> FileStamp | None:
    """The stamp of ``path`` now; None unless it is a FileStorage file whose last
    transaction is finished (no commit half written at its end)."""
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())  # the file read below, even if renamed meanwhile
            if f.read(len(MAGIC)) != MAGIC:
                return None
            last = tail(f, info.st_size)
    except (OSError, struct.error):
        return None
    if last is None or last[1] not in FINISHED:
        return None
    return FileStamp(
        str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, last[0].hex()
    )
