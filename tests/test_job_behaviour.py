"""What users meet every day: a master's status while its subjobs run, a submitted job's
frozen description, and one clear line for every mistake."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import transaction

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaDataset,
    Job,
    JobError,
    LocalFile,
    SchemaError,
    jobs,
)
from ganga_like.model.base import MAX_NESTING
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session

from .split_jobs import two_subjobs_running_one_waiting
from .waiting import wait_for


def test_a_split_job_is_running_as_soon_as_one_subjob_runs_while_others_wait(
    session: Session,
) -> None:
    with two_subjobs_running_one_waiting() as j:
        assert j.status == "running"
        # The status index (queries, the toolbar, `ganga list`) says the same.
        wait_for(lambda: j.id in jobs.query("status=running").ids(), 30, "the index to say running")


def _stored_job(session: Session, job_id: int) -> Any:
    """The job as a fresh connection reads it from the repository."""
    conn = session.repo.db.open(transaction_manager=transaction.TransactionManager())
    return conn, Registry(conn.root()).get(job_id)


def test_a_submitted_jobs_description_is_frozen_at_every_depth(session: Session) -> None:
    j = Job(
        application=Executable(exe="true", args=["a"], env={"K": "v"}),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        inputdata=GangaDataset(files=["/x"]),
        outputfiles=[LocalFile("out.txt")],
    )
    j.submit()
    status = j.wait(timeout=60)
    edits: dict[str, Callable[[], object]] = {
        "application.exe": lambda: setattr(j.application, "exe", "ls"),
        "application.args": lambda: j.application.args.append("b"),
        "application.env": lambda: setattr(j.application, "env", {"K": "w"}),
        "splitter.args": lambda: j.splitter.args[0].append("z"),
        "inputdata.files": lambda: j.inputdata.files.append("/y"),
        "outputfiles[0].namePattern": lambda: setattr(j.outputfiles[0], "namePattern", "x"),
        "outputfiles": lambda: j.outputfiles.append(LocalFile("more.txt")),
        "backend": lambda: setattr(j, "backend", "Local"),
        "splitter": lambda: setattr(j, "splitter", None),
    }
    for path, edit in edits.items():
        with pytest.raises(JobError) as refused:
            edit()
        assert str(refused.value) == (
            f"job {j.id} is {status}: {path} can no longer be changed; copy() the job to change it"
        )
    # What the job ran with is what the repository keeps.
    conn, stored = _stored_job(session, j.id)
    assert stored.application.exe == "true" and stored.application.args == ("a",)
    assert stored.splitter.args == (("1",), ("2",))
    assert stored.inputdata.files == ("/x",)
    assert [f.namePattern for f in stored.outputfiles] == ["out.txt"]
    conn.close()
    # Name and comment are the user's notes: they change at any time.
    j.name, j.comment = "renamed", "a note"
    assert (j.name, j.comment) == ("renamed", "a note")


def test_a_subjob_refuses_changes_naming_the_attribute_and_its_status(session: Session) -> None:
    j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"]]))
    j.submit()
    assert j.wait(timeout=60) == "completed"
    sj = j.subjobs[1]
    with pytest.raises(
        JobError,
        match=rf"^subjob {j.id}\.1 is completed: application\.args "
        "can no longer be changed",
    ):
        sj.application.args.append("x")
    with pytest.raises(JobError, match=r"application\.exe can no longer be changed"):
        sj.application.exe = "ls"
    assert sj.application.args == ["2"]
    sj.comment = "looked at"
    assert sj.comment == "looked at"


def test_a_component_given_to_a_second_job_is_copied_not_shared(session: Session) -> None:
    app = Executable(exe="true", args=["first"])
    j = Job(application=app)
    j.submit()
    j.wait(timeout=60)
    k = Job(application=app)
    k.application.args = ["second"]  # k is new: its own copy changes
    assert j.application.args == ["first"]
    # The object given to j still belongs to j: it is frozen with it.
    with pytest.raises(JobError, match=r"application\.args can no longer be changed"):
        app.args = ["changed"]
    assert j.application.args == ["first"]


def test_lists_inside_lists_change_through_the_list_proxy_and_are_validated(
    session: Session,
) -> None:
    k = Job(splitter=ArgSplitter(args=[["1"], ["2"]]))
    k.splitter.args[0].append("z")
    k.splitter.args[1][0] = 7  # kept as given: the application decides (Executable: "7")
    assert k.splitter.args == [["1", "z"], [7]]
    with pytest.raises(SchemaError, match=r"ArgSplitter\.args"):
        k.splitter.args[0].append(object())
    assert k.splitter.args == [["1", "z"], [7]]
    conn, stored = _stored_job(session, k.id)
    assert stored.splitter.args == (("1", "z"), (7,))
    conn.close()


def _nested(depth: int) -> list[Any]:
    value: list[Any] = ["x"]
    for _ in range(depth):
        value = [value]
    return value


def test_deeply_nested_lists_are_refused_with_one_schema_error(session: Session) -> None:
    message = f"lists or dicts nested more than {MAX_NESTING} deep are not accepted"
    with pytest.raises(SchemaError, match=rf"^Executable\.args: {message}$"):
        Executable(args=_nested(10_000))
    k = Job(splitter=ArgSplitter(args=[["1"]]))
    with pytest.raises(SchemaError, match=rf"^ArgSplitter\.args: {message}$"):
        k.splitter.args = _nested(10_000)
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(SchemaError, match=message):
        k.splitter.args = looped
    assert k.splitter.args == [["1"]]
    # Ordinary nesting is untouched.
    k.splitter.args = [["a", "b"], ["c"]]


def _ganga(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_deeply_nested_json_is_one_line_and_exit_status_1(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    brackets = tmp_path / "brackets.json"
    brackets.write_text("[" * 100_000 + "]" * 100_000)
    result = _ganga(["import", str(brackets)], env_for)
    assert result.returncode == 1  # "1 error" in `ganga import --help`
    assert result.stderr.splitlines() == [
        f"ganga: cannot read {brackets}: its JSON is nested too deeply to be a job export"
    ]

    # Deep, but within what the JSON parser reads: the schema refuses it.
    inside = tmp_path / "inside.json"
    inside.write_text(
        json.dumps(
            {
                "format": "ganga_like.job/1",
                "job": {"application": {"type": "Executable", "args": _nested(500)}},
            }
        )
    )
    result = _ganga(["import", str(inside)], env_for)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"ganga: job.application: lists or dicts nested more than {MAX_NESTING} deep are "
        "not accepted"
    ]
    assert _ganga(["jobs"], env_for).stdout.startswith("jobs: 0\n")  # nothing imported


def test_wrong_status_names_are_one_line_listing_the_valid_ones(session: Session) -> None:
    j = Job(application=Executable(exe="true"))
    j.submit()
    with pytest.raises(
        JobError,
        match=r"^unknown status 'done'; expected one of: new, "
        r"submitting, submitted, running, completing, completed, failed, "
        r"killed, completed_frozen, failed_frozen, waiting, skipped$",
    ):
        j.wait(until="done")
    with pytest.raises(
        JobError,
        match=r"^force_status accepts 'completed' or 'failed', "
        r"not 'done'$",
    ):
        j.force_status("done")
    with pytest.raises(JobError, match="unknown status 'done'"):
        jobs.select(status="done")
    assert j.wait(timeout=60) == "completed"


def test_output_files_in_subdirectories_keep_their_path_and_never_overwrite(
    session: Session,
) -> None:
    script = (
        "mkdir -p sub deeper/still && echo top > out.txt && echo sub > sub/out.txt && "
        "echo deep > deeper/still/out.txt && echo a > a.txt"
    )
    j = Job(
        application=Executable(exe="sh", args=["-c", script]),
        outputfiles=[
            LocalFile("out.txt"),
            LocalFile("sub/out.txt"),
            LocalFile("deeper/still/*.txt"),
            LocalFile("*.txt"),
            LocalFile("a.txt"),
        ],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed", j.history[-1].cause
    out = j.outputdir
    assert (out / "out.txt").read_text() == "top\n"
    assert (out / "sub" / "out.txt").read_text() == "sub\n"
    assert (out / "deeper" / "still" / "out.txt").read_text() == "deep\n"
    assert (out / "a.txt").read_text() == "a\n"  # matched by two patterns, collected once


def test_an_output_file_whose_place_is_taken_stays_and_the_job_says_why(session: Session) -> None:
    # The program's own file named "stdout" would replace the job's captured stdout.
    j = Job(
        application=Executable(exe="sh", args=["-c", "echo printed; echo mine > stdout"]),
        outputfiles=[LocalFile("stdout")],
    )
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert j.history[-1].cause.endswith(
        "output stdout not collected: stdout already exists in the output directory (the "
        "file stays in the work directory)"
    )
    assert (j.outputdir / "stdout").read_text() == "printed\n"
    assert (j.outputdir.parent / "work" / "stdout").read_text() == "mine\n"


def test_the_splitting_designs_order_is_a_configuration_option(tmp_path: Path) -> None:
    from ganga_like import config
    from ganga_like.errors import ConfigError
    from ganga_like.model.status import Status, master_status
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import configured_settings

    assert configured_settings().master_status_order == "running_first"
    with pytest.raises(ConfigError, match=r"Jobs\.master_status_order"):
        config.Jobs.master_status_order = "waiting_first"
    config.Jobs.master_status_order = "submitted_first"
    settings = configured_settings()
    assert settings.master_status_order == "submitted_first"
    settings.gangadir = tmp_path / "gangadir"
    settings.monitoring = False
    open_session(settings)
    try:
        waiting_and_running = {Status.SUBMITTED: 3, Status.RUNNING: 1}.items()
        assert master_status(waiting_and_running) is Status.SUBMITTED
        with pytest.raises(ConfigError, match="cannot change while the repository is open"):
            config.Jobs.master_status_order = "running_first"
    finally:
        close_session()
    config.Jobs.master_status_order = "running_first"
    open_session(dataclasses.replace(settings, master_status_order="running_first"))
    try:
        assert master_status(waiting_and_running) is Status.RUNNING
    finally:
        close_session()
