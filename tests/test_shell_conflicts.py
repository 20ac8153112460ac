"""Conflicts in the real ``ganga`` shell: a cell's commit or an action that conflicts is
one line, and the next cells work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .test_shell import RENAME_ELSEWHERE, Shell


@pytest.fixture
def shell_env(env_for: dict[str, str], tmp_path: Path, gangadir: Path) -> Iterator[dict[str, str]]:
    env = dict(env_for)
    env.update(IPYTHONDIR=str(tmp_path / "ipython"), TERM="xterm-256color", COLUMNS="200")
    env.pop("PROMPT_TOOLKIT_NO_CPR", None)
    yield env
    runner_client.stop(runner_dir(gangadir))


def test_conflicts_in_cells_are_one_line_and_the_next_cells_work(
    shell_env: dict[str, str], tmp_path: Path
) -> None:
    helper = tmp_path / "helper.py"
    helper.write_text(RENAME_ELSEWHERE)
    shell = Shell(shell_env)
    try:
        shell.run("j = Job(name='first')")
        assert "Error" not in shell.run(f"%ganga {helper}")
        # The cell's commit conflicts: rolled back, one warning.
        warned = shell.run("j.name = 'mine'; rename_elsewhere('theirs')")
        assert len([line for line in warned.splitlines() if "WARNING" in line]) == 1
        assert "rolled back" in warned
        assert shell.run("j.name").endswith("'theirs'")
        # An action finds the cell's earlier change conflicting: one error, nothing done.
        failed = shell.run("j.name = 'again'; rename_elsewhere('theirs 2'); j.copy()")
        errors = [line for line in failed.splitlines() if "ERROR" in line]
        assert len(errors) == 1 and "copying job 0: not done" in errors[0], failed
        assert "Traceback" not in failed
        # The session goes on.
        assert shell.run("k = Job(name='second'); k.name").endswith("'second'")
        assert shell.run("len(jobs), j.name").endswith("(2, 'theirs 2')")
    finally:
        shell.exit()
