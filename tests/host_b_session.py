"""A session of "another host": run inside its own UTS and PID namespaces by the tests of
a gangadir shared by several hosts (``tests/test_shared_gangadir_hosts.py``).

    python -m tests.host_b_session GANGADIR MODE [--add NAME] [--wait-for FILE]
        [--opened FILE] [--close-after FILE]

Opens the repository in MODE (after FILE exists, with ``--wait-for``), optionally adds a
job named NAME, and prints ``JOBS name,name,...`` (every job it sees), or ``ERROR: line``
and exits 1 when the repository is refused. With ``--opened``/``--close-after`` it says it
is open by creating the first file and stays open until the second one exists.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ganga_like.errors import GangaError
from ganga_like.model.job import Job
from ganga_like.repository.connection import Repository


def wait_for(path: str) -> None:
    deadline = time.monotonic() + 60
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.005)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("gangadir", type=Path)
    parser.add_argument("mode")
    parser.add_argument("--add", default="")
    parser.add_argument("--wait-for", default="")
    parser.add_argument("--opened", default="")
    parser.add_argument("--close-after", default="")
    args = parser.parse_args()
    if args.wait_for:
        wait_for(args.wait_for)
    try:
        repo = Repository(args.gangadir, mode=args.mode)
    except GangaError as exc:
        print(f"ERROR: {exc}", flush=True)
        return 1
    try:
        if args.add:
            repo.in_transaction(lambda: repo.registry().add(Job(name=args.add)))
        repo.catch_up()
        names = sorted(j.name for j in repo.registry().jobs.values())
        print("JOBS " + ",".join(names), flush=True)
        if args.opened:
            Path(args.opened).touch()
            wait_for(args.close_after)
    finally:
        repo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
