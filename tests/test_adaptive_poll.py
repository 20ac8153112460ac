"""The batch poll's adaptive gap: the scheduler is asked often while (sub)jobs change
state and less and less often while nothing does, never less often than the configured
``poll_interval``. The rule alone first, then watched against a real Slurm."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from ganga_like.batch.polling import BatchPoller, next_poll_gap
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.model.interfaces import ActiveRef, PollContext
from ganga_like_slurm import slurm_commands, slurm_polling
from ganga_like_slurm.settings import Slurm as SlurmSection

from .slurm_up import slurm_answers


def test_a_change_brings_the_gap_down_to_the_floor() -> None:
    assert next_poll_gap(5.0, True, 1.0, 5.0) == 1.0
    assert next_poll_gap(1.0, True, 1.0, 5.0) == 1.0


def test_each_poll_seeing_nothing_new_doubles_the_gap_up_to_the_configured_interval() -> None:
    gaps = [1.0]
    for _ in range(5):
        gaps.append(next_poll_gap(gaps[-1], False, 1.0, 5.0))
    assert gaps == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_the_configured_interval_bounds_the_gap_even_below_the_floor() -> None:
    assert next_poll_gap(0.0, True, 1.0, 0.3) == 0.3
    assert next_poll_gap(0.3, False, 1.0, 0.3) == 0.3
    assert next_poll_gap(0.0, False, 0.0, 0.0) == 0.0  # poll_interval 0: every cycle


@pytest.mark.slurm
def test_against_slurm_the_gap_lengthens_while_a_job_runs_and_shortens_when_it_ends(
    tmp_path: Path,
) -> None:
    if shutil.which("sbatch") is None or not slurm_answers():
        pytest.skip(
            "no Slurm controller answers: start one with scripts/start-slurm.sh "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )
    slurm_id = slurm_commands.sbatch(
        f"#!/bin/bash\n#SBATCH --output=/dev/null\n#SBATCH --chdir={tmp_path}\nsleep 5\n",
        timeout=30,
    )
    ctx = PollContext(
        tmp_path,
        tmp_path / "workspace",
        ConfigSnapshot.of(
            {SlurmSection: {"poll_interval": 1.6, "min_poll_interval": 0.2, "command_timeout": 30}}
        ),
    )
    refs = [ActiveRef(1, None, 1, {"id": slurm_id})]
    polls: list[tuple[float, list[str]]] = []  # (gap after the poll, statuses it reported)
    deadline = time.monotonic() + 90
    try:
        while refs and time.monotonic() < deadline:
            reports = slurm_polling.poll(ctx, refs)
            poller = ctx.poller_as(BatchPoller)
            if poller.polled_at.staged:  # the controller was asked
                gap = poller.poll_gap.latest
                assert gap is not None
                # (a report of what an ended job used repeats its status: not a change)
                polls.append((gap, [str(r.status) for r in reports if r.usage is None]))
            poller.cycle_committed()  # as the monitor does after its commit
            if any(str(r.status) == "completed" for r in reports):
                refs = []
            time.sleep(0.02)  # the monitor's cycle while jobs change
    finally:
        if refs:
            slurm_commands.scancel({slurm_id})
    assert not refs, f"the job did not complete: {polls}"
    gaps = [gap for gap, _ in polls]
    running = next(i for i, (_, s) in enumerate(polls) if "running" in s)
    assert gaps[running] == 0.2  # a change: asked again soon
    # Then, nothing changing while it sleeps: 0.4, 0.8, then the bound, 1.6.
    assert gaps[running + 1 : running + 4] == [0.4, 0.8, 1.6], polls
    assert max(gaps) == 1.6
    # It ended: the finishing job (squeue then sacct) brought the gap down again.
    assert polls[-1][1] == ["completed"] and gaps[-1] == 0.2, polls
