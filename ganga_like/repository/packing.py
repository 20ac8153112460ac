"""Automatic packing: the append-only repository file is compacted when it grew large.

FileStorage appends every commit (each monitor cycle, each GPI action) and never rewrites;
packing copies the current records, plus the history of the last ``keep_days`` days, into
a new file and drops the rest (old states and removed jobs). It runs in a background
thread when the repository is opened, by whichever process owns the file (an embedded
session, or the shared-mode server); FileStorage lets commits go on meanwhile.

When: the file is at least ``threshold_mb`` large and has grown by half since the last
pack (``pack.json`` remembers its size then), so a repository whose live data alone is
over the threshold is not packed again at every start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganga_like.private import touch_private, write_private

__all__ = ["STATE_NAME", "PackPolicy", "maybe_pack_in_background", "pack_due", "pack_now"]

log = logging.getLogger("ganga_like")

STATE_NAME = "pack.json"
GROWTH = 1.5


@dataclass(frozen=True)
class PackPolicy:
    threshold_mb: float = 256.0  # 0: never pack automatically
    keep_days: float = 7.0


def pack_due(path: Path, policy: PackPolicy) -> bool:
    if policy.threshold_mb <= 0:
        return False
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    if size < policy.threshold_mb * 1024 * 1024:
        return False
    after = _state(path).get("size_after")
    return not isinstance(after, int) or size >= GROWTH * after


def pack_privately(storage: Any, path: Path, stop: float) -> None:
    """``storage.pack`` with its copy (``Data.fs.pack``) created 0600: FileStorage would
    create it with the umask's mode, and it holds every current record."""
    from ZODB.serialize import referencesf

    packed = Path(f"{path}.pack")
    touch_private(packed)
    try:
        storage.pack(stop, referencesf)
    finally:
        # Nothing to pack: FileStorage never opened the copy; do not leave it behind.
        with contextlib.suppress(FileNotFoundError):
            if path.exists() and packed.stat().st_size == 0:
                packed.unlink()


def pack_now(storage: Any, path: Path, keep_days: float) -> dict[str, Any]:
    """Pack ``storage`` (the FileStorage of ``path``) keeping ``keep_days`` of history."""
    before = path.stat().st_size
    started = time.perf_counter()
    pack_privately(storage, path, time.time() - keep_days * 86400)
    record = {
        "time": time.time(),
        "size_before": before,
        "size_after": path.stat().st_size,
        "seconds": round(time.perf_counter() - started, 3),
        "keep_days": keep_days,
    }
    for suffix in ("", ".index"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", 0o600)
    tmp = path.with_name(f".{STATE_NAME}.{os.getpid()}")
    write_private(tmp, json.dumps(record).encode())
    os.replace(tmp, path.with_name(STATE_NAME))
    return record


def maybe_pack_in_background(
    storage: Any, path: Path, policy: PackPolicy
) -> threading.Thread | None:
    """Start packing in a thread if it is due; the caller joins it before closing."""
    if not pack_due(path, policy):
        return None

    def run() -> None:
        try:
            record = pack_now(storage, path, policy.keep_days)
        except Exception as exc:  # packing is housekeeping: never take the session down
            log.warning(
                "repository %s: automatic packing failed: %s: %s",
                path.parent,
                type(exc).__name__,
                exc,
            )
            return
        log.info(
            "repository %s packed: %.1f MB -> %.1f MB in %.1f s (history of the last %g days kept)",
            path.parent,
            record["size_before"] / 2**20,
            record["size_after"] / 2**20,
            record["seconds"],
            policy.keep_days,
        )

    thread = threading.Thread(target=run, name="ganga-pack", daemon=True)
    thread.start()
    return thread


def finish_interrupted_pack(path: Path) -> bool:
    """A crash between FileStorage's two renames at the end of a pack leaves no Data.fs
    but a complete ``Data.fs.pack``: put it in place (True) instead of starting empty."""
    packed = Path(f"{path}.pack")
    if path.exists() or not packed.exists() or not Path(f"{path}.old").exists():
        return False
    os.replace(packed, path)
    Path(f"{path}.index").unlink(missing_ok=True)
    log.warning("repository %s: finished a pack that a crash interrupted", path.parent)
    return True


def _state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.with_name(STATE_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
