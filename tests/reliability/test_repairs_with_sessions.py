"""Repairs as users run them: right after other commands, with the repository's server
idle or serving sessions, and client caches that knew the file before the repair.

Every command is the real ``ganga`` in its own process, in the default (shared) mode.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ganga_like.repository.zeo import shared

from .conftest import child_env, python, run_python

JOBS = 12


def ganga(gangadir: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=child_env(gangadir),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _make_jobs(gangadir: Path) -> Path:
    """JOBS jobs, each made in its own transaction by a script in the default mode."""
    result = run_python(
        f"""
        from ganga_like import *
        for i in range({JOBS}):
            Job(name=f"job{{i}}")
        """,
        child_env(gangadir),
    )
    assert result.returncode == 0, result.stderr
    return gangadir / "repository" / "Data.fs"


def _listed_names(output: str) -> list[str]:
    """The names column of ``ganga jobs``."""
    rows = [line.split("|") for line in output.splitlines() if line[:1].isdigit()]
    return [row[2].strip() for row in rows]


def _put_back(path: Path, data: bytes) -> None:
    """``data`` as the repository file, with no server holding the file and no index."""
    shared.stop_server(path.parent, timeout=60)
    for stale in (Path(f"{path}.index"), path.parent / "jobs-table.json"):
        stale.unlink(missing_ok=True)
    path.write_bytes(data)


def test_recovery_of_a_file_cut_anywhere_leaves_no_cache_that_disagrees(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    """Cut at six points, each after a session read every job (so the server is idle and
    the client cache holds records the cut removes): recovery is not refused as "in use",
    the next command lists every intact job, and the check finds the repository sound.
    The points spread over the file (odd tenths of it, none at a record's boundary but by
    chance) and one 10 bytes short of its end, inside the last transaction."""
    path = _make_jobs(gangadir)
    pristine = path.read_bytes()
    cuts = [len(pristine) * k // 10 for k in range(1, 10, 2)] + [len(pristine) - 10]
    for cut in cuts:
        _put_back(path, pristine)
        listed = ganga(gangadir, "jobs")  # fills the client cache; the server stays idle
        assert listed.returncode == 0 and len(_listed_names(listed.stdout)) == JOBS, listed
        with open(path, "r+b") as f:
            f.truncate(cut)
        recovered = ganga(gangadir, "repository", "recover")
        assert recovered.returncode == 0, (cut, recovered.stderr)
        assert "repository recovered" in recovered.stdout
        after = ganga(gangadir, "jobs")
        assert after.returncode == 0 and after.stderr == "", (cut, after.stderr)
        names = _listed_names(after.stdout)
        assert names == [f"job{i}" for i in range(len(names))], (cut, names)  # a prefix
        shown = ganga(gangadir, "show", str(len(names) - 1)) if names else None
        assert shown is None or (shown.returncode == 0 and shown.stderr == ""), (cut, shown)
        check = ganga(gangadir, "repository", "check")
        assert check.returncode == 0 and "repository is sound" in check.stdout, (cut, check)
    assert len(_listed_names(after.stdout)) >= JOBS - 1  # the last cut kept nearly all


def test_recovery_and_reset_are_refused_naming_the_sessions_of_a_busy_server(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    """A session still open: one line naming it, nothing changed. Once it is closed the
    idle server is no reason to refuse."""
    path = _make_jobs(gangadir)
    before = path.read_bytes()
    holder = python(
        """
        import sys
        from ganga_like import *
        print(len(jobs), flush=True)
        sys.stdin.readline()
        """,
        child_env(gangadir),
        stdin=True,
    )
    cleanup.append(holder)
    assert holder.stdout is not None and holder.stdout.readline().strip() == str(JOBS)
    for action, doing in (("recover", "recovering"), ("reset", "resetting")):
        refused = ganga(gangadir, "repository", action)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 1 and len(lines) == 1, refused
        assert f"in use by 1 session(s) (PID {holder.pid})" in lines[0], lines
        assert f"before {doing} it" in lines[0]
        assert path.read_bytes() == before
        assert not list(path.parent.glob("Data.fs.damaged-*"))
    assert holder.stdin is not None
    holder.stdin.write("\n")
    holder.stdin.close()
    assert holder.wait(60) == 0
    # The server stays up, idle, for Repository.server_idle_exit seconds (60 by default).
    assert shared.server_pid(path.parent) is not None
    reset = ganga(gangadir, "repository", "reset")
    assert reset.returncode == 0, reset.stderr
    assert "nothing to reset" in reset.stdout
    recovered = ganga(gangadir, "repository", "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert f"{JOBS} job(s) kept" in recovered.stdout


def test_a_client_cache_of_a_newer_file_is_emptied_when_an_older_copy_is_put_back(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    """What the lost-jobs advice says to do (put back a copy of Data.fs): the sessions'
    caches have seen later transactions; they are emptied, not trusted nor refused."""
    path = _make_jobs(gangadir)
    older = path.read_bytes()
    more = run_python(
        """
        from ganga_like import *
        for i in range(3):
            Job(name=f"later{i}")
        print(len(jobs))
        """,
        child_env(gangadir),
    )
    assert more.stdout.strip() == str(JOBS + 3), more.stderr
    _put_back(path, older)
    listed = ganga(gangadir, "jobs")
    assert listed.returncode == 0 and listed.stderr == "", listed
    assert _listed_names(listed.stdout) == [f"job{i}" for i in range(JOBS)]
    shown = ganga(gangadir, "show", str(JOBS - 1))
    assert shown.returncode == 0 and f"'job{JOBS - 1}'" in shown.stdout, shown


def test_an_unreadable_client_cache_is_started_afresh_without_a_word(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    path = _make_jobs(gangadir)
    shared.stop_server(path.parent, timeout=60)
    cache_dir = path.parent / shared.CACHE_DIR
    slots = sorted(cache_dir.glob("slot-*.zec"))
    assert slots
    for slot in slots:
        Path(f"{slot}.index").unlink(missing_ok=True)
        with open(slot, "r+b") as f:
            f.seek(12)  # just after the header: the first record's
            f.write(b"\xff" * 64)
    (path.parent / "jobs-table.json").unlink(missing_ok=True)
    listed = ganga(gangadir, "jobs")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == ""
    assert "cache" not in listed.stdout
    assert len(_listed_names(listed.stdout)) == JOBS
    assert not list(cache_dir.glob("*.bad"))  # no copy of a useless cache is kept


@pytest.fixture
def read_only_gangadir(tmp_path: Path) -> Path:
    """A gangadir of JOBS jobs seen through a read-only bind mount (root only)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only mount needs root and mount(8)")
    source = tmp_path / "archive"
    _make_jobs(source / "gangadir")
    shared.stop_server(source / "gangadir" / "repository", timeout=60)
    view = tmp_path / "view"
    view.mkdir()
    mounted = subprocess.run(
        ["mount", "--bind", "-o", "ro", str(source), str(view)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here: {mounted.stderr.strip()}")
    yield view / "gangadir"  # type: ignore[misc]
    subprocess.run(["umount", str(view)], check=False)


def test_readonly_mode_opens_a_gangadir_on_a_read_only_filesystem(
    read_only_gangadir: Path,
) -> None:
    probe = read_only_gangadir / "probe"
    with pytest.raises(OSError):
        probe.touch()  # the filesystem itself refuses writes, even to root
    listed = ganga(read_only_gangadir, "--Repository.mode=readonly", "jobs")
    assert listed.returncode == 0, listed.stderr
    assert len(_listed_names(listed.stdout)) == JOBS
    shown = ganga(read_only_gangadir, "--Repository.mode=readonly", "show", "3")
    assert shown.returncode == 0 and "'job3'" in shown.stdout, shown.stderr
    env = child_env(read_only_gangadir)
    env["GANGA_REPOSITORY_MODE"] = "readonly"
    script = run_python(
        """
        from ganga_like import *
        print(len(jobs))
        try:
            jobs(1).name = "renamed"
        except GangaError as e:
            print("refused:", e)
        print(jobs(1).name)
        Job(name="more")
        """,
        env,
    )
    lines = script.stderr.strip().splitlines()
    out = script.stdout.strip().splitlines()
    assert out[0] == str(JOBS) and out[2] == "job1", script.stdout  # nothing changed
    assert out[1].startswith("refused: setting Job.name of job 1: not possible"), out
    assert script.returncode == 1 and len(lines) == 1, script.stderr
    assert "creating a job: not possible" in lines[0] and "read-only" in lines[0]
    # A repair would write: one line each, nothing done.
    for action, doing in (("recover", "recovering"), ("reset", "resetting")):
        refused = ganga(read_only_gangadir, "repository", action)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 1 and len(lines) == 1, refused.stderr
        assert lines[0].startswith(f"ganga: {doing} ") and "cannot be written" in lines[0]
    check = ganga(read_only_gangadir, "repository", "check")
    assert check.returncode == 0 and "repository is sound" in check.stdout, check
    # The default mode would write: one line, naming the mode that works here.
    default = ganga(read_only_gangadir, "jobs")
    lines = default.stderr.strip().splitlines()
    assert default.returncode == 1 and len(lines) == 1, default.stderr
    assert "not writable" in lines[0] and "--Repository.mode=readonly" in lines[0]
