"""``JobOutput(job, pattern)`` as a job's dataset, on the real Local backend in one
session: the job waits for the one whose outputs it reads, gets their files once it ended
as asked, and is split and submitted as any other; nonsense is refused in one line, with
nothing changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ganga_like import (
    ArgSplitter,
    DatasetSplitter,
    Executable,
    Job,
    JobOutput,
    LocalFile,
    SchemaError,
)
from ganga_like.errors import GangaError
from ganga_like.runtime.session import Session


def _script(tmp_path: Path, body: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _producer(tmp_path: Path) -> Executable:
    """Waits for the gate, then writes ``part-<arg>.root`` and a log."""
    gate = tmp_path / "gate"
    body = (
        f"while ! test -e {gate}; do sleep 0.05; done\n"
        'echo "data $1" > "part-$1.root"\necho log > run.log'
    )
    return Executable(exe=_script(tmp_path, body, "produce.sh"))


def _reader(tmp_path: Path) -> Executable:
    """Prints every file of its dataset ($GANGA_INPUTDATA), one a line."""
    body = 'echo "$GANGA_INPUTDATA" | tr : "\\n" | while read -r f; do cat "$f"; done'
    return Executable(exe=_script(tmp_path, body, "read.sh"))


def _outputs() -> list[LocalFile]:
    return [LocalFile("*.root"), LocalFile("run.log")]


def _stdout(job: Job) -> str:
    return (Path(job.outputdir) / "stdout").read_text()


def test_a_job_reading_outputs_waits_then_runs_over_the_completed_subjobs_files(
    session: Session, tmp_path: Path
) -> None:
    a = Job(
        application=_producer(tmp_path),
        splitter=ArgSplitter(args=[["1"], ["2"], ["3"]]),
        outputfiles=_outputs(),
    )
    whole = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root"))
    split = Job(
        application=_reader(tmp_path),
        inputdata=JobOutput(a, "part-*.root"),
        splitter=DatasetSplitter(files_per_subjob=2),
    )
    assert a.submit() and whole.submit() and split.submit()
    assert whole.status == "waiting" and split.status == "waiting"
    assert whole.after == [str(a.id)] and whole.inputdata.files == []
    (tmp_path / "gate").touch()
    assert whole.wait(timeout=120) == "completed"
    assert split.wait(timeout=120) == "completed"
    assert [Path(f) for f in whole.inputdata.files] == [
        Path(a.subjobs[i].outputdir) / f"part-{i + 1}.root" for i in range(3)
    ]
    assert _stdout(whole).split() == ["data", "1", "data", "2", "data", "3"]
    assert len(split.subjobs) == 2
    assert [len(sj.inputdata.files) for sj in split.subjobs] == [2, 1]
    assert _stdout(split.subjobs[1]).split() == ["data", "3"]
    assert sum(1 for e in whole.history if e.new == "submitting") == 1


def test_a_failed_upstream_subjob_counts_against_allow_failed_and_gives_no_file(
    session: Session, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    body = (
        f"while ! test -e {gate}; do sleep 0.05; done\n"
        'test "$1" = 2 && exit 3\necho "data $1" > "part-$1.root"'
    )
    a = Job(
        application=Executable(exe=_script(tmp_path, body, "some_fail.sh")),
        splitter=ArgSplitter(args=[["1"], ["2"], ["3"]]),
        outputfiles=[LocalFile("*.root")],
    )
    tolerant = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root"), allow_failed=1)
    strict = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root"))
    for j in (a, tolerant, strict):
        j.submit()
    gate.touch()
    assert tolerant.wait(timeout=120) == "completed"
    assert _stdout(tolerant).split() == ["data", "1", "data", "3"]
    assert strict.wait(timeout=120) == "skipped"
    assert strict.history[-1].cause == f"monitor: skipped: upstream {a.id}.1 failed (exit 3)"


def test_an_upstream_that_left_no_matching_file_skips_the_reader_naming_why(
    session: Session, tmp_path: Path
) -> None:
    a = Job(application=_producer(tmp_path), outputfiles=_outputs())
    a.application.args = ["1"]
    reader = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "x*.root"))
    after_it = Job(application=_reader(tmp_path), after=reader)
    for j in (a, reader, after_it):
        j.submit()
    (tmp_path / "gate").touch()
    assert a.wait(timeout=120) == "completed"
    assert after_it.wait(timeout=120) == "skipped"
    cause = f"upstream {a.id} left no output file matching 'x*.root'"
    assert reader.status == "skipped"
    assert reader.history[-1].cause == f"monitor: skipped: {cause}"
    assert after_it.history[-1].cause == f"monitor: skipped: {cause}"
    assert sum(1 for e in reader.history if e.new == "submitting") == 0


def test_reading_a_completed_job_resolves_at_submit_and_no_file_is_refused_there(
    session: Session, tmp_path: Path
) -> None:
    (tmp_path / "gate").touch()
    a = Job(application=_producer(tmp_path), outputfiles=_outputs())
    a.application.args = ["7"]
    a.submit()
    assert a.wait(timeout=120) == "completed"
    reader = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root"))
    assert reader.submit()
    assert reader.wait(timeout=120) == "completed"
    assert _stdout(reader).split() == ["data", "7"]
    logs = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "run.log"))
    assert logs.submit() and logs.wait(timeout=120) == "completed"
    nothing = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "x*.root"))
    with pytest.raises(GangaError, match=r"left no output file matching 'x\*\.root'"):
        nothing.submit()
    assert nothing.status == "new" and nothing.after == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda a: JobOutput("not a job", "*.root"), "JobOutput.job: expected"),
        (lambda a: JobOutput(a, 3), "JobOutput.pattern: expected"),
        (lambda a: JobOutput(a, ""), "JobOutput.pattern: expected"),
        (lambda a: JobOutput(a, ["*.root"]), "JobOutput.pattern: expected"),
    ],
)
def test_a_job_output_of_nonsense_is_refused_in_one_line(
    session: Session, tmp_path: Path, make: object, message: str
) -> None:
    a = Job(application=_producer(tmp_path), outputfiles=_outputs())
    with pytest.raises(SchemaError, match=message) as caught:
        make(a)  # type: ignore[operator]
    assert "\n" not in str(caught.value)


def test_reading_outputs_a_job_cannot_have_is_refused_where_it_is_given(
    session: Session, tmp_path: Path
) -> None:
    a = Job(application=_producer(tmp_path), outputfiles=_outputs())
    with pytest.raises(SchemaError, match=r"cannot match '\*\.txt'") as caught:
        Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.txt"))
    assert "\n" not in str(caught.value)
    reader = Job(application=_reader(tmp_path))
    with pytest.raises(SchemaError, match=r"Job.inputdata: .*cannot match"):
        reader.inputdata = JobOutput(a, "*.txt")
    assert reader.inputdata is None
    with pytest.raises(SchemaError, match="cannot read its own outputs"):
        reader.inputdata = JobOutput(reader, "stdout")
    reader.inputdata = JobOutput(a, "stdout")  # what every run writes
    a.remove()
    with pytest.raises(GangaError, match="does not exist"):
        reader.submit()
    assert reader.status == "new" and reader.after == []
    with pytest.raises(SchemaError, match="does not exist"):
        Job(application=_reader(tmp_path), inputdata=JobOutput(a.id, "*.root"))
