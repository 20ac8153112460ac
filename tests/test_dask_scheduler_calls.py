"""The calls to the scheduler, on a real scheduler and worker.

The claim of each program's start: a worker's first claim is a call, its later ones travel
on its stream and are answered there, and a start claimed before (by a run whose worker was
lost) is answered so over the stream too, so that the program is not run a second time.
The poll's one call per cycle: it releases what the cycle before wrote and answers only the
keys with news."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")

from ganga_like_dask import claim, task

from .dask_cluster import DaskCluster, start_cluster
from .waiting import wait_for


@pytest.fixture(scope="module")
def one_worker() -> Iterator[DaskCluster]:
    cluster = start_cluster(n_workers=1, nthreads=1)
    try:
        yield cluster
    finally:
        cluster.stop()


def _payload(key: str, marker: Path) -> dict[str, Any]:
    return {
        "key": key,
        "argv": ["/bin/sh", "-c", f"echo ran >> {marker}"],
        "env": {},
        "inputs": [],
        "output_patterns": [],
    }


def _started(dask_scheduler: Any = None) -> dict[str, float]:
    return dict(getattr(dask_scheduler, claim.STARTED_ATTRIBUTE, {}))


def test_after_its_first_claim_a_workers_claims_travel_on_its_stream(
    one_worker: DaskCluster, tmp_path: Path
) -> None:
    from distributed import Client

    keys = [f"claims-stream-{time.monotonic_ns()}-{i}" for i in range(5)]
    payloads = [_payload(k, tmp_path / "ran") for k in keys]
    with Client(one_worker.address, timeout=30) as client:
        # One after the other, so that the first is the worker's first claim.
        results = [client.submit(task.run, p, key=p["key"], pure=False).result() for p in payloads]
        assert [r["state"] for r in results] == ["completed"] * 5
        started = client.run_on_scheduler(_started)
        streamed = {msg["key"] for _, msg in client.get_events(claim.CLAIM_TOPIC)}
    assert set(keys) <= set(started)
    # The worker may have claimed before (an earlier test's task): at least the last four.
    assert set(keys[1:]) <= streamed
    assert (tmp_path / "ran").read_text() == "ran\n" * 5


def test_a_start_claimed_before_is_answered_on_the_stream_and_not_run_again(
    one_worker: DaskCluster, tmp_path: Path
) -> None:
    from distributed import Client

    first = _payload(f"claims-first-{time.monotonic_ns()}", tmp_path / "first")
    again = _payload(f"claims-again-{time.monotonic_ns()}", tmp_path / "again")
    earlier = time.time() - 60
    with Client(one_worker.address, timeout=30) as client:
        # The worker has claimed before: its next claim goes on its stream.
        assert client.submit(task.run, first, key=first["key"]).result()["state"] == "completed"
        # A run of ``again`` on a worker since lost had started a minute ago.
        assert client.run_on_scheduler(claim.claim_start, again["key"], earlier) is None
        result = client.submit(task.run, again, key=again["key"]).result()
        streamed = {msg["key"] for _, msg in client.get_events(claim.CLAIM_TOPIC)}
    assert again["key"] in streamed
    assert result["state"] == "failed"
    assert result["start"] == earlier
    assert "not run a second time" in result["reason"]
    assert not (tmp_path / "again").exists()


def test_the_same_claim_made_twice_is_answered_as_the_first() -> None:
    class Scheduler:
        pass

    scheduler = Scheduler()
    assert claim.claim_start("k", 1.5, scheduler) is None
    assert claim.claim_start("k", 1.5, scheduler) is None  # asked again: still its own
    assert claim.claim_start("k", 2.5, scheduler) == 1.5  # another run: the earlier start


def test_a_polls_one_call_releases_what_was_written_and_answers_only_keys_with_news(
    one_worker: DaskCluster, tmp_path: Path
) -> None:
    from distributed import Client, Event

    from ganga_like_dask import scheduler_side

    def gated(name: str) -> int:
        Event(name).wait()
        return 0

    token = time.monotonic_ns()
    gate = f"observe-gate-{token}"
    ended, written, queued = (f"observe-{what}-{token}" for what in ("ended", "written", "q"))
    with Client(one_worker.address, timeout=30) as client:
        done = [
            client.submit(task.run, _payload(key, tmp_path / "ran"), key=key)
            for key in (ended, written)
        ]
        client.gather(done)
        assert client.run_on_scheduler(scheduler_side.hold, [ended, written]) == []
        del done  # held by the scheduler now
        # The worker's one thread is held: this one stays queued, its program not started.
        running = client.submit(gated, gate, key=f"observe-running-{token}")
        queued_future = client.submit(task.run, _payload(queued, tmp_path / "q"), key=queued)
        # (Its graph may reach the scheduler after this call: held once it has.)
        wait_for(
            lambda: client.run_on_scheduler(scheduler_side.hold, [queued]) == [],
            60,
            "the scheduler to know the queued task",
        )
        keys = [ended, queued]
        answer = client.run_on_scheduler(
            scheduler_side.observe, keys, [written], task.STARTED_TOPIC
        )
        assert set(answer) == {ended}, answer
        assert answer[ended][0] == "memory"
        assert answer[ended][1] is not None  # when its program started

        def held(dask_scheduler: Any = None) -> list[str]:
            holder = dask_scheduler.clients[scheduler_side.HOLDER]
            return sorted(ts.key for ts in holder.wants_what)

        assert written not in client.run_on_scheduler(held)
        Event(gate, client=client).set()
        running.result()
        queued_future.result()
        client.run_on_scheduler(scheduler_side.release, [ended, queued])


def test_what_is_left_to_release_is_released_when_the_session_closes(
    one_worker: DaskCluster, tmp_path: Path
) -> None:
    from distributed import Client

    from ganga_like_dask import scheduler_side
    from ganga_like_dask.dask_clients import DaskConnections

    key = f"left-to-release-{time.monotonic_ns()}"

    def known(dask_scheduler: Any = None) -> bool:
        return key in dask_scheduler.tasks

    with Client(one_worker.address, timeout=30) as client:
        future = client.submit(task.run, _payload(key, tmp_path / "ran"), key=key)
        future.result()
        assert client.run_on_scheduler(scheduler_side.hold, [key]) == []
        del future  # held by the scheduler alone
        connections = DaskConnections()
        connections.client_for(one_worker.address, 10.0)
        # Written by a cycle whose next call never came: the session closes.
        connections.release_later(one_worker.address, [key])
        assert client.run_on_scheduler(known)
        connections.close()
        wait_for(lambda: not client.run_on_scheduler(known), 60, "the key to be released")
