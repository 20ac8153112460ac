"""``j.kill()`` of a Local master whose subjobs mostly wait in the runner's queue: every
reader sees every subjob killed (this session, another process, after reopening), the
running ones are signalled at once, the runner goes idle, and a killed subjob can be
resubmitted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from ganga_like import ArgSplitter, Executable, Job, jobs
from ganga_like.config.store import store
from ganga_like.model.stop_points import STOP_VARIABLE
from ganga_like.runtime.monitoring.killed_followed import UNFOLLOW_KEY
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client

from .test_cli import ganga
from .test_local_runner import wait_until

SUBJOBS = 40

READER = """
import json
from ganga_like import jobs
j = jobs(int(__import__("sys").argv[1]))
print(json.dumps({
    "statuses": [s.status for s in j.subjobs],
    "loaded": [j.subjobs[i].status for i in range(len(j.subjobs))],
    "master": j.status,
    "log": [list(e)[1:] for e in j.subjobs[7].history],
}))
"""


KILLER = """
from ganga_like import ArgSplitter, Executable, Job, config
config["Local"]["max_concurrent"] = 2
j = Job(application=Executable(exe="/bin/sleep"), splitter=ArgSplitter(args=[["600"]] * 30))
j.submit()
print(j.id, flush=True)
j.kill()
"""
TIMEOUT = 120.0  # a guard against a hang, never reached unless something is wrong


def _session(gangadir: Path, monitoring: bool = False) -> None:
    open_session(
        Settings(gangadir=gangadir, monitoring=monitoring),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 2}}),
    )


def _read_elsewhere(job_id: int, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", READER, str(job_id)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_killed_master_reads_killed_everywhere_and_its_subjobs_resubmit(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    _session(gangadir)
    try:
        j = Job(
            application=Executable(exe="/bin/sleep"),
            splitter=ArgSplitter(args=[["600"] for _ in range(SUBJOBS)]),
        )
        j.submit()
        assert j.kill()
        assert j.status == "killed"
        assert {s.status for s in j.subjobs} == {"killed"}
        assert {j.subjobs[i].status for i in range(SUBJOBS)} == {"killed"}
        assert j.subjobs[7].history[-1][1:] == ("submitted", "killed", "user: kill")
        assert "status=killed" in repr(j.subjobs[9])
        assert j.stats().counts == {"killed": SUBJOBS}
        # The runner ends every task (the two running ones signalled) and deletes the batch.
        wait_until(lambda: not list(runner_client.batch_keys(runner_dir(gangadir))), 30.0)
        job_id = j.id
    finally:
        close_session()
    seen = _read_elsewhere(job_id, env_for)
    assert seen["statuses"] == seen["loaded"] == ["killed"] * SUBJOBS
    assert seen["master"] == "killed"
    assert seen["log"][-1] == ["submitted", "killed", "user: kill"]
    log = ganga(["log", f"{job_id}.7"], env_for).stdout
    assert "killed" in log.splitlines()[-1] and "user: kill" in log.splitlines()[-1]

    _session(gangadir)  # reopened
    try:
        j = jobs(job_id)
        assert [s.status for s in j.subjobs] == ["killed"] * SUBJOBS
        j.subjobs[7].resubmit()
        assert j.subjobs[7].status in ("submitted", "running")
        assert j.subjobs[7].history[-2][1:3] == ("killed", "submitting")
        assert j.status in ("submitted", "running")
        assert [s.status for s in j.subjobs].count("killed") == SUBJOBS - 1
        j.kill()
        assert {s.status for s in j.subjobs} == {"killed"}
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))


def _followed(job_id: int) -> list[tuple[int, int]]:
    from ganga_like.runtime.session import current_session

    repo = current_session().repo
    repo.connection().transaction_manager.begin()  # what other commits made
    return [key for key in repo.registry().active if key[0] == job_id]


def test_the_monitor_stops_following_subjobs_killed_in_bulk_without_loading_them(
    gangadir: Path,
) -> None:
    _session(gangadir, monitoring=True)
    try:
        j = Job(
            application=Executable(exe="/bin/sleep"),
            splitter=ArgSplitter(args=[["600"] for _ in range(SUBJOBS)]),
        )
        j.submit()
        j.kill()
        master = object.__getattribute__(j, "_impl")
        mark = master._killed_in_bulk
        killed_in_bulk = mark.kills[-1][3]
        assert killed_in_bulk >= SUBJOBS - 2  # all but those seen running
        wait_until(lambda: not _followed(j.id), TIMEOUT)
        wait_until(lambda: not list(runner_client.batch_keys(runner_dir(gangadir))), TIMEOUT)
        # The ends the runner reported were not recorded subjob by subjob: the records of
        # the subjobs killed in bulk are still unwritten.
        assert master._killed_in_bulk.kills[-1][3] == killed_in_bulk
        assert not master._p_jar.root()[UNFOLLOW_KEY]
        assert {s.status for s in j.subjobs} == {"killed"}
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))


def test_a_process_killed_between_the_runners_kill_and_its_record_leaves_it_to_the_monitor(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    stop_file = gangadir.parent / "stopped"
    env = {**env_for, STOP_VARIABLE: f"kill-requested:{stop_file}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLER], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        job_id = int(proc.stdout.readline())
        deadline = time.monotonic() + TIMEOUT
        while not stop_file.exists():
            assert proc.poll() is None, "the killing process ended before its stop"
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    _session(gangadir, monitoring=True)
    try:
        j = jobs(job_id)
        # The runner killed every task; the next monitor records each end it reports.
        assert j.wait(timeout=TIMEOUT) == "killed"
        assert {s.status for s in j.subjobs} == {"killed"}
        assert j.subjobs[10].history[-1][2] == "killed"
        assert not _followed(job_id)
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
