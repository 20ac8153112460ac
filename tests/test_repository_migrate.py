"""`ganga repository migrate TO_URI`: a FileStorage repository copied into PostgreSQL and
back, both sides fully checked, nothing deleted (a real server; a database of its own)."""

from __future__ import annotations

import json
from pathlib import Path

from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .postgres_db import fresh_database
from .test_repository_on_postgres import child_env, ganga


def test_a_file_repository_goes_into_postgresql_and_back_checked_on_both_sides(
    gangadir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "make.py"
    script.write_text(
        "for k in range(3):\n"
        "    j = Job(name=f'm-{k}', application=Executable(exe='echo'),\n"
        "            splitter=ArgSplitter(args=[['a'], ['b']]))\n"
        "j.submit()\n"
        "assert j.wait(timeout=120) == 'completed'\n"
    )
    on_file = child_env(gangadir, "")
    on_file.pop("GANGA_REPOSITORY")
    made = ganga([str(script)], on_file)
    runner_client.stop(runner_dir(gangadir))
    assert made.returncode == 0, made.stderr
    data = gangadir / "repository" / "Data.fs"
    before = data.read_bytes()
    listed = json.loads(ganga(["jobs", "--json"], on_file).stdout)
    with fresh_database(tmp_path / "xdg-cache") as url:
        into = ganga(["repository", "migrate", url], on_file)
        assert into.returncode == 0, into.stdout + into.stderr
        assert "copied: 3 job(s), next id 3" in into.stdout
        assert into.stdout.count("repository is sound") == 2
        assert data.read_bytes() == before  # the source is left as it was
        on_pg = child_env(gangadir, url)
        assert json.loads(ganga(["jobs", "--json"], on_pg).stdout) == listed
        checked = ganga(["repository", "check"], on_pg)
        assert checked.returncode == 0 and "repository is sound" in checked.stdout
        again = ganga(["repository", "migrate", url], on_file)
        assert again.returncode != 0 and "already holds a repository" in again.stderr
        back = tmp_path / "back" / "Data.fs"
        out = ganga(["repository", "migrate", back.as_uri()], on_pg)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "copied: 3 job(s), next id 3" in out.stdout
    restored = child_env(tmp_path / "restored", "")
    restored.pop("GANGA_REPOSITORY")
    (tmp_path / "restored" / "repository").mkdir(parents=True, mode=0o700)
    back.rename(tmp_path / "restored" / "repository" / "Data.fs")
    rows = json.loads(ganga(["jobs", "--json"], restored).stdout)
    assert [(r["name"], r["status"]) for r in rows] == [(r["name"], r["status"]) for r in listed]
