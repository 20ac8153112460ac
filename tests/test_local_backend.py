"""The Local backend end to end: real processes run by the detached runner."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ganga_like import (
    ArgSplitter,
    DatasetSplitter,
    Executable,
    GangaDataset,
    GenericSplitter,
    Job,
    JobError,
    LocalFile,
    jobs,
)
from ganga_like.runtime.session import Session

from .waiting import wait_until


def script(tmp_path: Path, name: str, body: str, executable: bool = True) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755 if executable else 0o644)
    return str(path)


def test_stdout_stderr_exit_code_and_times_are_recorded(session: Session, tmp_path: Path) -> None:
    exe = script(tmp_path, "prog.sh", 'echo "out $1"; echo "err $1" >&2; exit "$2"\n')
    j = Job(application=Executable(exe=exe), splitter=ArgSplitter(args=[["a", 0], ["b", 4]]))
    j.submit()
    assert j.wait(timeout=60) == "failed"
    ok, bad = j.subjobs[0], j.subjobs[1]
    assert (ok.outputdir / "stdout").read_text() == "out a\n"
    assert (bad.outputdir / "stderr").read_text() == "err b\n"
    assert ok.exit_code == 0 and bad.exit_code == 4
    assert (bad.outputdir / "__run__").exists()
    assert set(ok.time) >= {"submitted", "running", "completed"}
    assert ok.time["running"] <= ok.time["completed"]


def test_missing_or_not_executable_program_fails_only_that_subjob(
    session: Session, tmp_path: Path
) -> None:
    good = script(tmp_path, "good.sh", "exit 0\n")
    plain = script(tmp_path, "plain.sh", "exit 0\n", executable=False)
    j = Job(
        application=Executable(exe=good),
        splitter=GenericSplitter(
            attribute="application.exe", values=[good, str(tmp_path / "gone.sh"), plain, good]
        ),
    )
    j.submit()
    assert j.wait(timeout=60) == "failed"
    statuses = [s.status for s in j.subjobs]
    assert statuses == ["completed", "failed", "failed", "completed"]
    assert "program not found" in j.subjobs[1].history[-1].cause
    assert "not executable" in j.subjobs[2].history[-1].cause
    assert [e.new for e in j.subjobs[1].history] == ["submitted", "failed"]


def test_a_missing_program_for_the_whole_job_is_refused_before_anything_changes(
    session: Session,
) -> None:
    j = Job(application=Executable(exe="/no/such/program"), splitter=ArgSplitter(args=[["1"]]))
    with pytest.raises(JobError, match="program not found or not executable: /no/such/program"):
        j.submit()
    assert j.status == "new" and j.subjobs == [] and j.history == []


def test_output_patterns_are_collected_and_a_pattern_matching_nothing_fails(
    session: Session, tmp_path: Path
) -> None:
    exe = script(tmp_path, "make.sh", 'test "$1" = yes && echo data > result.dat; exit 0\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[["yes"], ["no"]]),
        outputfiles=[LocalFile("*.dat")],
    )
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert (j.subjobs[0].outputdir / "result.dat").read_text() == "data\n"
    assert j.subjobs[1].status == "failed"
    assert "output pattern '*.dat' matched no file" in j.subjobs[1].history[-1].cause


def test_input_files_are_copied_into_the_input_dir_and_visible_to_the_program(
    session: Session, tmp_path: Path
) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("42\n")
    j = Job(
        application=Executable(exe="cat", args=["numbers.txt"]), inputfiles=[LocalFile(str(data))]
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert (j.inputdir / "numbers.txt").read_text() == "42\n"
    assert (j.outputdir / "stdout").read_text() == "42\n"


def test_dataset_splitter_gives_each_subjob_its_files(session: Session, tmp_path: Path) -> None:
    files = []
    for i in range(5):
        f = tmp_path / f"f{i}.txt"
        f.write_text(f"{i}\n")
        files.append(str(f))
    j = Job(
        application=Executable(exe="sh", args=["-c", 'echo "$GANGA_INPUTDATA"']),
        inputdata=GangaDataset(files=files),
        splitter=DatasetSplitter(files_per_subjob=2, max_files=5),
    )
    j.submit()
    assert len(j.subjobs) == 3
    assert j.wait(timeout=60) == "completed"
    seen = [(s.outputdir / "stdout").read_text().strip().split(os.pathsep) for s in j.subjobs]
    assert seen == [files[0:2], files[2:4], files[4:5]]


def test_generic_splitter_multi_attrs(session: Session) -> None:
    j = Job(
        application=Executable(exe="sh"),
        splitter=GenericSplitter(
            multi_attrs={
                "application.args": [["-c", "echo $X"], ["-c", "echo $X"]],
                "application.env": [{"X": "one"}, {"X": "two"}],
            }
        ),
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert [(s.outputdir / "stdout").read_text() for s in j.subjobs] == ["one\n", "two\n"]


def test_subjob_environment_says_who_it_is(session: Session) -> None:
    j = Job(
        application=Executable(
            exe="sh",
            args=["-c", "echo $GANGA_JOB_ID $GANGA_SUBJOB_ID $GANGA_MASTER_ID $GANGA_FQID"],
        ),
        splitter=GenericSplitter(attribute="name", values=["a", "b"]),
    )
    j.submit()
    j.wait(timeout=60)
    assert (j.subjobs[1].outputdir / "stdout").read_text().split() == [
        "1",
        "1",
        str(j.id),
        f"{j.id}.1",
    ]


def test_arguments_reach_the_program_unchanged_without_a_shell(session: Session) -> None:
    weird = [
        "$(touch /tmp/never)",
        "a b",
        "'q'",
        '"dq"',
        "semi;colon",
        "new\nline",
        "ünï",
        "*",
        "`ls`",
        "",
    ]
    j = Job(
        application=Executable(
            exe=sys.executable,
            args=["-c", "import sys,json;print(json.dumps(sys.argv[1:]))", *weird],
        )
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    import json

    assert json.loads((j.outputdir / "stdout").read_text()) == weird


def test_kill_reaches_the_whole_process_group(session: Session, tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    exe = script(tmp_path, "spawn.sh", f"sleep 300 & echo $! > {marker}; wait\n")
    j = Job(application=Executable(exe=exe))
    j.submit()
    assert j.wait(timeout=30, until="running") == "running"
    deadline = time.time() + 10
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.05)
    grandchild = int(marker.read_text())
    assert j.kill()
    assert j.status == "killed"
    deadline = time.time() + 10
    while _alive(grandchild) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_kill_of_a_queued_subjob_and_resubmit(session: Session) -> None:
    # concurrency is 2: the third subjob waits in the runner's queue
    j = Job(application=Executable(exe="sleep"), splitter=ArgSplitter(args=[[60], [60], [0]]))
    j.submit()
    assert j.subjobs[2].kill()
    assert j.subjobs[2].status == "killed"
    j.subjobs[0].kill()
    j.subjobs[1].kill()
    assert j.status == "killed"
    assert j.subjobs[2].resubmit()
    assert j.subjobs[2].wait(timeout=60) == "completed"
    assert j.status == "completed"
    assert [e.new for e in j.subjobs[2].history] == [
        "submitted",
        "killed",
        "submitting",
        "submitted",
        "running",
        "completed",
    ]


def test_removing_a_running_job_kills_it(session: Session) -> None:
    j = Job(application=Executable(exe="sleep", args=[300]))
    j.submit()
    j.wait(timeout=30, until="running")
    assert j.remove()
    assert len(jobs) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and ") Z " not in stat.read_text()


def test_a_runner_killed_with_sigkill_is_restarted_and_the_job_ends_by_itself(
    session: Session, tmp_path: Path
) -> None:
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    # Subjobs 0 and 1 (two run at once) hang until the runner has died; 2 and 3 are quick.
    gate = tmp_path / "runner-died"
    exe = script(
        tmp_path,
        "prog.sh",
        f"""
        if [ "$1" = hang ]; then
            echo $$ > "{tmp_path}/pid.$2"
            while [ ! -e "{gate}" ]; do sleep 0.05; done
            sleep 30
        fi
        echo "done $2"
        """,
    )
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[["hang", 0], ["hang", 1], ["quick", 2], ["quick", 3]]),
    )
    j.submit()
    assert wait_until(lambda: [s.status for s in j.subjobs][:2] == ["running", "running"])
    runners = runner_dir(session.repo.gangadir)
    dead = runner_client.runner_pid(runners)
    assert dead is not None
    os.kill(dead, 9)
    assert wait_until(lambda: not _alive(dead))
    gate.touch()

    assert j.wait(timeout=60) == "failed"  # no user action: the monitor restarted the runner
    assert [s.status for s in j.subjobs] == ["failed", "failed", "completed", "completed"]
    for index in (0, 1):
        cause = j.subjobs[index].history[-1].cause
        assert "the runner died while it ran" in cause, cause
        orphan = int((tmp_path / f"pid.{index}").read_text())
        assert wait_until(lambda orphan=orphan: not _alive(orphan))  # killed, not left behind
    assert (j.subjobs[3].outputdir / "stdout").read_text() == "done 3\n"
    revived = runner_client.runner_pid(runners)
    assert revived is not None and revived != dead


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, it was read
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def test_a_job_writing_to_its_input_leaves_the_users_file_alone(
    session: Session, tmp_path: Path
) -> None:
    source = tmp_path / "src.txt"
    source.write_text("original\n")
    j = Job(
        application=Executable(exe="sh", args=["-c", "echo APPENDED >> src.txt; cat src.txt"]),
        inputfiles=[LocalFile(str(source))],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert (j.outputdir / "stdout").read_text() == "original\nAPPENDED\n"
    assert source.read_text() == "original\n"
    assert source.stat().st_nlink == 1
    kept = j.outputdir.parent / "input" / "src.txt"
    assert kept.read_text() == "original\n" and kept.stat().st_mode & 0o777 == 0o600
    # The copy kept with the job is the input as submitted: a resubmission sees it again.
    j.resubmit()
    assert j.wait(timeout=60) == "completed"
    assert (j.outputdir / "stdout").read_text() == "original\nAPPENDED\n"
    assert source.read_text() == "original\n" and source.stat().st_nlink == 1


def test_a_token_in_the_environment_reaches_the_job_but_never_the_gangadir(
    session: Session, gangadir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BEARER_TOKEN (a grid credential) is left out of the runner's batch files; the job
    gets it from the runner's own environment, which this session gave it. Looked at while
    the job runs: a batch file is deleted once its jobs have ended."""
    token = "eyJ-secret-token-" + os.urandom(8).hex()
    monkeypatch.setenv("BEARER_TOKEN", token)
    monkeypatch.setenv("BEARER_TOKEN_FILE", "/run/user/token")  # a path: passed as it is
    gate = tmp_path / "gate"
    program = f'echo "$BEARER_TOKEN $BEARER_TOKEN_FILE"; while [ ! -e {gate} ]; do sleep 0.05; done'
    j = Job(application=Executable(exe="sh", args=["-c", program]))
    j.submit()
    stdout = j.outputdir / "stdout"
    assert wait_until(lambda: stdout.exists() and stdout.stat().st_size > 0, timeout=60)
    try:
        holding = [
            path
            for path in gangadir.rglob("*")
            if path.is_file() and path != stdout and token.encode() in path.read_bytes()
        ]
    finally:
        gate.touch()
    assert holding == []
    assert j.wait(timeout=60) == "completed"
    assert stdout.read_text() == f"{token} /run/user/token\n"
