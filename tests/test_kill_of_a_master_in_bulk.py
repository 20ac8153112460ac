"""``j.kill()`` of a Local master whose subjobs mostly wait in the runner's queue: every
reader sees every subjob killed (this session, another process, after reopening), the
running ones are signalled at once, the runner goes idle, and a killed subjob can be
resubmitted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ganga_like import ArgSplitter, Executable, Job, jobs
from ganga_like.config.store import store
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


def _session(gangadir: Path) -> None:
    open_session(
        Settings(gangadir=gangadir, monitoring=False),
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
