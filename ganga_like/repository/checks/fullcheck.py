"""The full check of a repository file: every transaction, every record, every object.

FileStorage keeps no checksums, so damage shows only as something that does not fit.
Three passes, each finding what the one before cannot:

1. **The file**, transaction by transaction: lengths, trailers, status, the metadata
   (user and description are UTF-8 text, the extension a pickled dict); and record by
   record: each data record names its transaction (id and position), the previous record
   of its object, and holds two pickles (class, state) that must decode, name classes
   that are dotted identifiers, and refer only to records that exist.
2. **The objects**: every object's current record is loaded through a database
   connection with its real classes, as a session would load it.
3. **The layout**: the root holds the registry's tables; every B-tree is internally
   consistent; every job sits under its own id, below the next id to be given out; every
   subjob under its own id in its master.

Nothing is written. The result names each damaged record (object id, class, owning job,
where in the file) and what is wrong with it.

What only the model knows of a job (which objects are jobs, which statuses exist, where a
master keeps its subjobs) is asked of the :class:`~ganga_like.repository.stored.JobChecks`
the caller gives (``ganga_like.runtime.repository_check`` gives the model's).
"""

from __future__ import annotations

import contextlib
import io
import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ZODB.FileStorage.FileStorage import packed_version as MAGIC
from ZODB.FileStorage.format import DATA_HDR, DATA_HDR_LEN, TRANS_HDR, TRANS_HDR_LEN

from ganga_like.repository.checks.pickles import NullUnpickler, class_name, memo_in_order
from ganga_like.repository.stored import JobChecks

__all__ = [
    "CheckReport",
    "check_file_deeply",
    "record_is_readable",
    "scan_records",
    "zodb_silenced",
]

_TRAILER = 8
_COMMITTED = b" pu"
_LIMIT_SHOWN = 200  # problems listed; the count says how many more there were


@dataclass
class CheckReport:
    """What :func:`check_file_deeply` found."""

    transactions: int = 0
    records: int = 0
    objects: int = 0
    jobs: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    damaged_oids: set[int] = field(default_factory=set)
    hidden: int = 0
    next_id: int = 0  # the registry's next job id, when it could be read
    # Damaged objects whose current record is intact (the damage is in old revisions).
    old_only: set[int] = field(default_factory=set)
    damaged_at: dict[int, int] = field(default_factory=dict)  # last damaged record's byte

    @property
    def count(self) -> int:
        return len(self.problems) + self.hidden

    @property
    def current_damage(self) -> set[int]:
        """Objects whose current record is damaged (what a session would fail to read)."""
        return self.damaged_oids - self.old_only

    @property
    def sound(self) -> bool:
        return not self.problems

    def problem(self, text: str, oid: int | None = None) -> None:
        if oid is not None:
            self.damaged_oids.add(oid)
        if len(self.problems) < _LIMIT_SHOWN:
            self.problems.append(text)
        else:
            self.hidden += 1

    def lines(self) -> list[str]:
        shown = list(self.problems)
        if self.hidden:
            shown.append(f"... and {self.hidden} more problem(s)")
        return shown + self.notes

    def summary(self) -> str:
        counted = (
            f"{self.transactions} transaction(s), {self.records} record(s), "
            f"{self.objects} object(s), {self.jobs} job(s) read"
        )
        if self.sound:
            return f"repository is sound: {counted}"
        total = len(self.problems) + self.hidden
        if any("ganga repository reset" in line for line in self.problems):
            return f"repository is damaged: {total} problem(s) ({counted}); see above"
        return (
            f"repository is damaged: {total} problem(s) ({counted}); run `ganga "
            "repository recover` with every session closed to keep what is intact"
        )


@dataclass
class _Record:
    oid: int
    pos: int
    tpos: int
    refs: list[int]
    klass: str
    has_data: bool


def check_file_deeply(path: Path, checks: JobChecks) -> CheckReport:
    """Run the three passes over ``path`` (a FileStorage ``Data.fs``); ``checks``: the
    model's part of checking a job."""
    report = CheckReport()
    current = _scan_file(path, report)
    if not current:  # unreadable, or no record at all
        return report
    owners = _check_objects(path, current, report, checks)
    if report.old_only:
        report.notes.append(
            f"{len(report.old_only)} of the damaged object(s) are damaged "
            "in old revisions only: their current state reads"
        )
    _name_owners(report, current, owners)
    return report


def scan_records(path: Path) -> tuple[dict[int, _Record], CheckReport]:
    """Pass 1 alone: the current record of each object (class, references) and what was
    found wrong."""
    report = CheckReport()
    current = _scan_file(path, report)
    return current or {}, report


def record_is_readable(pickles: bytes) -> bool:
    """Whether a record's data decodes as a pickler wrote it (pass 1 on one record)."""
    report = CheckReport()
    _decode(pickles, _Record(0, 0, 0, [], "?", True), "record", report)
    return report.sound


# -- pass 1: the file --------------------------------------------------------------------


def _scan_file(path: Path, report: CheckReport) -> dict[int, _Record] | None:
    """Check every transaction and record; the current record of each object, or None
    when the file cannot even be opened as a FileStorage afterwards."""
    data = path.read_bytes()
    size = len(data)
    if size == 0:
        return {}
    if size == len(MAGIC) and data == MAGIC:
        return {}
    if data[: len(MAGIC)] != MAGIC:
        report.problem(
            "the file does not start like a repository file (FileStorage header missing)"
        )
        return None
    current: dict[int, _Record] = {}
    refs_seen: list[tuple[_Record, int]] = []
    readable = _scan_transactions(data, current, refs_seen, report)
    _check_references(current, refs_seen, report)
    report.old_only = {
        oid for oid, at in report.damaged_at.items() if oid in current and current[oid].pos != at
    }
    return current if readable else None


def _scan_transactions(
    data: bytes,
    current: dict[int, _Record],
    refs_seen: list[tuple[_Record, int]],
    report: CheckReport,
) -> bool:
    """Check each transaction after the header in turn, and the records in it (filling
    ``current`` and ``refs_seen``); whether the file could still be opened (False: the
    scan stopped at a transaction that cannot be read past)."""
    size = len(data)
    every: dict[int, int] = {}  # record position -> oid, for back pointers
    pos = len(MAGIC)
    last_tid = b""
    while pos < size:
        if pos + TRANS_HDR_LEN > size:
            report.problem(
                f"incomplete transaction header at byte {pos} (the file ends "
                f"{size - pos} bytes later)"
            )
            return False
        tid, length, status, ulen, dlen, elen = struct.unpack(
            TRANS_HDR, data[pos : pos + TRANS_HDR_LEN]
        )
        end = pos + length
        if length < TRANS_HDR_LEN or end + _TRAILER > size:
            if status == b"c" and end + _TRAILER >= size:
                report.notes.append(
                    f"the transaction at byte {pos} is still being written "
                    "(a commit in progress, or one a crash interrupted: "
                    "it is dropped when the file is next opened)"
                )
                return True
            report.problem(
                f"transaction at byte {pos} runs past the end of the file "
                f"(it claims {length} bytes, {size - pos} remain)"
            )
            return False
        (trailer,) = struct.unpack(">Q", data[end : end + _TRAILER])
        if trailer != length:
            report.problem(
                f"transaction at byte {pos}: its two lengths differ ({length} and {trailer})"
            )
            return False
        report.transactions += 1
        where = f"transaction at byte {pos}"
        if status not in _COMMITTED:
            if status == b"c" and end + _TRAILER == size:
                report.notes.append(f"the {where} is still being committed")
            else:
                report.problem(f"{where}: unknown status {status!r}")
        if tid <= last_tid:
            report.problem(f"{where}: transaction ids go backwards")
        last_tid = tid
        start = pos + TRANS_HDR_LEN + ulen + dlen + elen
        if start > end:
            report.problem(f"{where}: its metadata is longer than the transaction")
        else:
            _check_metadata(data, pos, ulen, dlen, elen, where, report)
            _scan_records(data, pos, start, end, tid, current, every, refs_seen, report)
        pos = end + _TRAILER
    return True


def _check_references(
    current: dict[int, _Record], refs_seen: list[tuple[_Record, int]], report: CheckReport
) -> None:
    """Every reference of a record read names a record that exists."""
    for record, at in refs_seen:
        missing = [ref for ref in record.refs if ref not in current]
        if missing:
            shown = ", ".join(f"{ref:#x}" for ref in missing[:5])
            report.problem(
                f"record {record.oid:#x} ({record.klass}) at byte {at} refers to "
                f"record(s) {shown} that do not exist",
                record.oid,
            )
            report.damaged_at[record.oid] = max(at, report.damaged_at.get(record.oid, 0))


def _check_metadata(
    data: bytes, pos: int, ulen: int, dlen: int, elen: int, where: str, report: CheckReport
) -> None:
    at = pos + TRANS_HDR_LEN
    for label, length in (("user", ulen), ("description", dlen)):
        try:
            data[at : at + length].decode("utf-8")
        except UnicodeDecodeError:
            report.problem(f"{where}: its {label} is not text")
        at += length
    if elen:
        try:
            extension = NullUnpickler(io.BytesIO(data[at : at + elen])).load()
        except Exception as exc:
            report.problem(f"{where}: its extension cannot be read ({_describe(exc)})")
        else:
            if not isinstance(extension, dict):
                report.problem(f"{where}: its extension is not a mapping")


def _scan_records(
    data: bytes,
    tpos: int,
    pos: int,
    end: int,
    tid: bytes,
    current: dict[int, _Record],
    every: dict[int, int],
    refs_seen: list[tuple[_Record, int]],
    report: CheckReport,
) -> None:
    while pos < end:
        if pos + DATA_HDR_LEN > end:
            report.problem(
                f"record at byte {pos}: its header runs past its transaction (at byte {tpos})"
            )
            return
        raw_oid, serial, prev, tloc, vlen, plen = struct.unpack(
            DATA_HDR, data[pos : pos + DATA_HDR_LEN]
        )
        oid = int.from_bytes(raw_oid, "big")
        report.records += 1
        name = f"record {oid:#x} at byte {pos}"
        body = pos + DATA_HDR_LEN
        after = body + (plen if plen else 8)
        if vlen or after > end:
            report.problem(f"{name}: its length does not fit its transaction (at byte {tpos})", oid)
            return
        if serial != tid:
            report.problem(f"{name}: it names another transaction than the one it is in", oid)
        if tloc != tpos:
            report.problem(
                f"{name}: it names a transaction at byte {tloc}, it is in the one at byte {tpos}",
                oid,
            )
        previous = current.get(oid)
        expected_prev = previous.pos if previous is not None else 0
        if prev != expected_prev:
            report.problem(
                f"{name}: its link to the object's previous record is wrong "
                f"({prev}, expected {expected_prev})",
                oid,
            )
        record = _Record(oid, pos, tpos, [], "?", True)
        before = report.count
        if plen:
            _decode(data[body:after], record, name, report)
            refs_seen.append((record, pos))
        else:  # a back pointer (undo, pack): an earlier record of the same object, or 0
            (back,) = struct.unpack(">Q", data[body:after])
            if back == 0:
                record.has_data = False
            elif every.get(back) != oid:
                report.problem(
                    f"{name}: it points back to byte {back}, which is not a "
                    "record of the same object",
                    oid,
                )
            else:
                earlier = current.get(oid)
                record.klass = earlier.klass if earlier is not None else "?"
        every[pos] = oid
        current[oid] = record
        if report.count > before:
            report.damaged_at[oid] = pos
        pos = after


def _decode(pickles: bytes, record: _Record, name: str, report: CheckReport) -> None:
    """Both pickles must decode (without importing anything) and end the record."""
    stream = io.BytesIO(pickles)
    unpickler = NullUnpickler(stream)
    try:
        klass = unpickler.load()
        record.klass = class_name(klass)
        unpickler.load()
    except Exception as exc:
        report.problem(
            f"{name} ({record.klass}): its data cannot be read ({_describe(exc)})", record.oid
        )
        return
    if stream.tell() != len(pickles):
        report.problem(
            f"{name} ({record.klass}): {len(pickles) - stream.tell()} stray byte(s) after its data",
            record.oid,
        )
    elif not memo_in_order(unpickler):
        report.problem(
            f"{name} ({record.klass}): its data is not as a pickler writes it "
            "(memo entries out of order)",
            record.oid,
        )
    record.refs = unpickler.refs


# -- passes 2 and 3: the objects and the layout ----------------------------------------


def _check_objects(
    path: Path, current: dict[int, _Record], report: CheckReport, checks: JobChecks
) -> dict[int, str]:
    """Load every current object and check the registry's layout; who owns which oid."""
    from ganga_like.repository.storage import quiet_zodb_logging

    quiet_zodb_logging()
    owners: dict[int, str] = {}
    with zodb_silenced():
        return _load_objects(path, current, report, owners, checks)


def _load_objects(
    path: Path,
    current: dict[int, _Record],
    report: CheckReport,
    owners: dict[int, str],
    checks: JobChecks,
) -> dict[int, str]:
    import transaction
    from ZODB.FileStorage import FileStorage

    from ganga_like.errors import RepositoryCorruptError
    from ganga_like.repository.storage import GuardedDB

    try:
        storage = FileStorage(str(path), read_only=True)
    except Exception as exc:
        report.problem(f"the file cannot be opened ({_describe(exc)})")
        return owners
    try:
        db = GuardedDB(storage, cache_size=10_000)
    except RepositoryCorruptError as exc:
        storage.close()
        report.problem(_after_path(str(exc)), 0)
        return owners
    except Exception as exc:
        storage.close()
        report.problem(f"the root record cannot be read ({_describe(exc)})", 0)
        return owners
    tm = transaction.TransactionManager()
    conn = db.open(transaction_manager=tm)
    try:
        for oid, record in current.items():
            if not record.has_data or oid in report.current_damage:
                continue
            try:
                obj = conn.get(oid.to_bytes(8, "big"))
                obj._p_activate()
                report.objects += 1
            except RepositoryCorruptError as exc:
                report.old_only.discard(oid)
                report.problem(_after_path(str(exc)), oid)
            except Exception as exc:
                report.old_only.discard(oid)
                report.problem(
                    f"record {oid:#x} ({record.klass}) cannot be loaded ({_describe(exc)})", oid
                )
            if report.objects % 5000 == 0:
                conn.cacheGC()
        if 0 not in report.current_damage:
            try:
                _check_layout(conn, report, owners, checks)
            except Exception as exc:  # a record the layout needs could not be read
                report.problem(f"the job registry cannot be read ({_describe(exc)})")
    finally:
        tm.abort()
        conn.close()
        db.close()
    return owners


@contextlib.contextmanager
def zodb_silenced() -> Iterator[None]:
    """ZODB logs each record it cannot load; the report says it once, in its own words."""
    logger = logging.getLogger("ZODB")  # its children inherit the level
    previous = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(previous)


def _after_path(message: str) -> str:
    """``record 0x2d (Job) cannot be read (X)`` out of the one-line damage error."""
    text = message.split(" is damaged: ", 1)[-1]
    return text.split(". Nothing was changed", 1)[0]


def _check_layout(
    conn: Any, report: CheckReport, owners: dict[int, str], checks: JobChecks
) -> None:
    from BTrees.check import check as check_tree
    from BTrees.IOBTree import IOBTree
    from persistent.mapping import PersistentMapping
    from ZODB.broken import Broken

    from ganga_like.repository.layout import CREATED_ON_USE, EXPECTED
    from ganga_like.repository.registry import FORMAT, IdAllocator

    root = conn.root()
    if not isinstance(root, PersistentMapping):
        report.problem(f"the root is a {type(root).__name__}, not a mapping", 0)
        return
    if not root:
        return  # a repository where nothing was done yet
    for key, kind in EXPECTED.items():
        value = root.get(key)
        if value is None and key in CREATED_ON_USE:
            continue
        if not isinstance(value, kind):
            report.problem(f"the root's {key!r} is {type(value).__name__}, not {kind.__name__}", 0)
            continue
        if not issubclass(kind, IdAllocator):
            try:
                check_tree(value)
            except Exception as exc:
                report.problem(f"the table {key!r} is inconsistent ({_describe(exc)})", _oid(value))
    if root.get("format") != FORMAT:
        report.problem(f"the root's format is {root.get('format')!r}, not {FORMAT}", 0)
    jobs = root.get("jobs")
    ids = root.get("ids")
    if not isinstance(jobs, IOBTree):
        return
    next_id = ids.next_id if isinstance(ids, IdAllocator) else None
    report.next_id = next_id or 0
    for job_id, job in _items(jobs, report):
        report.jobs += 1
        owners[_oid(job)] = f"job {job_id}"
        if isinstance(job, Broken):
            report.notes.append(
                f"job {job_id} is of a class that is not installed "
                f"({type(job).__name__}): it lists as broken"
            )
            continue
        if not checks.is_job(job):
            report.problem(f"job {job_id} is a {type(job).__name__}, not a job", _oid(job))
            continue
        _check_job(job, job_id, None, report, owners, checks)
        if next_id is not None and job_id >= next_id:
            report.problem(
                f"job {job_id} is at or above the next id to be given out ({next_id})", _oid(ids)
            )


def _check_job(
    job: Any,
    job_id: int,
    master: Any,
    report: CheckReport,
    owners: dict[int, str],
    checks: JobChecks,
) -> None:
    from BTrees.check import check as check_tree

    label = f"job {job_id}" if master is None else f"job {master.id}.{job_id}"
    if _oid(job) in report.current_damage:
        return  # already reported as a record that cannot be read
    try:
        if job.id != job_id:
            report.problem(f"{label} says it is job {job.id}", _oid(job))
        checks.validate(job)
        if (job.master is None) != (master is None) or (
            master is not None and job.master is not master
        ):
            report.problem(f"{label} names the wrong master", _oid(job))
        subjobs = checks.subjobs(job)
    except Exception as exc:
        report.problem(f"{label} is inconsistent ({_describe(exc)})", _oid(job))
        return
    if not subjobs or master is not None:
        return
    owners.setdefault(_oid(subjobs), label)
    try:
        check_tree(subjobs)
    except Exception as exc:
        report.problem(
            f"the subjob table of {label} is inconsistent ({_describe(exc)})", _oid(subjobs)
        )
        return
    for sub_id, sub in _items(subjobs, report):
        owners.setdefault(_oid(sub), f"job {job_id}.{sub_id}")
        _check_job(sub, sub_id, job, report, owners, checks)


def _items(tree: Any, report: CheckReport) -> Iterator[tuple[int, Any]]:
    try:
        yield from tree.items()
    except Exception as exc:
        report.problem(f"a table cannot be read to its end ({_describe(exc)})", _oid(tree))


def _oid(obj: Any) -> int:
    raw = getattr(obj, "_p_oid", None)
    return int.from_bytes(raw, "big") if raw else -1


def _name_owners(report: CheckReport, current: dict[int, _Record], owners: dict[int, str]) -> None:
    """Say which job each damaged record belongs to, where that is known."""
    if not owners or not report.damaged_oids:
        return
    # Records a job's record refers to directly (its backend, application, ...) are its.
    for oid, owner in list(owners.items()):
        record = current.get(oid)
        for ref in record.refs if record is not None else ():
            owners.setdefault(ref, owner)
    affected = sorted({owners[oid] for oid in report.damaged_oids if oid in owners})
    if affected:
        shown = ", ".join(affected[:20]) + (" ..." if len(affected) > 20 else "")
        report.notes.insert(0, f"the damaged records belong to: {shown}")


def _describe(exc: BaseException) -> str:
    if " is damaged: " in str(exc):
        return _after_path(str(exc))
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
