"""Two shells, a script and a notebook-like client update the same jobs at once (shared
mode) while the monitor daemon records what the Local backend runs: no update is lost or
applied twice, and every status matches the backend's own record.

Each client appends numbered events to the event logs of the same jobs and subjobs, in its
own style: the shells in cells of a few changes (retried when they conflict, as a user runs
a cell again), the script one change per transaction (as GPI actions do), the notebook in
larger cells. The default run makes 2,000 updates; the slow one 10,000.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.model.status import Status
from ganga_like.runtime.monitoring import daemon
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like_local.backend import JOURNAL
from ganga_like_runner import client as runner_client

from .conftest import child_env, python, shared_settings, wait_until

CLIENT = """
    import json, random, sys, time
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    name, count, cell = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    targets = json.loads(sys.argv[4])
    session = open_session(Settings(monitoring=False))
    session.autocommit = False
    tm = session.repo.connection().transaction_manager
    rng = random.Random(name)
    done = retried = 0
    print("ready", flush=True)
    sys.stdin.readline()  # all clients start together
    while done < count:
        batch = [rng.choice(targets) for _ in range(min(cell, count - done))]
        for tries, attempt in enumerate(tm.attempts(100)):
            with attempt:
                registry = session.registry()
                for k, (job_id, sub) in enumerate(batch):
                    job = registry.get(job_id)
                    target = job if sub < 0 else job.subjob(sub)
                    target.log_event(f"{name}:{done + k}")
        retried += tries
        done += len(batch)
    print(done, retried, flush=True)
"""

CLIENTS = {"shell-1": 3, "shell-2": 5, "script": 1, "notebook": 20}  # changes per commit


def test_four_clients_update_the_same_jobs_and_nothing_is_lost(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    _run_clients(gangadir, cleanup, updates_per_client=500)


@pytest.mark.slow
def test_ten_thousand_concurrent_updates_full_scale(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    _run_clients(gangadir, cleanup, updates_per_client=2500)


def _run_clients(
    gangadir: Path, cleanup: list[subprocess.Popen[str]], updates_per_client: int
) -> None:
    settings = shared_settings(gangadir)
    daemon.start(settings)
    session = open_session(shared_settings(gangadir, monitoring=False))
    masters = []
    for _ in range(4):
        j = Job(
            application=Executable(exe="sleep"),
            splitter=ArgSplitter(args=[["0.1"] for _ in range(20)]),
        )
        j.submit()
        masters.append(j.id)
    targets = [(m, s) for m in masters for s in range(-1, 20)]
    env = child_env(gangadir)
    clients = {}
    for name, cell in CLIENTS.items():
        child = python(
            CLIENT,
            env,
            argv=(name, str(updates_per_client), str(cell), json.dumps(targets)),
            stdin=True,
        )
        cleanup.append(child)
        clients[name] = child
    # Release them together once all are connected.
    for child in clients.values():
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    results: dict[str, int] = {}
    retries: dict[str, int] = {}
    for child in clients.values():
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    for name, child in clients.items():
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        results[name] = int(out.split()[-2])
        retries[name] = int(out.split()[-1])
    assert results == dict.fromkeys(CLIENTS, updates_per_client)
    print(f"commits retried after a conflict the server could not resolve: {retries}")

    def all_done() -> bool:
        session.sync()
        return all(
            session.registry().get(m).current_status().final  # type: ignore[union-attr]
            for m in masters
        )

    assert wait_until(all_done, 120)
    _check(session, masters, updates_per_client)
    close_session()


def _check(session: Session, masters: list[int], updates_per_client: int) -> None:
    found: dict[str, list[int]] = {name: [] for name in CLIENTS}
    registry = session.registry()
    for job_id in masters:
        master = registry.get(job_id)
        assert master is not None
        journal = session.repo.workspace / str(job_id) / JOURNAL
        events, _ = runner_client.read_events(journal, 0)
        truth = {
            e.key.split("@")[0]: e.event for e in events if e.event in runner_client.TERMINAL_EVENTS
        }
        counts: dict[str, int] = {}
        for job in (master, *master.iter_subjobs()):
            for _time, _old, _new, cause in job.history:
                client, sep, number = cause.partition(":")
                if sep and client in found:
                    found[client].append(int(number))
            if job is not master:
                assert job.status == truth[job.fqid], job.fqid  # the backend's truth
                counts[job.status] = counts.get(job.status, 0) + 1
                changes = [new for _t, old, new, _c in job.history if old != new]
                assert changes == ["submitted", "running", "completed"], job.history
        assert master._counter is not None and master._counter.counts == counts
        assert master.current_status() is Status.COMPLETED
    for name, numbers in found.items():
        assert sorted(numbers) == list(range(updates_per_client)), name  # none lost, none twice
    print(f"{sum(len(v) for v in found.values())} concurrent updates, none lost or repeated")
