"""Quick checks of the repository file, and the one-line error that says it is damaged.

Opening the repository calls :func:`check_file` before FileStorage reads the file (a cut or
overwritten end would otherwise be dropped by FileStorage without a word); every layer that
finds damage raises :func:`corrupt`'s error. The full check and recovery live in
:mod:`ganga_like.repository.checks.integrity`.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import struct
from pathlib import Path
from typing import Any

from ZODB.FileStorage.FileStorage import packed_version as MAGIC
from ZODB.FileStorage.format import TRANS_HDR, TRANS_HDR_LEN

from ganga_like.errors import RepositoryCorruptError
from ganga_like.repository.file_tail import FINISHED, tail

__all__ = ["check_file", "corrupt", "data_path", "describe", "zodb_log_captured"]

_COMMITTED = FINISHED
_TRAILER = 8  # each transaction ends with its length again, as 8 bytes


def data_path(gangadir: Path) -> Path:
    return gangadir / "repository" / "Data.fs"


def corrupt(path: Path, detail: str) -> RepositoryCorruptError:
    """The one-line error for a damaged repository file."""
    gangadir = path.parent.parent
    return RepositoryCorruptError(
        f"repository {path} is damaged: {detail}. Nothing was changed. To keep everything "
        f"that is intact run `ganga repository recover` (or python -m "
        f"ganga_like.runtime.repository_check recover {gangadir}); the damaged file is kept "
        "as a backup",
        path=str(path),
    )


# -- the check before opening ---------------------------------------------------------


def check_file(path: Path) -> str | None:
    """Refuse a damaged file; return a note when a crash left an unfinished commit.

    Cheap after a clean close: the header, the length recorded in the index and the last
    transaction are read. Otherwise (after a crash, or without an index) FileStorage will
    scan the file and cut it at the first record it cannot read, so the same scan is done
    first, read-only, to tell an unfinished commit (safe to drop) from damage (refused).
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None
    with open(path, "rb") as f:
        if size < len(MAGIC) or f.read(len(MAGIC)) != MAGIC:
            raise corrupt(
                path, "it does not start like a repository file (FileStorage header missing)"
            )
        if size == len(MAGIC):
            return None
        indexed = _index_position(path)
        if indexed is not None and indexed > size:
            raise corrupt(
                path,
                f"it is {indexed - size} bytes shorter than when it was last closed (truncated)",
            )
        if indexed == size and _last_transaction_complete(f, size):
            return None
    return _classify_unfinished_end(path, size)


def _index_position(path: Path) -> int | None:
    """The file length recorded in ``Data.fs.index`` (its first pickle), if readable."""
    try:
        with open(f"{path}.index", "rb") as f:
            pos = pickle.Unpickler(f).load()
    except Exception:  # a missing or broken index is rebuilt by FileStorage: no verdict
        return None
    return pos if isinstance(pos, int) else None


def _last_transaction_complete(f: Any, size: int) -> bool:
    last = tail(f, size)
    return last is not None and last[1] in _COMMITTED


def _classify_unfinished_end(path: Path, size: int) -> str | None:
    """Scan read-only: where do the complete transactions end, and what follows?"""
    from ZODB.FileStorage import FileStorage

    try:
        with zodb_log_captured() as messages:
            storage = FileStorage(str(path), read_only=True)
    except Exception as exc:  # any failure to read the file is damage: say what it was
        raise corrupt(path, describe(exc)) from None
    end = storage._pos
    storage.close()
    if end >= size:
        return None  # every transaction is complete
    with open(path, "rb") as f:
        f.seek(end)
        header = f.read(TRANS_HDR_LEN)
    if len(header) < TRANS_HDR_LEN or _unfinished_commit(header, end, size):
        return (
            f"the last commit was interrupted by a crash and never completed; its "
            f"{size - end} bytes are discarded (kept in {path.name}.trN)"
        )
    detail = "; ".join(m for m in messages if "Ignoring index" not in m)
    raise corrupt(
        path,
        f"the transaction at byte {end} cannot be read ({size - end} bytes "
        f"from there on would be lost){': ' + detail if detail else ''}",
    )


def _unfinished_commit(header: bytes, pos: int, size: int) -> bool:
    """A transaction still flagged "being committed" that reaches the end of the file:
    what a crash during a commit leaves (the flag is cleared only once all is written)."""
    _tid, length, status, *_ = struct.unpack(TRANS_HDR, header)
    return bool(status == b"c" and pos + length + _TRAILER >= size)


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextlib.contextmanager
def zodb_log_captured() -> Any:
    """Collect what FileStorage logs while scanning, instead of printing it."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                messages.append(record.getMessage())

    logger = logging.getLogger("ZODB.FileStorage")
    handler = Collect()
    previous = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = previous
