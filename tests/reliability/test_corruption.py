"""A truncated or damaged repository file: a clear error, recovery, never silent loss."""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from ZODB.utils import newTid

from ganga_like.errors import RepositoryCorruptError, RepositoryError
from ganga_like.model.job import Job as JobImpl
from ganga_like.repository.connection import Repository
from ganga_like.repository.registry import Registry
from ganga_like.runtime.repository_check import check_repository, recover_repository

from .conftest import child_env, python, run_python

JOBS = 40


def _make_repository(gangadir: Path) -> Path:
    """JOBS jobs, one transaction each (as the GPI does); returns Data.fs."""
    repo = Repository(gangadir)
    try:
        for i in range(JOBS):

            def add(i: int = i) -> None:
                job = JobImpl()
                job.name = f"job{i}"
                Registry(repo.connection().root()).add(job)

            repo.in_transaction(add)
    finally:
        repo.close()
    return gangadir / "repository" / "Data.fs"


def _names(gangadir: Path, mode: str = "embedded") -> list[str]:
    repo = Repository(gangadir, mode)
    try:
        return sorted((j.name for j in repo.registry().jobs.values()), key=lambda n: (len(n), n))
    finally:
        repo.close()


def test_a_truncated_file_is_refused_at_every_cut_then_recovered(gangadir: Path) -> None:
    path = _make_repository(gangadir)
    pristine = path.read_bytes()
    rng = random.Random(3)
    cuts = sorted(rng.sample(range(200, len(pristine) - 1), 12))
    for cut in cuts:
        with open(path, "r+b") as f:
            f.truncate(cut)
        with pytest.raises(RepositoryCorruptError) as info:
            Repository(gangadir)
        message = str(info.value)
        assert "\n" not in message
        assert "is damaged" in message and "shorter than when it was last closed" in message
        assert "ganga repository recover" in message
        assert path.stat().st_size == cut  # nothing was changed
        path.write_bytes(pristine)
    # Recover from one of them: what is intact is kept, the damaged file too.
    with open(path, "r+b") as f:
        f.truncate(cuts[len(cuts) // 2])
    report = recover_repository(gangadir)
    assert report.backup.exists() and report.backup.stat().st_size == cuts[len(cuts) // 2]
    names = _names(gangadir)
    assert names == [f"job{i}" for i in range(len(names))]  # a prefix of the history
    assert 0 < len(names) < JOBS
    assert check_repository(gangadir) == []
    # Job ids are never reused, even for jobs that were lost.
    repo = Repository(gangadir)
    try:
        registry = repo.registry()
        assert registry.root["ids"].next_id >= len(names)
        assert sorted(registry.ids_with_status("new")) == sorted(registry.jobs.keys())
    finally:
        repo.close()


def _transaction_starts(path: Path) -> list[int]:
    starts = []
    with open(path, "rb") as f:
        size = path.stat().st_size
        pos = 4
        while pos < size:
            starts.append(pos)
            f.seek(pos + 8)
            (length,) = struct.unpack(">Q", f.read(8))
            pos += length + 8
    return starts


@pytest.mark.parametrize("index", ["missing", "stale"])
def test_garbage_over_a_transaction_in_the_middle_is_refused(index: str, gangadir: Path) -> None:
    path = _make_repository(gangadir)
    starts = _transaction_starts(path)
    if index == "missing":
        Path(f"{path}.index").unlink()
    else:  # as after a crash: the index knows only the first transactions
        from ZODB.fsIndex import fsIndex

        fsIndex().save(starts[2], f"{path}.index")
    data = bytearray(path.read_bytes())
    middle = starts[len(starts) // 2]
    data[middle : middle + 64] = b"\xff" * 64  # a header FileStorage would cut the file at
    path.write_bytes(bytes(data))
    with pytest.raises(RepositoryCorruptError, match="is damaged"):
        Repository(gangadir)
    assert path.read_bytes() == bytes(data)  # FileStorage did not cut it short
    assert check_repository(gangadir)  # the full check names the problem too
    report = recover_repository(gangadir)
    assert report.bytes_removed > 0
    names = _names(gangadir)
    assert JOBS // 3 < len(names) < JOBS
    assert "recovered" in str(report)


def test_a_damaged_record_is_reported_when_read_not_as_a_traceback(gangadir: Path) -> None:
    path = _make_repository(gangadir)
    repo = Repository(gangadir)
    try:
        oid = repo.registry().get(JOBS - 5)._p_oid  # type: ignore[union-attr]
    finally:
        repo.close()
    # Overwrite the pickle of that job's last record, keeping the file's structure.
    from ZODB.FileStorage import FileStorage

    storage = FileStorage(str(path), read_only=True)
    pos = storage._lookup_pos(oid)
    storage.close()
    with open(path, "r+b") as f:
        f.seek(pos)
        header = f.read(42)
        length = struct.unpack(">8s8sQQHQ", header)[5]
        f.seek(pos + 42)
        f.write(b"\x00" * min(length, 32))
    repo = Repository(gangadir)  # the structure is sound: it opens
    try:
        with pytest.raises(RepositoryCorruptError, match="cannot be read"):
            _ = repo.registry().get(JOBS - 5).name  # type: ignore[union-attr]
    finally:
        repo.close()
    report = recover_repository(gangadir)
    assert report.lost_jobs == [JOBS - 5]
    assert len(_names(gangadir)) == JOBS - 1


def test_an_interrupted_commit_is_dropped_with_a_note(
    gangadir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _make_repository(gangadir)
    # What a kill -9 in the middle of writing a commit leaves: a transaction header with
    # the "being committed" flag and part of its data.
    with open(path, "ab") as f:
        f.write(struct.pack(">8sQcHHH", newTid(None), 5000, b"c", 0, 0, 0) + b"x" * 100)
    assert _names(gangadir) == [f"job{i}" for i in range(JOBS)]
    assert any("interrupted by a crash" in r.getMessage() for r in caplog.records)
    kept = list(path.parent.glob("Data.fs.tr*"))
    assert kept  # the bytes are kept, privately
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in kept)


def test_the_command_line_shows_one_line_and_no_traceback(gangadir: Path, tmp_path: Path) -> None:
    path = _make_repository(gangadir)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 100)
    script = tmp_path / "list.py"
    script.write_text("print(len(jobs))\n")
    result = subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", str(script)],
        env=child_env(gangadir, mode="embedded"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: repository "), result.stderr
    assert "Traceback" not in result.stderr


def test_shared_mode_reports_a_damaged_file_the_same_way(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    path = _make_repository(gangadir)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 100)
    with pytest.raises(RepositoryCorruptError, match="shorter than when it was last closed"):
        Repository(gangadir, "shared")
    result = run_python("from ganga_like import *\nprint(len(jobs))", child_env(gangadir))
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: repository "), result.stderr
    assert "shorter than when it was last closed" in lines[0]


def test_recovery_refuses_while_the_repository_is_open(gangadir: Path) -> None:
    _make_repository(gangadir)
    repo = Repository(gangadir)
    try:
        with pytest.raises(RepositoryError, match="in use"):
            recover_repository(gangadir)
    finally:
        repo.close()


def test_kill_9_of_a_writer_leaves_a_file_that_opens(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    _make_repository(gangadir)
    writer = python(
        """
        from ganga_like.repository.connection import Repository
        from ganga_like.repository.registry import Registry
        from ganga_like.model.job import Job
        import os, sys
        repo = Repository(__import__("pathlib").Path(os.environ["GANGA_DIR"]))
        print("open", flush=True)
        while True:
            def add():
                job = Job()
                job.name = "x" * 5000
                Registry(repo.connection().root()).add(job)
            repo.in_transaction(add)
    """,
        child_env(gangadir, mode="embedded"),
    )
    cleanup.append(writer)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
    rng = random.Random(5)
    for _ in range(3):
        import time

        time.sleep(rng.uniform(0.05, 0.3))
        os.kill(writer.pid, signal.SIGSTOP)  # freeze it mid-write, copy what is on disk
        copy = gangadir.parent / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(gangadir, copy)
        os.kill(writer.pid, signal.SIGCONT)
        (copy / "repository" / "Data.fs.lock").unlink(missing_ok=True)
        names = _names(copy)  # the crash image opens, with a note at most
        assert len(names) >= JOBS
    writer.kill()
    writer.wait()


# -- the full check and damage inside records ----------------------------------------------


def _record_span(path: Path, oid: int) -> tuple[int, int]:
    """Where the current record of ``oid`` starts and where its data ends."""
    from ZODB.FileStorage import FileStorage

    storage = FileStorage(str(path), read_only=True)
    try:
        pos = storage._lookup_pos(oid.to_bytes(8, "big"))
    finally:
        storage.close()
    with open(path, "rb") as f:
        f.seek(pos)
        length = struct.unpack(">8s8sQQHQ", f.read(42))[5]
    return pos, pos + 42 + length


def _damage(path: Path, kind: str) -> None:
    data = bytearray(path.read_bytes())
    if kind == "byte flipped in the middle of a job record":
        start, end = _record_span(path, 0x2D)
        data[(start + 42 + end) // 2] ^= 0xFF
    elif kind == "byte flipped in the root record":
        start, end = _record_span(path, 0)
        data[(start + 42 + end) // 2] ^= 0xFF
    elif kind == "truncated":
        del data[len(data) - 300 :]
    elif kind == "garbage appended":
        data += b"garbage" * 10
    elif kind == "region zeroed":
        middle = len(data) // 2
        data[middle : middle + 200] = bytes(200)
    path.write_bytes(bytes(data))


DAMAGE = [
    "byte flipped in the middle of a job record",
    "byte flipped in the root record",
    "truncated",
    "garbage appended",
    "region zeroed",
]


@pytest.mark.parametrize("kind", DAMAGE)
def test_the_full_check_reports_each_kind_of_damage(kind: str, gangadir: Path) -> None:
    path = _make_repository(gangadir)
    assert check_repository(gangadir) == []
    _damage(path, kind)
    problems = check_repository(gangadir)
    assert problems, kind
    assert all("\n" not in line for line in problems)
    result = subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", "repository", "check"],
        env=child_env(gangadir, mode="embedded"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "repository is damaged" in result.stdout and "sound" not in result.stdout
    assert "Traceback" not in result.stderr


def test_the_full_check_names_the_damaged_job(gangadir: Path) -> None:
    path = _make_repository(gangadir)
    repo = Repository(gangadir)
    try:
        oid = int.from_bytes(repo.registry().get(17)._p_oid, "big")  # type: ignore[union-attr]
    finally:
        repo.close()
    start, end = _record_span(path, oid)
    data = bytearray(path.read_bytes())
    data[(start + 42 + end) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    from ganga_like.runtime.repository_check import full_check

    report = full_check(gangadir)
    assert not report.sound
    assert any(f"record {oid:#x}" in line for line in report.problems)
    assert any("belong to: job 17" in line for line in report.notes)


def test_the_full_check_finds_every_flipped_byte_but_inside_stored_values(gangadir: Path) -> None:
    """A byte flipped anywhere in the file is found, except inside a stored value (a
    number, a text, a byte string): the record stays well-formed then, and FileStorage
    keeps no checksum."""
    import io
    import pickletools

    from ganga_like.runtime.repository_check import check_file_deeply

    path = _make_repository(gangadir)
    pristine = path.read_bytes()
    copy = gangadir.parent / "copy.fs"
    rng = random.Random(11)
    missed = []
    positions = rng.sample(range(4, len(pristine)), 300)
    for pos in positions:
        data = bytearray(pristine)
        data[pos] ^= 0xFF
        copy.write_bytes(bytes(data))
        if check_file_deeply(copy).sound:
            missed.append(pos)
    # Each miss is inside the argument of a value in a record's pickle.
    for pos in missed:
        start = pristine.rfind(b"\x80\x03", 0, pos + 1)
        ops = list(pickletools.genops(io.BytesIO(pristine[start:])))
        op = [o for o in ops if o[2] is not None and start + o[2] < pos][-1]
        assert op[0].name in (
            "BININT1",
            "BININT2",
            "BININT",
            "BINFLOAT",
            "SHORT_BINBYTES",
            "BINBYTES",
            "SHORT_BINUNICODE",
            "BINUNICODE",
        ), (pos, op)
    assert len(missed) < len(positions) // 20


# Each byte of the root record's data is flipped in these ways: all bits (text stops being
# text), the lowest bit (a reference's object id moves to a neighbouring record, a memo
# index changes, a letter of a key or class name changes into another letter), and bit 6
# (a letter becomes a punctuation or control character: ``M`` becomes a line break).
ROOT_FLIPS = (0xFF, 0x01, 0x40)


def _jobs_in_process(
    monkeypatch: pytest.MonkeyPatch, gangadir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``ganga jobs`` run in this process: the real opening path of a command."""
    from ganga_like.commands.dispatch import dispatch

    monkeypatch.setenv("GANGA_DIR", str(gangadir))
    monkeypatch.setenv("GANGA_REPOSITORY_MODE", "embedded")
    code = dispatch(["jobs"])
    out, err = capsys.readouterr()
    return code if code is not None else -1, out, err


def _flipped(pristine: bytes, pos: int, mask: int) -> bytes:
    data = bytearray(pristine)
    data[pos] ^= mask
    return bytes(data)


def _write_repository(path: Path, data: bytes) -> None:
    for stale in path.parent.glob(f"{path.name}*"):
        stale.unlink()
    path.write_bytes(data)


def test_a_flipped_byte_in_the_root_record_is_one_line_wherever_it_is(
    gangadir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every byte of the root record's data, flipped in each way, through the opening a
    command does: either the repository opens with every job, or the command says in one
    line that it is damaged and how to recover. The root may unpickle into something
    well-formed but of the wrong shape (a table of a lost class, a table read from another
    record, a key that changed): that is damage too, never a traceback (nor an abort in
    the BTrees C code)."""
    path = _make_repository(gangadir)
    pristine = path.read_bytes()
    start, end = _record_span(path, 0)
    refused = 0
    for mask in ROOT_FLIPS:
        for pos in range(start + 42, end):
            _write_repository(path, _flipped(pristine, pos, mask))
            code, out, err = _jobs_in_process(monkeypatch, gangadir, capsys)
            where = (mask, pos - start - 42)
            if code == 0:
                assert f"jobs: {JOBS}" in out, where  # nothing was lost
                continue
            refused += 1
            lines = err.strip().splitlines()
            assert code == 1 and len(lines) == 1, (where, err)
            assert "is damaged" in lines[0] and "ganga repository recover" in lines[0], (where, err)
    _write_repository(path, pristine)
    assert refused > len(ROOT_FLIPS) * (end - start - 42) // 2


# Where the first flips of these kinds escaped as tracebacks: the root's class name, the
# "data" key of its state, a table's class name, a table's object id, a key.
_ROOT_SHAPE_FLIPS = [
    (0x01, 10),
    (0x01, 25),
    (0x01, 54),
    (0x01, 255),
    (0x01, 292),
    (0x08, 292),
    (0x01, 341),
    (0x40, 32),
]


def test_a_root_of_the_wrong_shape_is_one_line_from_the_command_then_recovered(
    gangadir: Path,
) -> None:
    """The real ``ganga jobs`` for a few flips whose root still unpickles, then
    ``ganga repository recover`` puts back a root that holds every job."""
    path = _make_repository(gangadir)
    pristine = path.read_bytes()
    start, _end = _record_span(path, 0)
    env = child_env(gangadir, mode="embedded")
    for mask, offset in _ROOT_SHAPE_FLIPS:
        _write_repository(path, _flipped(pristine, start + 42 + offset, mask))
        result = subprocess.run(
            [sys.executable, "-m", "ganga_like.cli", "jobs"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1, ((mask, offset), result.stderr)
        assert len(lines) == 1 and "ganga repository recover" in lines[0], (
            (mask, offset),
            result.stderr,
        )
        recover = subprocess.run(
            [sys.executable, "-m", "ganga_like.cli", "repository", "recover"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert recover.returncode == 0, ((mask, offset), recover.stdout, recover.stderr)
        assert check_repository(gangadir) == [], (mask, offset)
        assert len(_names(gangadir)) == JOBS, (mask, offset)
    _write_repository(path, pristine)


def _root_flip_that_broke_text(path: Path) -> None:
    """Flip a byte inside the first key of the root mapping (UTF-8 text)."""
    start, end = _record_span(path, 0)
    data = bytearray(path.read_bytes())
    at = data.index(b"data", start, end)  # PersistentMapping's state: {"data": {...}}
    data[at + 1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_root_record_gives_one_line_to_the_command_line(gangadir: Path) -> None:
    path = _make_repository(gangadir)
    _root_flip_that_broke_text(path)
    env = child_env(gangadir, mode="embedded")
    result = subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", "jobs"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "UnicodeDecodeError" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is damaged" in lines[0], result.stderr
    assert "ganga repository recover" in lines[0]
    script = run_python("from ganga_like import *\nprint(len(jobs))", env)
    lines = script.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: repository "), script.stderr
    assert "ganga repository recover" in lines[0]


@pytest.mark.parametrize("kind", DAMAGE)
def test_recovery_leaves_a_sound_repository_after_each_kind_of_damage(
    kind: str, gangadir: Path
) -> None:
    path = _make_repository(gangadir)
    _damage(path, kind)
    report = recover_repository(gangadir)
    assert check_repository(gangadir) == [], str(report)
    names = _names(gangadir)
    # A damaged root record is rebuilt: every job is kept. Otherwise at most the damaged
    # job, or the jobs after a cut, are lost.
    if kind == "byte flipped in the root record":
        assert len(names) == JOBS, str(report)
    else:
        assert JOBS // 2 <= len(names) <= JOBS, str(report)
    assert report.backup.exists()


def test_damage_in_an_old_revision_is_reported_as_such(gangadir: Path) -> None:
    from ganga_like.runtime.repository_check import full_check

    path = _make_repository(gangadir)
    data = bytearray(path.read_bytes())
    first = _transaction_starts(path)[0]  # the database's first root: an empty mapping
    at = data.index(b"PersistentMapping", first)
    data[at + 3] ^= 0xFF
    path.write_bytes(bytes(data))
    report = full_check(gangadir)
    assert not report.sound and report.old_only == {0}
    assert report.jobs == JOBS  # the current state was read in full
    assert any("old revisions only" in note for note in report.notes)


@pytest.mark.parametrize("where", ["text", "length"])
def test_a_damaged_root_record_gives_one_line_in_shared_mode_too(
    where: str, gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    """The server reads the record there: its failure comes back as a ServerException."""
    path = _make_repository(gangadir)
    if where == "text":
        _root_flip_that_broke_text(path)
    else:  # the data length in the record's header: the server reads far past the end
        start, _end = _record_span(path, 0)
        data = bytearray(path.read_bytes())
        data[start + 35] ^= 0xFF
        path.write_bytes(bytes(data))
    result = subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", "jobs"],
        env=child_env(gangadir, mode="shared"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is damaged" in lines[0], result.stderr
    assert "ganga repository recover" in lines[0]
