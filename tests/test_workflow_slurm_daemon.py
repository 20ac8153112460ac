"""A three-stage chain on a real Slurm (tests marked ``slurm``), submitted by a script that
exits at once: the monitor daemon is killed -9 while the first stage runs, the stage ends
with no daemon, a new daemon completes the chain, and the count of submit events per job
(their event logs) shows no stage submitted twice."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .slurm_up import slurm_answers
from .test_cli import ganga
from .test_workflow_daemon import chain_script, env, statuses, submits  # noqa: F401 (the fixture)
from .waiting import wait_for

pytestmark = pytest.mark.slurm

CHAIN = chain_script("Slurm()", 3)
FAST = ["--Slurm.poll_interval=0.5"]


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """The first stage's gate: opened at the end whatever happened, so that no program
    is left waiting on the cluster."""
    if subprocess.run(["which", "sbatch"], capture_output=True).returncode != 0:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(f"no Slurm controller (SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})")
    path = tmp_path / "gate"
    yield path
    path.touch()


def test_a_chain_on_slurm_survives_the_daemon_killed_mid_chain_with_each_stage_submitted_once(
    env: dict[str, str],  # noqa: F811
    gate: Path,
    tmp_path: Path,
) -> None:
    script = tmp_path / "chain.py"
    script.write_text(CHAIN)
    done = ganga([*FAST, str(script), str(gate)], env, timeout=120)
    assert done.returncode == 0, done.stderr
    a, b, m = (int(word) for word in done.stdout.split())

    assert ganga([*FAST, "monitor", "start"], env).returncode == 0
    wait_for(lambda: statuses(env)[a] == "running", 180, "the first stage to run on Slurm")
    pid = int((Path(env["GANGA_DIR"]) / "monitor-daemon.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "not running" in ganga(["monitor", "status"], env).stdout, 30, "exit")
    assert statuses(env)[b] == "waiting"
    gate.touch()  # the first stage ends with no daemon to see it

    assert ganga([*FAST, "monitor", "start"], env).returncode == 0
    wait_for(lambda: statuses(env)[m] == "completed", 300, "the new daemon to end the chain")
    assert statuses(env) == {a: "completed", b: "completed", m: "completed"}
    assert [submits(env, j) for j in (a, b, m)] == [1, 1, 1]
