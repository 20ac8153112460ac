"""The two interactive doors on a repository in PostgreSQL (``GANGA_REPOSITORY``): the real
``ganga`` shell through a pseudo-terminal, and a real notebook executed by nbclient. Each
submits a split job to Local, waits for it, and lists it; the other door's session (a
second process) sees it in the database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .test_notebook import html_of, install_kernel, run_notebook
from .test_repository_on_postgres import ganga
from .test_shell import Shell


@pytest.fixture
def door_env(
    env_for: dict[str, str], tmp_path: Path, gangadir: Path, postgres_repository: str
) -> Iterator[dict[str, str]]:
    env = dict(env_for)
    env.update(
        GANGA_REPOSITORY=postgres_repository,
        XDG_CACHE_HOME=str(tmp_path / "xdg-cache"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    yield env
    runner_client.stop(runner_dir(gangadir))


def test_the_real_shell_on_postgresql(door_env: dict[str, str]) -> None:
    env = {**door_env, "TERM": "xterm-256color", "COLUMNS": "200"}
    env.pop("PROMPT_TOOLKIT_NO_CPR", None)
    shell = Shell(env)
    try:
        server = urlsplit(door_env["GANGA_REPOSITORY"])
        where = f"(repository in PostgreSQL {server.hostname}:{server.port}{server.path})"
        assert where in shell.banner, shell.banner
        assert str(server.password) not in shell.screen
        shell.run(
            "j = Job(name='pg', application=Executable(exe='echo'), "
            "splitter=ArgSplitter(args=[['a'], ['b'], ['c']]))"
        )
        assert "3 subjobs submitted" in shell.run("j.submit()")
        assert "'completed'" in shell.run("j.wait(timeout=60)")
        table = shell.run("jobs")
        assert re.search(r"0\s+completed\s+pg\s+3 \(done:3\)", table), table
    finally:
        shell.exit()
    listed = ganga(["jobs"], door_env)
    assert listed.returncode == 0 and re.search(r"0\W+completed\W+pg\b", listed.stdout), listed


def test_a_real_notebook_on_postgresql(
    door_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_kernel(tmp_path / "jupyter")
    for name in ("GANGA_DIR", "GANGA_REPOSITORY", "XDG_CACHE_HOME", "IPYTHONDIR", "PYTHONPATH"):
        monkeypatch.setenv(name, door_env[name])
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(source)
        for source in (
            "%load_ext ganga_like",
            "j = Job(name='nb-pg', application=Executable(exe='echo'),\n"
            "        splitter=ArgSplitter(args=[['a'], ['b']]))\n"
            "j.submit()",
            "j.wait(timeout=60)",
            "jobs",
            "from ganga_like.runtime.session import current_session\n"
            "print(current_session().repo.effective_mode)",
        )
    ]
    out = [cell.outputs for cell in run_notebook(nb, tmp_path).cells]
    assert out[0] == []
    assert [o["data"]["text/plain"] for o in out[2] if o["output_type"] == "execute_result"] == [
        "'completed'"
    ]
    assert "nb-pg" in html_of(out[3][0]) and "done:2" in html_of(out[3][0])
    assert out[4][0]["text"].split() == ["postgresql"]
    listed = ganga(["jobs"], door_env)
    assert listed.returncode == 0 and re.search(r"0\W+completed\W+nb-pg", listed.stdout), listed
