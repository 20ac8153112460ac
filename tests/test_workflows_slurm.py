"""A streaming map, a callback and an Iterate on a real Slurm (tests marked ``slurm``),
each submitted by a script that exits at once and driven by the monitor daemon alone."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .slurm_up import slurm_answers
from .test_job_callbacks_daemon import daemon_env, stop_daemon
from .workflow_backends import (
    MODULE,
    MODULE_TEXT,
    callback_script,
    check_callback,
    check_iterate,
    check_stream,
    iterate_script,
    start_daemon,
    stream_script,
    submitted,
)

pytestmark = pytest.mark.slurm

FAST = ["--Slurm.poll_interval=0.5"]
PATIENCE = 240


@pytest.fixture
def env(env_for: dict[str, str], gangadir: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    if subprocess.run(["which", "sbatch"], capture_output=True).returncode != 0:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(f"no Slurm controller (SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})")
    env = daemon_env(env_for, tmp_path, MODULE, MODULE_TEXT)
    env["CALLBACK_MARKS"] = str(tmp_path)
    yield env
    stop_daemon(env, gangadir)


def test_a_streaming_map_on_slurm_is_streamed_by_the_daemon_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    a, b = submitted(env, tmp_path, stream_script("Slurm()"), FAST)
    start_daemon(env, FAST)
    check_stream(env, a, b, PATIENCE)


def test_a_callback_on_a_slurm_job_is_run_by_the_daemon_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    (job_id,) = submitted(env, tmp_path, callback_script("Slurm()"), FAST)
    start_daemon(env, FAST)
    check_callback(env, tmp_path, job_id, PATIENCE)


def test_an_iterate_on_slurm_is_converged_by_the_daemon_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    (fit,) = submitted(env, tmp_path, iterate_script("Slurm()"), FAST)
    start_daemon(env, FAST)
    check_iterate(env, fit, PATIENCE)
