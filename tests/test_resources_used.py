"""What each subjob's run used (peak memory, CPU, wall time), recorded when the Local
runner reaps it: real processes that allocate and spin."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.model.resources import ResourceUse
from ganga_like.model.status import Status
from ganga_like.runtime.session import Session
from ganga_like_runner.client import stop, submit
from ganga_like_runner.protocol import TaskSpec, read_events

from .split_jobs import submitted_model_master
from .test_local_runner import BASE_ENV, Journal, make_task, out, read_json

MIB = 1024**2

# Holds about $1 MiB of memory and spins $2 CPU seconds; $3 is its exit code.
HUNGRY = (
    "import sys, time\n"
    "block = bytearray(int(sys.argv[1]) * 1024 * 1024)\n"
    "for i in range(0, len(block), 4096): block[i] = 1\n"
    "end = time.process_time() + float(sys.argv[2])\n"
    "while time.process_time() < end: pass\n"
    "sys.exit(int(sys.argv[3]))\n"
)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "runner"
    yield path
    stop(path)


def hungry(mib: int, cpu: float, code: int = 0) -> list[str]:
    return [sys.executable, "-c", HUNGRY, str(mib), str(cpu), str(code)]


def test_the_runner_reports_the_peak_memory_and_cpu_of_the_process_tree(
    tmp_path: Path, runner: Path
) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    # The grandchild allocates, its parent (the shell the runner started) only waits: the
    # reaped shell's usage includes the descendants it waited for.
    tree = ["/bin/sh", "-c", " ".join(f"'{word}'" for word in hungry(120, 0.4)) + "; exit 0"]
    tasks = [
        make_task(tmp_path, "big", hungry(200, 0.5), journal),
        make_task(tmp_path, "small", hungry(10, 0.0, 3), journal),
        make_task(tmp_path, "tree", tree, journal),
    ]
    submit(runner, tasks, BASE_ENV, max_concurrent=3)
    final = journal.wait(["big", "small", "tree"])
    big, small, grand = (final[k].usage for k in ("big", "small", "tree"))
    assert big is not None and small is not None and grand is not None
    assert big[0] * 1024 >= 200 * MIB > small[0] * 1024
    assert grand[0] * 1024 >= 120 * MIB
    assert big[1] + big[2] >= 0.45 and grand[1] + grand[2] >= 0.35
    assert final["small"].exit_code == 3
    # The __run__ record keeps it too, for a runner that dies before the journal line.
    assert read_json(out(tmp_path, "big") / "__run__")["usage"] == big


def test_a_task_that_never_ran_reports_no_usage(tmp_path: Path, runner: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    task = make_task(tmp_path, "gone", [str(tmp_path / "no-such-program")], journal)
    submit(runner, [task], BASE_ENV, max_concurrent=1)
    event = journal.wait(["gone"])["gone"]
    assert event.event == "failed" and event.usage is None


def test_journal_lines_with_and_without_usage_read_alike(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text(
        '{"key":"1.0","event":"started","time":1.0,"exit_code":null,"reason":null,"start":null}\n'
        '{"key":"1.0","event":"completed","time":2.5,"exit_code":0,"reason":null,"start":1.0,'
        '"usage":[2048,0.25,0.125]}\n'
        '{"key":"1.1","event":"failed","time":3.0,"exit_code":2,"reason":"x","start":1.0,'
        '"usage":"nonsense"}\n'
    )
    events, _ = read_events(path, 0)
    assert [e.usage for e in events] == [None, [2048, 0.25, 0.125], "nonsense"]
    # What is not three numbers is not kept (the job keeps what it had).
    _master, (sj,) = submitted_model_master(1)
    sj.record_use(events[2].usage, 1.0, 3.0)
    assert sj.resources_used() is None
    sj.record_use(events[1].usage, 1.0, 2.5)
    assert sj.resources_used() == ResourceUse(2048 * 1024, 0.25, 0.125, 1.5)
    assert TaskSpec  # the protocol's names are the client's


def test_each_subjob_of_a_local_job_keeps_what_it_used(session: Session) -> None:
    j = Job(
        application=Executable(exe=sys.executable),
        splitter=ArgSplitter(
            args=[["-c", HUNGRY, "150", "0.4", "0"], ["-c", HUNGRY, "5", "0", "4"]]
        ),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    big, small = (sj.resources_used for sj in j.subjobs)
    assert big is not None and small is not None
    assert big.max_rss >= 150 * MIB > small.max_rss
    assert big.cpu >= 0.35 and big.wall >= big.cpu * 0.5
    assert j.subjobs[1].exit_code == 4


def test_a_new_run_forgets_what_the_last_one_used() -> None:
    _master, (sj,) = submitted_model_master(1)
    sj.change_status(Status.RUNNING, "test", when=10.0)
    sj.change_status(Status.FAILED, "test", when=12.5)
    sj.record_use([4096, 1.5, 0.25], 10.0, 12.5)
    assert sj.resources_used() == ResourceUse(4 * MIB, 1.5, 0.25, 2.5)
    sj.change_status(Status.SUBMITTING, "user: resubmit")
    assert sj.resources_used() is None and "_used" not in sj.__dict__
