"""A chain on a real Slurm (tests marked ``slurm``): a split first stage, then two stages
that wait; a failed subjob of the first stage skips the rest naming it; resubmitting it
re-arms the chain, which then completes with every stage submitted once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, Slurm
from ganga_like.runtime.session import Session

from .test_retry_slurm import slurm_session  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slurm


def test_a_chain_on_slurm_is_skipped_at_a_failed_subjob_and_completes_once_it_is_fixed(
    slurm_session: Session,  # noqa: F811
    tmp_path: Path,
) -> None:
    fixed = tmp_path / "fixed"
    program = tmp_path / "stage.sh"
    program.write_text(f'#!/bin/sh\ntest "$1" = ok || test -e {fixed} || exit 3\n')
    program.chmod(0o755)
    sim = Job(
        application=Executable(exe=str(program)),
        splitter=ArgSplitter(args=[["ok"], ["bad"]]),
        backend=Slurm(),
    )
    reco = Job(application=Executable(exe=str(program), args=["ok"]), backend=Slurm(), after=sim)
    merge = Job(application=Executable(exe=str(program), args=["ok"]), backend=Slurm(), after=reco)
    for j in (sim, reco, merge):
        j.submit()
    assert merge.wait(timeout=240) == "skipped"
    cause = f"monitor: skipped: upstream {sim.id}.1 failed (exit 3)"
    assert [reco.history[-1].cause, merge.history[-1].cause] == [cause, cause]

    fixed.touch()
    sim.resubmit()
    assert merge.wait(timeout=240) == "completed"
    assert [j.status for j in (sim, reco, merge)] == ["completed"] * 3
    assert [sum(e.new == "submitting" for e in j.history) for j in (reco, merge)] == [1, 1]
