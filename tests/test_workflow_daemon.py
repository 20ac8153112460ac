"""A chain submitted by `ganga script.py`, which exits at once, completed by the monitor
daemon alone; the daemon killed -9 at the worst moments and started again, with no stage
submitted twice (counted in each job's event log)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like.model.stop_points import STOP_VARIABLE
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .daemon_stops import kill_daemon_at
from .test_cli import ganga
from .waiting import wait_for


def chain_script(backend: str = "Local()", width: int = 3) -> str:
    """A script submitting a three-stage chain on ``backend`` (``width`` subjobs first,
    each waiting for the gate file given as its argument), printing the three ids."""
    return f"""\
import sys
gate = sys.argv[1]
wait = ["-c", f"while ! test -e {{gate}}; do sleep 0.05; done"]
a = Job(name="sim", application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(args=[wait] * {width}), backend={backend})
b = Job(name="reco", application=Executable(exe="/bin/true"), after=a, backend={backend})
m = Job(name="merge", application=Executable(exe="/bin/true"), after=b, backend={backend})
for j in (a, b, m):
    j.submit()
print(a.id, b.id, m.id)
"""


CHAIN = chain_script()


def statuses(env: dict[str, str]) -> dict[int, str]:
    listed = ganga(["jobs", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    return {int(row["fqid"]): row["status"] for row in json.loads(listed.stdout)}


def submits(env: dict[str, str], job_id: int) -> int:
    """How many times job ``job_id``'s event log shows it handed to a submission."""
    log = ganga(["log", str(job_id)], env)
    assert log.returncode == 0, log.stderr
    return sum(1 for line in log.stdout.splitlines() if "-> submitting" in line)


@pytest.fixture
def env(env_for: dict[str, str], gangadir: Path) -> Iterator[dict[str, str]]:
    env = dict(env_for)
    env.pop("GANGA_REPOSITORY_MODE", None)  # the default: shared with the daemon
    env.pop(STOP_VARIABLE, None)
    yield env
    ganga(["monitor", "stop"], env)
    with contextlib.suppress(Exception):
        runner_client.stop(runner_dir(gangadir))


def _submit_chain(env: dict[str, str], tmp_path: Path) -> tuple[int, int, int]:
    script = tmp_path / "chain.py"
    script.write_text(CHAIN)
    done = ganga([str(script), str(tmp_path / "gate")], env)
    assert done.returncode == 0, done.stderr
    a, b, m = (int(word) for word in done.stdout.split())
    return a, b, m


def test_a_script_submits_a_chain_and_exits_and_the_daemon_alone_completes_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    a, b, m = _submit_chain(env, tmp_path)
    shown = statuses(env)
    assert shown[b] == "waiting" and shown[m] == "waiting"
    waiting = json.loads(ganga(["jobs", "status=waiting", "--json"], env).stdout)
    assert [row["fqid"] for row in waiting] == [str(b), str(m)]
    why = ganga(["why", str(m)], env)
    assert why.returncode == 0, why.stderr
    assert why.stdout == f"{m} waiting: for {b} (0 done, 0 failed, 1 to go) to be completed\n"
    assert f"after            {a} (completed); waiting for {a} (0 done" in (
        ganga(["show", str(b)], env).stdout
    )
    (tmp_path / "gate").touch()  # the first stage may end: nobody is watching
    started = ganga(["monitor", "start"], env)
    assert started.returncode == 0, started.stderr
    wait_for(lambda: statuses(env)[m] == "completed", 120, "the daemon to complete the chain")
    assert statuses(env) == {a: "completed", b: "completed", m: "completed"}
    assert [submits(env, j) for j in (a, b, m)] == [1, 1, 1]


@pytest.mark.parametrize("point", ["waiting-job-handed", "waiting-job-submitted"])
def test_the_daemon_killed_while_handing_a_waiting_job_over_submits_it_once(
    env: dict[str, str], tmp_path: Path, point: str
) -> None:
    a, b, m = _submit_chain(env, tmp_path)
    kill_daemon_at(env, tmp_path, point, (tmp_path / "gate").touch)
    assert ganga(["monitor", "start"], env).returncode == 0
    wait_for(lambda: statuses(env)[m] == "completed", 120, "the new daemon to end the chain")
    assert [submits(env, j) for j in (a, b, m)] == [1, 1, 1]


def test_the_daemon_killed_mid_chain_and_started_again_completes_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    a, b, m = _submit_chain(env, tmp_path)
    assert ganga(["monitor", "start"], env).returncode == 0
    wait_for(lambda: statuses(env)[a] == "running", 120, "the first stage to run")
    pid = int((Path(env["GANGA_DIR"]) / "monitor-daemon.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    (tmp_path / "gate").touch()  # the first stage ends with no daemon
    wait_for(lambda: ganga(["monitor", "status"], env).stdout.count("not running"), 30, "exit")
    assert ganga(["monitor", "start"], env).returncode == 0
    wait_for(lambda: statuses(env)[m] == "completed", 120, "the new daemon to end the chain")
    assert [submits(env, j) for j in (a, b, m)] == [1, 1, 1]


def test_ganga_kill_of_a_job_others_wait_for_needs_dependents(
    env: dict[str, str], tmp_path: Path
) -> None:
    a, b, m = _submit_chain(env, tmp_path)
    refused = ganga(["kill", "--yes", str(a)], env)
    assert refused.returncode == 1
    assert f"job(s) {b} wait for it; say what becomes of them: --dependents skip or" in (
        refused.stderr
    )
    assert statuses(env)[a] in ("submitted", "running")
    done = ganga(["kill", "--yes", "--dependents", "skip", str(a)], env)
    assert done.returncode == 0, done.stderr
    assert statuses(env) == {a: "killed", b: "skipped", m: "skipped"}
    why = ganga(["why", str(m)], env).stdout.splitlines()
    assert why[0] == f"{m} skipped: it waited for {b} to be completed"
    assert why[-1] == f"{a}.0 killed: user: kill"  # the first subjob the kill ended
