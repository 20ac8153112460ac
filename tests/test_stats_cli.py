"""``ganga stats ID`` from a second process, while the job runs and once it has ended."""

from __future__ import annotations

import json
from pathlib import Path

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.runtime.session import Session

from .test_cli import ganga
from .waiting import wait_for

# The repository is shared with the `ganga stats` processes while this session monitors.
SESSION_SETTINGS = {"repository_mode": "shared"}


def test_ganga_stats_reads_a_running_job_from_another_process(
    session: Session, env_for: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "go"
    wait = f"while [ ! -e {marker} ]; do sleep 0.05; done"
    j = Job(
        application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(
            args=[["-c", wait], ["-c", "exit 0"], ["-c", "exit 2"], ["-c", "exit 2"]]
        ),
    )
    j.submit()
    try:
        wait_for(
            lambda: j.subjobs.stats().counts == {"running": 1, "completed": 1, "failed": 2},
            120,
            "one subjob running, the others ended",
        )
        seen = ganga(["stats", str(j.id), "--json"], env_for)
        assert seen.returncode == 0, seen.stderr
        data = json.loads(seen.stdout)
        assert data["counts"] == {"running": 1, "completed": 1, "failed": 2}
        assert data["failures"] == [
            {
                "exit_code": 2,
                "reason": "exit code 2",
                "count": 2,
                "fqids": [f"{j.id}.2", f"{j.id}.3"],
                "cause": "failed",
                "number": 1,
            }
        ]
        assert data["slowest"][0]["fqid"] == f"{j.id}.0"
        assert data["slowest"][0]["status"] == "running"
        assert data["time_left"] is not None and data["time_left"] > 0
    finally:
        marker.touch()
    assert j.wait(timeout=120) == "failed"
    text = ganga(["stats", str(j.id)], env_for)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"stats of job {j.id}: 4 subjobs"
    assert lines[1].split() == ["status", "completed", "2", "failed", "2"]
    assert f"2: exit code 2: {j.id}.2, {j.id}.3" in text.stdout
    assert "measured 4/4" in text.stdout


def test_ganga_stats_refuses_bad_input_in_one_line(env_for: dict[str, str]) -> None:
    missing = ganga(["stats", "41"], env_for)
    assert (missing.returncode, missing.stderr, missing.stdout) == (3, "ganga: no job 41\n", "")
    bad = ganga(["stats", "x"], env_for)
    assert bad.returncode == 2 and bad.stderr == "ganga: not a job id: 'x'; use 12 or 12.3\n"
    none = ganga(["stats"], env_for)
    assert none.returncode == 2 and len(none.stderr.splitlines()) == 1
    for text in ("-1", "+1", "1_0"):
        signed = ganga(["stats", text], env_for)
        assert (signed.returncode, signed.stderr) == (
            2,
            f"ganga: not a job id: {text!r}; use 12 or 12.3\n",
        )


def test_ganga_resubmit_group_resubmits_the_subjobs_of_the_group_ganga_stats_numbers(
    session: Session, env_for: dict[str, str]
) -> None:
    codes = ["3", "0", "7", "3", "7"]
    j = Job(
        application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(args=[["-c", f"exit {code}"] for code in codes]),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    shown = ganga(["stats", str(j.id)], env_for).stdout
    assert f"failed #2  2: exit code 7: {j.id}.2, {j.id}.4" in shown
    before = [len(sj.history) for sj in j.subjobs]
    done = ganga(["resubmit", str(j.id), "--group", "2", "--yes"], env_for)
    assert done.returncode == 0, done.stderr
    assert j.wait(timeout=120) == "failed"
    after = [len(sj.history) for sj in j.subjobs]
    assert [i for i in range(5) if after[i] != before[i]] == [2, 4]
    refused = ganga(["resubmit", str(j.id), "--group", "9", "--yes"], env_for)
    assert refused.returncode != 0
    assert f"job {j.id}: resubmit(): no failure group 9; it has groups 1 to 2" in refused.stderr
    # Nothing is asked about a group that is not there: the answer "y" is never read.
    unasked = ganga(["resubmit", str(j.id), "--group", "9"], env_for, stdin="y\n")
    assert (unasked.returncode, unasked.stdout) == (1, "")
    assert unasked.stderr.splitlines() == [
        f"ganga: job {j.id}: resubmit(): no failure group 9; it has groups 1 to 2; nothing done"
    ]
    assert [len(sj.history) for sj in j.subjobs] == after
    local = ganga(["resubmit", str(j.id), "--group", "1", "--memory", "4G", "--yes"], env_for)
    assert "its Local backend has no memory to give (nothing done)" in local.stderr
    # What would be refused is refused before anything is asked, bad usage with status 2.
    ids = str(j.id)
    for argv, status, line in (
        (["--memory", "6G"], 2, "ganga: --memory and --walltime go with --group N"),
        (["--group", "1", "--memory", "banana"], 2, "cannot read memory size 'banana'"),
        (["--group", "1", "--memory", "4G"], 1, "its Local backend has no memory to give"),
    ):
        asked = ganga(["resubmit", ids, *argv], env_for, stdin="y\n")
        assert (asked.returncode, asked.stdout) == (status, ""), asked.stderr
        assert len(asked.stderr.splitlines()) == 1 and line in asked.stderr
    assert [len(sj.history) for sj in j.subjobs] == after
