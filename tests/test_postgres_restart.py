"""The PostgreSQL server of the repository restarted while three sessions create jobs and
their monitors run: nothing lost, nothing twice, and the sessions go on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ganga_like.repository.connection import Repository

from .conftest import CHILD_PYTHONPATH
from .postgres_db import private_server, server_script
from .waiting import wait_until

WRITERS = ("a", "b", "c")
# Jobs each writer creates once it knows the server was restarted.
AFTER = 5

WRITER = f"""
import sys
from pathlib import Path
from ganga_like import Job
where, who = Path(sys.argv[1]), sys.argv[2]
k, after = 0, None
while after is None or k - after < {AFTER}:
    name = f"{{who}}-{{k}}"
    try:
        Job(name=name)
    except Exception as exc:
        print(f"{{name}}: {{exc}}", file=sys.stderr, flush=True)
    else:
        with open(where / f"{{who}}.made", "a") as made:
            made.write(name + "\\n")
    k += 1
    if after is None and (where / "restarted").exists():
        after = k
print("tried", k, flush=True)
"""


def test_a_restart_of_postgresql_while_sessions_write_loses_and_repeats_nothing(
    gangadir: Path, tmp_path: Path
) -> None:
    with private_server() as (url, directory):
        env = {
            **os.environ,
            "GANGA_DIR": str(gangadir),
            "GANGA_REPOSITORY": url,
            "PYTHONPATH": CHILD_PYTHONPATH,
            "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        }
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(tmp_path), who],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for who in WRITERS
        ]
        try:
            made = [tmp_path / f"{who}.made" for who in WRITERS]
            assert wait_until(lambda: all(_lines(m) >= 3 for m in made), timeout=120)
            server_script("stop", directory)
            server_script("start", directory)
            (tmp_path / "restarted").touch()
            results = [w.communicate(timeout=240) for w in writers]
        finally:
            for w in writers:
                w.kill()
        for who, writer, (_out, err) in zip(WRITERS, writers, results, strict=True):
            assert writer.returncode == 0, err
            # No creation failed, and at most one line about the restart from each session.
            # (The driver itself may print the server's farewell to a connection it held
            # idle, "FATAL: terminating connection due to administrator command": not ours.)
            assert not [line for line in err.splitlines() if line.startswith(f"{who}-")], err
            assert len([line for line in err.splitlines() if line.startswith("repository:")]) <= 1
        said = sorted(n for who in WRITERS for n in (tmp_path / f"{who}.made").read_text().split())
        with Repository(gangadir, "shared", uri=url) as repo:
            stored = sorted(job.name for job in repo.registry().jobs.values())
        assert stored == said  # nothing lost, nothing twice, nothing a writer did not make
        assert all(_lines(m) >= 3 + AFTER for m in made)


def _lines(path: Path) -> int:
    try:
        return len(path.read_text().split())
    except FileNotFoundError:
        return 0
