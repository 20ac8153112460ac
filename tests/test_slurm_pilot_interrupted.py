"""A Slurm pilot whose submitting session was killed (kill -9) once sbatch had answered:
the next session records what the allocation received and ran; nothing runs twice.

Its own module: each test opens and closes the process's session, which the module-scoped
session of tests/test_slurm_pilot.py must not share."""

from __future__ import annotations

from pathlib import Path

import pytest

from ganga_like.runtime.session import close_session
from ganga_like_slurm import slurm_commands

from .backends import CASES, kill_9_submitter_at, open_case_session
from .test_slurm_pilot import sbatch_calls, script
from .waiting import wait_for


@pytest.mark.slurm
@pytest.mark.parametrize("point", ["scheduler-accepted", "handed-over"])
def test_a_pilot_whose_submitter_was_killed_after_sbatch_runs_each_subjob_once(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path, point: str
) -> None:
    """kill -9 of the submitting session once sbatch has answered (before the submission
    log has the pilot's id, and after): the pilot runs its 200 subjobs with nobody
    watching; the next session records what it ran instead of rolling the job back, and
    its submit() runs nothing again."""
    count = 200
    ran = tmp_path / "ran"
    exe = script(tmp_path, "mark.sh", f'echo "$1" >> "{ran}"\n')
    case = CASES["SlurmPilot"]
    case.available()
    kill_9_submitter_at(case, gangadir, env_for, Path(exe), count, point)
    wait_for(lambda: ran.exists() and len(ran.read_text().split()) == count, 300, "the pilot")
    session = open_case_session(case, gangadir)  # recovers the interrupted submission
    before = sbatch_calls()
    try:
        from ganga_like import jobs

        j = jobs(0)
        if j.status == "new":
            j.submit()  # what a user does with a job rolled back
        assert j.wait(timeout=300) == "completed"
        assert sorted(int(i) for i in ran.read_text().split()) == list(range(count))
        assert sbatch_calls() == before  # nothing was submitted again
        assert {s.backend.id for s in j.subjobs} == {j.backend.id}
        first = j.subjobs[0].history
        assert "recovered: the submission was interrupted after the backend received it" in [
            h.cause for h in first
        ]
    finally:
        active = {str(data.get("id")) for (_b, _r, data) in session.registry().active.values()}
        close_session()
        if active - {""}:
            slurm_commands.scancel(sorted(active - {""}))
