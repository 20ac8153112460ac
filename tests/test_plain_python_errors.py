"""A GPI error that a plain ``python script.py`` or ``python -c`` does not catch is one line
(as under ``ganga script.py``); other errors keep their traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def env(env_for: dict[str, str]) -> dict[str, str]:
    return {**env_for, "GANGA_REPOSITORY_MODE": "embedded"}


def _damaged(gangadir: Path) -> None:
    repository = gangadir / "repository"
    repository.mkdir(parents=True, mode=0o700)
    (repository / "Data.fs").write_bytes(b"this is not a repository file" * 10)


def _python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_damaged_repository_is_one_line_from_a_plain_python_command(
    gangadir: Path, env: dict[str, str]
) -> None:
    _damaged(gangadir)
    result = _python(["-c", "from ganga_like import *\nprint(len(jobs))"], env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ERROR: repository ") and "is damaged" in lines[0]
    assert "ganga repository recover" in lines[0] and "GANGA_TRACEBACK=1" in lines[0]
    assert result.stdout == ""


def test_the_traceback_of_a_gpi_error_is_shown_when_asked(
    gangadir: Path, env: dict[str, str]
) -> None:
    _damaged(gangadir)
    result = _python(
        ["-c", "from ganga_like import *\nprint(len(jobs))"], {**env, "GANGA_TRACEBACK": "1"}
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):"), result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ganga_like.errors.RepositoryCorruptError: "), result.stderr


def test_a_job_error_in_a_plain_python_script_is_one_line(
    tmp_path: Path, env: dict[str, str]
) -> None:
    script = tmp_path / "kill_new.py"
    script.write_text(
        "from ganga_like import *\n"
        "j = Job(name='first')\n"
        "print('created', j.id, flush=True)\n"
        "j.kill()\n"
        "print('not reached')\n"
    )
    result = _python([str(script)], env)
    assert result.returncode == 1
    assert result.stdout == "created 0\n"
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "ERROR: job 0 is new: nothing to kill (set GANGA_TRACEBACK=1 to see the traceback)"
    ], result.stderr


def test_other_errors_keep_their_traceback(env: dict[str, str]) -> None:
    result = _python(["-c", "import ganga_like\n1 / 0"], env)
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.strip().endswith("ZeroDivisionError: division by zero")


def test_a_hook_the_program_installed_is_kept(env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "sys.excepthook = lambda kind, value, tb: print('own hook:', value)\n"
        "from ganga_like import JobError\n"
        "raise JobError('refused')\n"
    )
    result = _python(["-c", code], env)
    assert result.returncode == 1
    assert result.stdout == "own hook: refused\n" and result.stderr == ""
