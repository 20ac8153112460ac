"""The check and the commands on a repository holding every documented kind of object.

The full check must never call a sound repository damaged (its advice, recovery, drops the
history for nothing), and a damaged job record must never end a command in a traceback.
The repository (``tests.every_kind``) is made once by a real script and copied per test.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ganga_like.repository.zeo import shared

from .. import every_kind
from .conftest import child_env

# Byte flips: all bits, the lowest (a letter to its neighbour, '.' to '/'), bit 5, bit 6.
FLIPS = (0xFF, 0x01, 0x20, 0x40)
TRIALS = 100
# Forked commands on a loaded machine: each trial may take seconds.
SLOW_LOOP = pytest.mark.timeout(1800)
COMMAND_LIMIT = 240


@pytest.fixture(scope="module")
def every_kind_gangadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gangadir = tmp_path_factory.mktemp("every-kind") / "gangadir"
    every_kind.build(gangadir)
    return gangadir


@pytest.fixture
def copied(every_kind_gangadir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "gangadir"
    shutil.copytree(every_kind_gangadir, target, symlinks=True)
    for name in ("zeo.sock", "zeo.pid"):
        (target / "repository" / name).unlink(missing_ok=True)
    yield target  # type: ignore[misc]
    shared.stop_server(target / "repository", timeout=60)


def ganga(gangadir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=child_env(gangadir),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_full_check_finds_every_documented_kind_of_object_sound(copied: Path) -> None:
    check = ganga(copied, "repository", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip().splitlines()[-1].startswith("repository is sound")
    assert f"{len(every_kind.JOB_NAMES)} job(s) read" in check.stdout
    # Recovering it anyway changes nothing: every job and template is kept, no history
    # is dropped.
    recovered = ganga(copied, "repository", "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert f"{len(every_kind.JOB_NAMES)} job(s) kept, 0 damaged byte(s)" in recovered.stdout
    assert "history" not in recovered.stdout and "could not be" not in recovered.stdout
    again = ganga(copied, "repository", "check")
    assert again.returncode == 0, again.stdout


def _job_records(gangadir: Path) -> dict[int, tuple[int, int]]:
    """Job id -> where the data of its current record starts and ends in Data.fs."""
    from ZODB.FileStorage import FileStorage

    from ganga_like.repository.connection import Repository

    path = gangadir / "repository" / "Data.fs"
    repo = Repository(gangadir, "readonly")
    try:
        registry = repo.registry()
        oids = {i: registry.get(i)._p_oid for i in registry.jobs}
    finally:
        repo.close()
    storage = FileStorage(str(path), read_only=True)
    spans = {}
    try:
        with open(path, "rb") as f:
            for job_id, oid in oids.items():
                pos = storage._lookup_pos(oid)
                f.seek(pos)
                length = struct.unpack(">8s8sQQHQ", f.read(42))[5]
                spans[job_id] = (pos + 42, pos + 42 + length)
    finally:
        storage.close()
    return spans


def _run_forked(gangadir: Path, argv: list[str]) -> tuple[int, str, str]:
    """The command's exit code, stdout and stderr, run by the real dispatcher in a child process
    (a fresh process's state for each damaged file), opening the file itself."""
    from ganga_like.commands.dispatch import dispatch

    read_end, write_end = os.pipe()
    stuck = gangadir.parent / "stuck.txt"
    stuck.unlink(missing_ok=True)
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code: object = 99
        out, err = io.StringIO(), io.StringIO()
        try:
            os.close(read_end)
            # A command that never ends is a defect too: its stack, then the child exits.
            faulthandler.dump_traceback_later(COMMAND_LIMIT, exit=True, file=stuck.open("w"))
            os.environ["GANGA_DIR"] = str(gangadir)
            os.environ["GANGA_REPOSITORY_MODE"] = "embedded"
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = dispatch(argv)
                except SystemExit as exc:
                    code = exc.code
                except BaseException as exc:  # what the test is after: report it
                    code = f"{type(exc).__name__}: {exc}"
            os.write(write_end, json.dumps([code, out.getvalue(), err.getvalue()]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 1 << 16):
        data += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    assert data, f"{argv} did not end within {COMMAND_LIMIT} s:\n{stuck.read_text()}"
    code, stdout, stderr = json.loads(data)
    if isinstance(code, str):  # an exception escaped the command
        return -1, stdout, code
    return (0 if code is None else code), stdout, stderr


@SLOW_LOOP
def test_a_flipped_byte_in_any_job_record_ends_each_command_in_one_line_or_works(
    copied: Path,
) -> None:
    """Seeded flips at many positions of every job's record: ``ganga jobs``, ``ganga show``
    of that job and ``ganga repository check`` each work (exit 0, nothing on stderr) or
    end in one line; a refused opening names ``recover`` (the check, the slowest, runs
    on every fourth file)."""
    spans = _job_records(copied)
    path = copied / "repository" / "Data.fs"
    pristine = path.read_bytes()
    rng = random.Random(20261128)
    refused = 0
    for trial in range(TRIALS):
        job_id = rng.choice(sorted(spans))
        start, end = spans[job_id]
        pos, mask = rng.randrange(start, end), rng.choice(FLIPS)
        for stale in path.parent.glob("Data.fs?*"):
            stale.unlink()
        (path.parent / "jobs-table.json").unlink(missing_ok=True)
        damaged = bytearray(pristine)
        damaged[pos] ^= mask
        path.write_bytes(bytes(damaged))
        where = (job_id, pos - start, hex(mask))
        commands = [["jobs"], ["show", str(job_id)]]
        if trial % 4 == 0:
            commands.append(["repository", "check"])
        for argv in commands:
            code, stdout, stderr = _run_forked(copied, argv)
            lines = stderr.strip().splitlines()
            if argv[0] == "repository":  # its verdict is on stdout, exit 1 if damaged
                assert code in (0, 1) and not lines, (where, code, stderr)
                verdict = stdout.strip().splitlines()[-1]
                assert verdict.startswith("repository is "), (where, stdout)
                continue
            if code == 0:
                assert not lines, (where, argv, stderr)
                continue
            assert code == 1 and len(lines) == 1, (where, argv, code, stderr)
            if "is damaged" in lines[0]:
                refused += 1
                assert "ganga repository recover" in lines[0], (where, argv, lines)
    path.write_bytes(pristine)
    assert refused > 0  # the flips did reach the opening's checks


def _flip_in_record(gangadir: Path, job_id: int, needle: bytes, offset: int) -> None:
    start, end = _job_records(gangadir)[job_id]
    path = gangadir / "repository" / "Data.fs"
    data = bytearray(path.read_bytes())
    at = data.find(needle, start, end)
    assert at > 0, needle
    data[at + offset] ^= 0x01
    for stale in path.parent.glob("Data.fs?*"):
        stale.unlink()
    (path.parent / "jobs-table.json").unlink(missing_ok=True)
    path.write_bytes(bytes(data))


def test_a_damaged_class_name_in_a_job_record_is_one_line_from_the_commands(
    copied: Path,
) -> None:
    """A master's record names its subjob counter's class; one flipped bit makes the module
    name ``ganga_like/model...``, which ZODB would load as a broken object that fails later
    as a missing attribute. The real commands, in the default mode."""
    split = every_kind.JOB_NAMES.index("split")
    _flip_in_record(copied, split, b"ganga_like.model.counter", len("ganga_like"))
    for argv in (["jobs"], ["show", str(split)]):
        result = ganga(copied, *argv)
        lines = result.stderr.strip().splitlines()
        if result.returncode == 0:  # the listing need not read the counter
            assert not lines, result.stderr
            continue
        assert result.returncode == 1 and len(lines) == 1, result.stderr
        assert "is damaged" in lines[0] and "ganga repository recover" in lines[0], lines
    check = ganga(copied, "repository", "check")
    assert check.returncode == 1 and f"job {split}" in check.stdout, check.stdout
    recovered = ganga(copied, "repository", "recover")
    assert recovered.returncode == 0, recovered.stderr
    after = ganga(copied, "show", str(split))
    assert after.returncode == 0 and after.stderr == "", after.stderr
