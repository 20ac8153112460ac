"""The repository on disk: a real FileStorage, a second process, broken plugins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, RepositoryBusyError, RepositoryError, jobs
from ganga_like.repository.connection import Repository
from ganga_like.runtime.session import Session


def run_python(
    code: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_second_process_gets_one_clear_line_naming_the_holder(
    session: Session, env_for: dict[str, str]
) -> None:
    Job(name="held")
    result = run_python("from ganga_like import *\nprint(len(jobs))", env_for)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: repository "), result.stderr
    assert f"is in use by PID {os.getpid()}" in lines[0]


def test_busy_repository_error_carries_the_pid(session: Session, gangadir: Path) -> None:
    with pytest.raises(RepositoryBusyError) as info:
        Repository(gangadir)
    assert info.value.pid == os.getpid()


def test_a_gangadir_that_is_not_writable_is_refused_clearly(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root may write anywhere; a path under a regular file can never be created
        target = tmp_path / "file"
        target.write_text("")
        with pytest.raises(RepositoryError, match="cannot create"):
            Repository(target / "gangadir")
        return
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(RepositoryError, match="not writable"):
        Repository(locked)


def test_gangadir_and_repository_files_are_private(session: Session, gangadir: Path) -> None:
    Job()
    assert (gangadir.stat().st_mode & 0o777) == 0o700
    assert ((gangadir / "repository" / "Data.fs").stat().st_mode & 0o777) == 0o600


def test_a_later_process_sees_jobs_statuses_and_outputs(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    create = run_python(
        """
        from ganga_like import *
        j = Job(name="later", application=Executable(exe="echo"),
                splitter=ArgSplitter(args=[[str(i)] for i in range(10)]))
        j.submit()
        print(j.wait(timeout=60))
    """,
        env_for,
    )
    assert create.returncode == 0, create.stderr
    assert create.stdout.strip() == "completed"
    read = run_python(
        """
        from ganga_like import *
        j = jobs(0)
        print(j.name, j.status, len(j.subjobs), j.subjobs[9].exit_code)
        print(open(j.subjobs[9].outputdir / "stdout").read().strip())
    """,
        env_for,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["later", "completed", "10", "0", "9"]


def test_listing_jobs_does_not_load_subjobs(session: Session) -> None:
    j = Job(
        application=Executable(exe="true"), splitter=ArgSplitter(args=[[str(i)] for i in range(50)])
    )
    j.submit()
    j.wait(timeout=60)
    session.repo.close()
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings

    s2 = open_session(Settings(gangadir=session.repo.gangadir, monitoring=False))
    text = repr(jobs)
    assert "50 (done:50)" in text
    master = s2.registry().get(0)
    assert master is not None
    tree = master._subjobs
    assert all(sj._p_changed is None for sj in tree.values())  # all still ghosts


def test_removing_a_job_removes_subjobs_and_workspace(session: Session) -> None:
    j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"]]))
    j.submit()
    j.wait(timeout=60)
    workspace = session.repo.workspace / str(j.id)
    assert workspace.exists()
    assert j.remove()
    assert not workspace.exists()
    assert len(jobs) == 0


PLUGIN = """
from typing import Any, ClassVar
import traitlets
from ganga_like.model.interfaces import IApplication

class Wobble(IApplication):
    _schema: ClassVar[dict[str, Any]] = {"size": traitlets.Int(1)}
"""


def test_objects_of_a_missing_plugin_still_list_and_can_be_removed(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    plugdir = tmp_path / "plug"
    (plugdir / "wobble_plugin-1.0.dist-info").mkdir(parents=True)
    (plugdir / "wobble_plugin.py").write_text(PLUGIN)
    (plugdir / "wobble_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: wobble-plugin\nVersion: 1.0\n"
    )
    (plugdir / "wobble_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[ganga_like.plugins]\nWobble = wobble_plugin:Wobble\n"
    )
    with_plugin = dict(env_for, PYTHONPATH=f"{plugdir}{os.pathsep}{env_for['PYTHONPATH']}")
    made = run_python(
        """
        from ganga_like import *
        Job(name="odd", application="Wobble")
        Job(name="plain")
        print(jobs(0).application)
    """,
        with_plugin,
    )
    assert made.returncode == 0, made.stderr
    listing = run_python(
        """
        from ganga_like import *
        print(jobs)
        j = jobs(0)
        try:
            j.copy()
        except BrokenObjectError as exc:
            print("copy refused:", exc)
        try:
            j.submit()
        except BrokenObjectError as exc:
            print("submit refused:", exc)
        print(j.application)
        print(j.remove())
        print(len(jobs))
    """,
        env_for,
    )
    assert listing.returncode == 0, listing.stderr
    out = listing.stdout
    assert "broken:Wobble" in out
    assert (
        "copy refused: cannot copy job 0: its application (wobble_plugin.Wobble) comes "
        "from a missing plugin" in out
    )
    assert "submit refused" in out
    assert "<broken: wobble_plugin.Wobble (plugin missing)>" in out
    assert out.strip().splitlines()[-2:] == ["True", "1"]


def test_copy_in_a_fresh_process_copies_the_stored_description(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    made = run_python(
        """
        from ganga_like import *
        Job(name="orig", application=Executable(exe="echo", args=["a", "b"], env={"K": "v"}))
    """,
        env_for,
    )
    assert made.returncode == 0, made.stderr
    copied = run_python(
        """
        from ganga_like import *
        c = jobs(0).copy()
        print(c.name, c.application.exe, c.application.args, c.application.env)
    """,
        env_for,
    )
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.strip() == "orig echo ['a', 'b'] {'K': 'v'}"
