"""The job repository in a PostgreSQL database (RelStorage), on a real server.

Needs ``$GANGA_TEST_POSTGRES`` (``eval "$(bash scripts/start-postgres.sh)"``; .ci/run
starts one); each test has a database of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ganga_like.errors import RepositoryError
from ganga_like.repository.connection import Repository
from ganga_like.repository.postgres import redacted, server_of
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .conftest import CHILD_PYTHONPATH


def ganga(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).with_name("ganga")
    return subprocess.run(
        [str(command), *args], env=env, capture_output=True, text=True, timeout=120
    )


def child_env(gangadir: Path, url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(GANGA_DIR=str(gangadir), GANGA_REPOSITORY=url, PYTHONPATH=CHILD_PYTHONPATH)
    return env


def without_password(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", "@")))


def test_a_session_on_postgresql_runs_jobs_that_another_session_then_sees(
    gangadir: Path, postgres_repository: str
) -> None:
    session = open_session(Settings(gangadir=gangadir))
    try:
        assert session.repo.effective_mode == "postgresql"
        from ganga_like import ArgSplitter, Executable, Job

        j = Job(
            name="on-pg",
            application=Executable(exe="echo"),
            splitter=ArgSplitter(args=[["a"], ["b"]]),
        )
        j.submit()
        assert j.wait(timeout=120) == "completed"
        assert (j.subjobs[1].outputdir / "stdout").read_text().strip() == "b"
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
    assert not (gangadir / "repository" / "Data.fs").exists()
    listed = ganga(["jobs", "--json"], child_env(gangadir, postgres_repository))
    assert listed.returncode == 0, listed.stderr
    assert '"on-pg"' in listed.stdout and '"completed"' in listed.stdout


def test_the_password_is_written_nowhere_in_the_gangadir_or_the_event_log(
    gangadir: Path, postgres_repository: str, tmp_path: Path
) -> None:
    password = urlsplit(postgres_repository).password
    assert password
    script = tmp_path / "s.py"
    script.write_text(
        "j = Job(application=Executable(exe='echo'))\n"
        "j.submit()\n"
        "assert j.wait(timeout=120) == 'completed'\n"
        "j.name = 'renamed'\n"
        "print(repr(config.Repository.url))\n"
        "print('\\n'.join(str(e) for e in j.history))\n"
    )
    env = child_env(gangadir, postgres_repository)
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    done = ganga(["--log-level=DEBUG", str(script)], env)
    assert done.returncode == 0, done.stderr
    runner_client.stop(runner_dir(gangadir))
    assert "completed" in done.stdout
    shown = ganga(["show", "0"], env).stdout + ganga(["log", "0"], env).stdout
    everything = [p for p in [*gangadir.rglob("*"), *(tmp_path / "xdg-cache").rglob("*")]]
    assert any(p.name == "stdout" for p in everything)
    for path in everything:
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    assert password not in done.stderr
    assert password not in shown


def test_a_refused_login_is_one_line_naming_the_server(
    gangadir: Path, postgres_repository: str
) -> None:
    parts = urlsplit(postgres_repository)
    wrong = urlunsplit(
        parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":not-it@"))
    )
    done = ganga(["jobs"], child_env(gangadir, wrong))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert server_of(wrong) in lines[0]
    assert "password authentication failed" in lines[0]
    assert "not-it" not in done.stderr


def test_a_server_that_is_down_at_open_is_one_line_naming_it(
    gangadir: Path, postgres_repository: str
) -> None:
    from .xrootd_server import free_port

    parts = urlsplit(postgres_repository)
    down = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{free_port()}"))
    done = ganga(["jobs"], child_env(gangadir, down))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert server_of(down) in lines[0] and "Connection refused" in lines[0]
    assert not (gangadir / "repository").exists()


def test_the_password_may_come_from_a_pgpass_file_instead_of_the_uri(
    gangadir: Path, postgres_repository: str, tmp_path: Path
) -> None:
    parts = urlsplit(postgres_repository)
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(
        f"{parts.hostname}:{parts.port}:{parts.path[1:]}:{parts.username}:{parts.password}\n"
    )
    pgpass.chmod(0o600)
    env = {**child_env(gangadir, without_password(postgres_repository)), "PGPASSFILE": str(pgpass)}
    done = ganga(["jobs"], env)
    assert done.returncode == 0, done.stderr
    assert "jobs: 0" in done.stdout


def test_a_workspace_other_hosts_do_not_see_is_refused_at_open(
    gangadir: Path, postgres_repository: str, tmp_path: Path
) -> None:
    Repository(gangadir, "shared", uri=postgres_repository).close()
    elsewhere = tmp_path / "local-disk" / "gangadir"
    with pytest.raises(RepositoryError) as refused:
        Repository(elsewhere, "shared", uri=postgres_repository)
    message = str(refused.value)
    assert str(elsewhere / "workspace") in message and "every host sees" in message
    assert "\n" not in message
    Repository(gangadir, "shared", uri=postgres_repository).close()  # the shared one opens


def test_messages_never_show_the_password() -> None:
    url = "postgresql://me:s3cret@db.example.org:5433/jobs"
    assert redacted(url) == "postgresql://me@db.example.org:5433/jobs"
    assert server_of(url) == "db.example.org:5433/jobs"


def test_the_repository_is_named_on_the_command_line_too(
    gangadir: Path, postgres_repository: str
) -> None:
    env = child_env(gangadir, "")
    env.pop("GANGA_REPOSITORY")
    listed = ganga([f"--repository={postgres_repository}", "jobs"], env)
    assert listed.returncode == 0, listed.stderr
    assert "jobs: 0" in listed.stdout
    assert not (gangadir / "repository" / "Data.fs").exists()
    assert (gangadir / "workspace" / ".repository-id").exists()
