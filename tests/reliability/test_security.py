"""Arguments, environment values and names reach the program unchanged, never via a shell.

Property tests through the real Local backend and runner: every example is a split job
whose subjobs run a small Python program that reports exactly what it received.
"""

from __future__ import annotations

import ast
import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, Job, jobs
from ganga_like.repository.zeo import shared
from ganga_like.runtime.session import Session

from .conftest import child_env

REPORT = (
    "import json, os, sys; sys.stdout.write(json.dumps({'argv': sys.argv[1:], "
    "'env': {k: v for k, v in os.environ.items() if k.startswith('GT_')}}))"
)

# Strings a shell would act on, mixed into the generated ones.
CANARY = "ganga-canary"
SHELLISH = [
    f"$(touch {CANARY})",
    f"`touch {CANARY}`",
    f"; touch {CANARY}",
    f"| touch {CANARY}",
    f"&& touch {CANARY}",
    "'",
    '"',
    "\\",
    "\n",
    "*",
    "?",
    "~",
    "$HOME",
    "${PATH}",
    "-c",
    "--help",
    "a b",
    "\t",
    "#",
    "!",
    ">out",
    "<in",
    "2>&1",
    "",
    " ",
    "é",
    "日本",
    "🙂",
    "\u202e",
    "\x7f",
]
# Anything a process can receive: no NUL (it ends a C string) and no lone surrogates
# (they have no encoding in the environment or on a command line).
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
)
ARG = st.one_of(TEXT, st.sampled_from(SHELLISH))


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    runs=st.lists(st.lists(ARG, max_size=6), min_size=1, max_size=4),
    env=st.dictionaries(st.sampled_from(["GT_A", "GT_B", "GT_C"]), ARG, max_size=3),
    name=ARG,
)
def test_arguments_and_environment_reach_the_program_unchanged(
    session: Session, runs: list[list[str]], env: dict[str, str], name: str
) -> None:
    workdir_root = session.repo.workspace
    j = Job(
        name=name,
        application=Executable(exe=sys.executable, args=["-c", REPORT], env=env),
        splitter=ArgSplitter(args=[["-c", REPORT, *args] for args in runs]),
    )
    assert j.name == name
    j.submit()
    assert j.wait(timeout=120) == "completed", [s.status for s in j.subjobs]
    for sj, args in zip(j.subjobs, runs, strict=True):
        got = json.loads((sj.outputdir / "stdout").read_text(encoding="utf-8"))
        assert got["argv"] == args
        assert got["env"] == env
    assert not list(workdir_root.rglob(CANARY))  # no shell ever ran `touch`


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=ARG, comment=ARG)
def test_names_and_comments_are_stored_and_found_unchanged(
    session: Session, name: str, comment: str
) -> None:
    j = Job(name=name, comment=comment)
    session.repo.abort()  # read back what was committed
    again = jobs(j.id)
    assert again.name == name and again.comment == comment
    assert j.id in session.registry().ids_named(name)  # the name index, exact match
    ws = session.repo.workspace
    assert all(p.parent == ws for p in ws.iterdir())  # nothing was created from a name


def test_the_workspace_and_its_files_are_private(session: Session) -> None:
    j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"]]))
    j.submit()
    j.wait(timeout=60)
    gangadir = session.repo.gangadir
    for path in (gangadir, session.repo.workspace, gangadir / "repository"):
        assert (path.stat().st_mode & 0o077) == 0, path


# What a session, the Local runner, the shared server and the monitor daemon leave in a
# gangadir. The running job's batch (the submitter's whole environment) is looked at while
# the runner holds it.
_EVERYTHING = """
import os, stat, subprocess, sys, time
from pathlib import Path
from ganga_like import *
from ganga_like.runtime.session import close_session

gangadir = Path(os.environ["GANGA_DIR"])
j = Job(application=Executable(exe="/bin/sh"), outputfiles=[LocalFile("mine.txt")],
        splitter=ArgSplitter(args=[["-c", "echo hi > mine.txt; echo out"]] * 2))
j.submit()
slow = Job(application=Executable(exe="/bin/sh", args=["-c", "sleep 2"]))
slow.submit()
modes = []
deadline = time.time() + 60
while not modes and time.time() < deadline:
    for batch in (gangadir / "local-runner" / "accepted").glob("*"):
        try:
            modes.append(oct(stat.S_IMODE(batch.stat().st_mode)))
        except FileNotFoundError:  # done with already
            pass
    time.sleep(0.02)
print("batches", modes, flush=True)
assert j.wait(timeout=120) == "completed" and slow.wait(timeout=120) == "completed"
close_session()
run = [sys.executable, "-m", "ganga_like.cli"]
env = dict(os.environ, GANGA_REPOSITORY_MODE="shared")
subprocess.run([*run, "jobs"], env=env, check=True, capture_output=True)
subprocess.run([*run, "monitor", "start"], env=env, check=True, capture_output=True)
subprocess.run([*run, "monitor", "stop"], env=env, check=True, capture_output=True)
"""


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask 000", "umask 022"])
def test_everything_created_in_the_gangadir_is_private_whatever_the_umask(
    umask: int, gangadir: Path, cleanup: list[Any]
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _EVERYTHING],
        env=child_env(gangadir, mode="embedded"),
        umask=umask,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("batches "))
    modes = ast.literal_eval(line.removeprefix("batches "))
    assert modes and set(modes) == {"0o600"}, line
    # Generous: the server finishes what it is doing first, and this test is about modes,
    # not about how fast a server stops on a loaded machine.
    shared.stop_server(gangadir / "repository", timeout=60)
    wide = []
    for path in [gangadir, *gangadir.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.name == "mine.txt":  # written by the user's program: its own business
            continue
        expected = 0o700 if path.is_dir() else 0o600
        if path.is_symlink() or mode & 0o077 or (path.is_dir() and mode != expected):
            wide.append(f"{oct(mode)} {path.relative_to(gangadir)}")
    assert not wide, wide
    assert list(gangadir.rglob("mine.txt"))  # the program's own file is there, untouched
