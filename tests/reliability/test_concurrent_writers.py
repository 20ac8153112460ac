"""Several writer processes create, submit and remove jobs at once in shared mode: no
traceback, no job lost or counted twice, and every writer goes on working after a change
of it was rolled back.

Each writer runs a few seconds of random actions on its own jobs (Local backend, a trivial
executable) and reports the ids it created and did not remove. The writers run with only
three attempts per transaction, so that some changes are given up and each writer has to
go on after one; the repository must then hold exactly the reported jobs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from BTrees.check import check as check_tree

from ganga_like.runtime.session import close_session, open_session

from .conftest import child_env, python, shared_settings

WRITER = """
    import json, random, sys, time, traceback
    from ganga_like import Executable, Job, Local, jobs
    from ganga_like.errors import GangaError, RepositoryConflictError
    from ganga_like.repository import transaction_retry
    from ganga_like.runtime.session import current_session

    name, seconds, attempts = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    session = current_session()
    session.repo.retry_policy = transaction_retry.RetryPolicy(attempts=attempts)
    print("ready", flush=True)
    sys.stdin.readline()  # all writers start together
    rng = random.Random(name)
    mine, new = set(), set()
    report = {"actions": 0, "rolled_back": 0, "worked_after": 0, "other_errors": {},
              "unexpected": 0}
    pending_recovery = False
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        report["actions"] += 1
        choice = rng.random()
        try:
            if choice < 0.45 or not mine:
                j = Job(application=Executable(exe="true"), backend=Local())
                mine.add(j.id)
                new.add(j.id)
            elif choice < 0.75 and new:
                job_id = rng.choice(sorted(new))
                new.discard(job_id)
                jobs(job_id).submit()
            else:
                job_id = rng.choice(sorted(mine))
                jobs(job_id).remove()
                mine.discard(job_id)
                new.discard(job_id)
        except RepositoryConflictError:
            report["rolled_back"] += 1
            pending_recovery = True
            continue
        except GangaError as exc:
            kind = type(exc).__name__
            report["other_errors"][kind] = report["other_errors"].get(kind, 0) + 1
            continue
        except Exception:
            traceback.print_exc()
            report["unexpected"] += 1
            continue
        if pending_recovery:
            report["worked_after"] += 1
            pending_recovery = False
    # With the usual patience, the session still works.
    session.repo.retry_policy = transaction_retry.RetryPolicy()
    last = Job(application=Executable(exe="true"), backend=Local())
    mine.add(last.id)
    last.name = f"last of {name}"
    report["mine"] = sorted(mine)
    report["retried"] = transaction_retry.counts["retried"]
    print(json.dumps(report), flush=True)
"""

WRITERS = ("w1", "w2", "w3")


def test_concurrent_writers_lose_nothing_and_every_session_goes_on(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    env = child_env(gangadir)
    writers = {}
    for name in WRITERS:
        child = python(WRITER, env, argv=(name, "4", "3"), stdin=True)
        cleanup.append(child)
        writers[name] = child
    for child in writers.values():
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in writers.values():
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    reports = {}
    for name, child in writers.items():
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert "Traceback" not in out + err, out + err
        reports[name] = json.loads(out.strip().splitlines()[-1])
    for name, report in reports.items():
        assert report["unexpected"] == 0, (name, report)
        assert report["actions"] > 10, (name, report)
        # Every change given up was followed by one that worked (at the latest, the last).
        assert report["worked_after"] + 1 >= report["rolled_back"], (name, report)
        assert "TransactionFailedError" not in report["other_errors"], (name, report)
    claimed = [job_id for report in reports.values() for job_id in report["mine"]]
    assert len(claimed) == len(set(claimed)), "an id was handed to two writers"

    session = open_session(shared_settings(gangadir, monitoring=False))
    try:
        held = set(session.registry().jobs.keys())
        assert held == set(claimed)  # nothing lost, nothing left over
        root = session.registry().root
        for key in ("jobs", "active", "submitting", "by_status", "status_of", "by_name"):
            check_tree(root[key])  # the merged trees are sound
        for index in ("by_status", "by_name"):
            for ids in root[index].values():
                check_tree(ids)
        for label, ids in root["by_status"].items():
            assert all(root["status_of"][i] == label for i in ids), label
        names = {
            session.registry().get(r["mine"][-1]).name  # type: ignore[union-attr]
            for r in reports.values()
        }
        assert names == {f"last of {name}" for name in WRITERS}
    finally:
        close_session()
    total = {k: sum(r[k] for r in reports.values()) for k in ("actions", "retried", "rolled_back")}
    print(f"3 writers: {total}")


OPENER = """
import os, sys, time
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.001)
from ganga_like import Job
print(Job().id, flush=True)
"""


def test_sessions_opening_a_new_repository_at_once_all_work(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    # Creating the repository's root and layout conflicts when sessions start together.
    env = child_env(gangadir)
    go = gangadir.parent / "go"
    openers = [
        python("import ganga_like, ganga_like_local\n" + OPENER, env, argv=(str(go),))
        for _ in range(4)
    ]
    cleanup.extend(openers)
    go.touch()
    ids = []
    for child in openers:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert "Traceback" not in out + err, err
        ids.append(int(out.split()[-1]))
    assert len(set(ids)) == 4


def test_shared_sessions_one_after_another_number_jobs_without_gaps(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    from ganga_like import Job

    ids = []
    for _ in range(3):
        open_session(shared_settings(gangadir, monitoring=False))
        ids += [Job().id, Job().id]
        close_session()  # gives back the rest of its block of ids
    assert ids == list(range(6))


def test_objects_created_after_the_server_was_killed_get_new_ids(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    import os
    import signal

    from ganga_like.model.job import Job as JobImpl
    from ganga_like.repository.connection import Repository
    from ganga_like.repository.zeo import shared

    # Each session takes object ids from the server a hundred at a time; the server that
    # replaces a killed one gives out again the ids beyond the last commit, which the
    # session that took them last still holds.
    options = shared_settings(gangadir).storage_options()
    first, second = (Repository(gangadir, "shared", options=options) for _ in range(2))
    try:

        def create(repo: Repository, count: int) -> None:
            for _ in range(count):
                repo.in_transaction(lambda: repo.registry().add(JobImpl()))

        create(first, 1)
        create(second, 1)  # holds the higher block of object ids
        pid = shared.server_pid(gangadir / "repository")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for _ in range(4):
            create(first, 25)  # past its old block, into what the new server gives out
            create(second, 25)
            first.abort()
            assert all(isinstance(j, JobImpl) for j in first.registry().jobs.values())
        first.abort()
        assert len(first.registry().jobs) == 202
    finally:
        first.close()
        second.close()
