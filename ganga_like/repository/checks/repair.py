"""Repairs made by recovery after ``fsrecover`` kept the intact transactions.

``fsrecover`` works on the file's structure: a record whose bytes were changed inside its
data (a flipped byte in a pickle) is copied as it is and still cannot be read. Here:

* each object whose current record cannot be read is put back to its newest revision
  that can (written as a new transaction, so the damaged revision stays in the file's
  history and in the backup);
* when damaged revisions remain (older ones, or of jobs taken out), the file is packed
  to the present, dropping them with the rest of the history (kept in the backup);
* a root record with no readable revision that holds the registry is rebuilt from the
  tables found in the file: the job table (the one B-tree of jobs no other record
  refers to), the id allocator and the active index. The derived indexes are rebuilt
  by the registry check that follows.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from ganga_like.repository.checks.fullcheck import record_is_readable, scan_records

__all__ = ["drop_history", "find_tables", "revert_unreadable"]


def revert_unreadable(path: Path) -> list[str]:
    """Put unreadable objects back to their newest readable revision; say what was done."""
    from ZODB.Connection import TransactionMetaData
    from ZODB.FileStorage import FileStorage

    current, report = scan_records(path)
    if not report.damaged_oids:
        return []
    existing = {oid for oid, record in current.items() if record.has_data}
    notes: list[str] = []
    storage = FileStorage(str(path))
    try:
        reverts: dict[bytes, tuple[bytes, bytes]] = {}
        for oid in sorted(report.damaged_oids):
            raw = oid.to_bytes(8, "big")
            found = _newest_readable(storage, raw, existing)
            if found is None and oid == 0:
                with contextlib.suppress(Exception):
                    found = (_empty_root(), storage.load(raw)[1], 1)
            if found is None:
                notes.append(f"record {oid:#x} has no readable revision: left as it is")
            elif found[2] > 0:  # the current revision itself is fine otherwise
                reverts[raw] = (found[0], found[1])
                notes.append(
                    f"record {oid:#x} was put back to its last readable revision "
                    f"({found[2]} revision(s) older)"
                )
        if reverts:
            meta = TransactionMetaData(
                description="records put back to their last readable revision by recovery"
            )
            storage.tpc_begin(meta)
            for raw, (data, serial) in reverts.items():
                storage.store(raw, serial, data, "", meta)
            storage.tpc_vote(meta)
            storage.tpc_finish(meta)
    finally:
        storage.close()
    return notes


def _newest_readable(
    storage: Any, raw: bytes, existing: set[int]
) -> tuple[bytes, bytes, int] | None:
    """(data, current serial, how many revisions back) of the newest revision that reads
    and refers only to records that exist (a flipped byte can leave a record that reads
    but points nowhere)."""
    try:
        revisions = storage.history(raw, size=1 << 20)
        _data, serial = storage.load(raw)
    except Exception:  # the chain of revisions itself is damaged
        return None
    for back, revision in enumerate(revisions):
        with contextlib.suppress(Exception):
            data = storage.loadSerial(raw, revision["tid"])
            if record_is_readable(data) and _refers_to_existing(data, existing):
                return data, serial, back
    return None


def _refers_to_existing(data: bytes, existing: set[int]) -> bool:
    from ZODB.serialize import referencesf

    return all(int.from_bytes(ref, "big") in existing for ref in referencesf(data))


def drop_history(path: Path) -> list[str]:
    """Pack to now: only the current, reachable records stay, so damaged old revisions
    and the records of jobs taken out are gone from the file (the backup has them)."""
    import time

    from ZODB.FileStorage import FileStorage

    from ganga_like.repository.packing import pack_privately

    _current, report = scan_records(path)
    if not report.damaged_oids:
        return []
    storage = FileStorage(str(path), pack_keep_old=False)
    try:
        pack_privately(storage, path, time.time())
    except Exception as exc:
        return [
            f"the damaged old revisions could not be dropped ({type(exc).__name__}); "
            "the jobs are readable, `ganga repository check` still lists them"
        ]
    finally:
        storage.close()
    return ["the history before the recovery was dropped (undo information; the backup keeps it)"]


def _empty_root() -> bytes:
    """The record of an empty root mapping, as ZODB writes it (class, then state)."""
    import io
    import pickle

    from persistent.mapping import PersistentMapping

    stream = io.BytesIO()
    pickler = pickle.Pickler(stream, 3)
    pickler.dump(PersistentMapping)
    pickler.dump({"data": {}})
    return stream.getvalue()


# The registry's tables by class name: BTrees' own (repositories made before the tables
# merged concurrent changes) and their merging subclasses (``ganga_like.repository.trees``).
ID_MAPS = frozenset({"IOBTree", "IdMap"})
KEY_MAPS = frozenset({"OOBTree", "KeyMap"})
ID_SETS = frozenset({"IITreeSet", "IdSet"})


def find_tables(path: Path) -> dict[str, int]:
    """Object ids of the registry's tables, found by what the records are and hold."""
    current, _report = scan_records(path)
    referenced: set[int] = set()
    for oid, record in current.items():
        if oid != 0 and record.has_data:
            referenced.update(record.refs)

    def holds(oid: int, kind: str) -> int:
        """How many records of class ``kind`` the tree refers to (through its buckets)."""
        count = 0
        for ref in current[oid].refs:
            target = current.get(ref)
            if target is None:
                continue
            if target.klass == kind:
                count += 1
            elif target.klass.endswith("Bucket"):
                count += sum(1 for r in target.refs if r in current and current[r].klass == kind)
        return count

    loose = [oid for oid, r in current.items() if oid != 0 and r.has_data and oid not in referenced]
    found: dict[str, int] = {}
    jobs = sorted((holds(oid, "Job"), oid) for oid in loose if current[oid].klass in ID_MAPS)
    if jobs and jobs[-1][0] > 0:
        found["jobs"] = jobs[-1][1]
    allocators = [oid for oid in loose if current[oid].klass == "IdAllocator"]
    if len(allocators) == 1:
        found["ids"] = allocators[0]
    # The active index holds tuples; the other loose OOBTrees (status, name) hold sets.
    active = [
        oid
        for oid in loose
        if current[oid].klass in KEY_MAPS
        and not any(holds(oid, kind) for kind in ID_SETS)
        and not _has_set_buckets(current, oid)
    ]
    if len(active) == 1:
        found["active"] = active[0]
    # The job templates (ganga_like.repository.templates), when there were any.
    kept = sorted(
        (holds(oid, "JobTemplate"), oid) for oid in loose if current[oid].klass in ID_MAPS
    )
    if kept and kept[-1][0] > 0:
        found["templates"] = kept[-1][1]
    counters = [oid for oid in loose if current[oid].klass == "TemplateIds"]
    if len(counters) == 1:
        found["template_ids"] = counters[0]
    return found


def _has_set_buckets(current: dict[int, Any], oid: int) -> bool:
    return any(current[r].klass in ID_SETS for r in current[oid].refs if r in current)
