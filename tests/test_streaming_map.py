"""A streaming map, ``JobOutput(job, pattern, each=True)``, on the real Local backend in
one session: the downstream grows one subjob per completed upstream subjob while the
upstream still runs (gates prove it, not clocks), each naming the subjob and files it came
from; it closes once the upstream is final; failed upstream subjobs give none, and
``allow_failed`` decides how it ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, JobOutput, LocalFile
from ganga_like.errors import GangaError
from ganga_like.runtime.session import Session
from ganga_like.runtime.workflow import index
from ganga_like_local.settings import Local

from .waiting import wait_for

# Room for every gated upstream subjob and the downstream's at once.
SESSION_CONFIG = {Local: {"max_concurrent": 8, "idle_exit": 5.0}}


def _script(tmp_path: Path, body: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _producer(tmp_path: Path, failing: str = "none") -> Executable:
    """Subjob with argument N waits for ``gate-N``, then writes ``part-N.root`` (or exits
    3 when N is ``failing``)."""
    body = (
        f"while ! test -e {tmp_path}/gate-$1; do sleep 0.05; done\n"
        f'test "$1" = {failing} && exit 3\necho "data $1" > "part-$1.root"'
    )
    return Executable(exe=_script(tmp_path, body, "produce.sh"))


def _reader(tmp_path: Path) -> Executable:
    """Copies each file of its dataset to ``<name>.out``."""
    body = (
        'for f in $(echo "$GANGA_INPUTDATA" | tr : " "); do\n'
        '  cat "$f" > "$(basename "$f").out"\ndone'
    )
    return Executable(exe=_script(tmp_path, body, "read.sh"))


def _upstream(tmp_path: Path, n: int, failing: str = "none") -> Job:
    return Job(
        application=_producer(tmp_path, failing),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
        outputfiles=[LocalFile("*.root")],
    )


def _open(tmp_path: Path, *pieces: int) -> None:
    for piece in pieces:
        (tmp_path / f"gate-{piece}").touch()


def _submits(job: Job) -> int:
    return sum(1 for e in job.history if e.new == "submitting")


def test_the_downstream_grows_a_subjob_per_completed_upstream_subjob_while_it_runs(
    session: Session, tmp_path: Path
) -> None:
    a = _upstream(tmp_path, 3)
    b = Job(
        application=_reader(tmp_path),
        inputdata=JobOutput(a, "*.root", each=True),
        outputfiles=[LocalFile("*.out")],
    )
    assert a.submit() and b.submit()
    assert b.status == "waiting"
    # Every upstream subjob is seen running (each waits at its gate) before one may end.
    wait_for(lambda: [sj.status for sj in a.subjobs] == ["running"] * 3, 120, "a's subjobs")
    _open(tmp_path, 1)  # subjob 1 only: the others still run
    wait_for(lambda: len(b.subjobs) == 1 and b.subjobs[0].status == "completed", 120, "b.0")
    assert [sj.status for sj in a.subjobs] == ["running", "completed", "running"]
    assert a.status == "running" and b.status == "running"  # not final: more to come
    first = b.subjobs[0]
    assert first.inputdata.source == f"{a.id}.1"
    assert [Path(f).name for f in first.inputdata.files] == ["part-1.root"]
    assert (Path(first.outputdir) / "part-1.root.out").read_text() == "data 1\n"
    _open(tmp_path, 0, 2)
    assert b.wait(timeout=120) == "completed"
    assert sorted(sj.inputdata.source for sj in b.subjobs) == [f"{a.id}.{i}" for i in range(3)]
    assert [_submits(sj) for sj in b.subjobs] == [1, 1, 1]
    assert not index.pending(session.repo.connection().root())


def test_what_reads_a_streaming_map_waits_for_it_to_close(session: Session, tmp_path: Path) -> None:
    a = _upstream(tmp_path, 2)
    b = Job(
        application=_reader(tmp_path),
        inputdata=JobOutput(a, "*.root", each=True),
        outputfiles=[LocalFile("*.out")],
    )
    m = Job(application=_reader(tmp_path), inputdata=JobOutput(b, "*.out"))
    for j in (a, b, m):
        j.submit()
    _open(tmp_path, 0)
    wait_for(lambda: len(b.subjobs) == 1 and b.subjobs[0].status == "completed", 120, "b.0")
    assert m.status == "waiting"  # b's subjobs all ended, but b is not closed
    _open(tmp_path, 1)
    assert m.wait(timeout=120) == "completed"
    assert sorted(Path(f).name for f in m.inputdata.files) == ["part-0.root.out", "part-1.root.out"]


def test_a_failed_upstream_subjob_gives_no_subjob_and_allow_failed_decides_the_end(
    session: Session, tmp_path: Path
) -> None:
    a = _upstream(tmp_path, 3, failing="1")
    tolerant = Job(
        application=_reader(tmp_path), inputdata=JobOutput(a, "*.root", each=True), allow_failed=1
    )
    strict = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root", each=True))
    after_strict = Job(application=_reader(tmp_path), after=strict)
    for j in (a, tolerant, strict, after_strict):
        j.submit()
    _open(tmp_path, 0)
    wait_for(lambda: len(strict.subjobs) == 1, 120, "the first streamed subjob")
    _open(tmp_path, 1)
    wait_for(lambda: a.subjobs[1].status == "failed", 120, "the failure")
    _open(tmp_path, 2)
    assert tolerant.wait(timeout=120) == "completed"
    assert sorted(sj.inputdata.source for sj in tolerant.subjobs) == [f"{a.id}.0", f"{a.id}.2"]
    assert after_strict.wait(timeout=120) == "skipped"
    assert strict.wait(timeout=120) == "failed"
    assert len(strict.subjobs) == 1  # nothing more once the failure spoilt it
    cause = f"upstream {a.id}.1 failed (exit 3)"
    assert any(e.cause == f"monitor: no more subjobs: {cause}" for e in strict.history)
    assert after_strict.history[-1].cause == f"monitor: skipped: {cause}"


def test_an_upstream_ended_already_streams_at_once_and_one_not_split_is_one_piece(
    session: Session, tmp_path: Path
) -> None:
    _open(tmp_path, 0, 1, 2)
    a = _upstream(tmp_path, 3)
    single = Job(application=_producer(tmp_path), outputfiles=[LocalFile("*.root")])
    single.application.args = ["0"]
    for j in (a, single):
        j.submit()
    assert a.wait(timeout=120) == "completed" and single.wait(timeout=120) == "completed"
    b = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root", each=True))
    c = Job(application=_reader(tmp_path), inputdata=JobOutput(single, "*.root", each=True))
    assert b.submit() and c.submit()
    assert b.wait(timeout=120) == "completed" and c.wait(timeout=120) == "completed"
    assert len(b.subjobs) == 3 and [sj.inputdata.source for sj in c.subjobs] == [str(single.id)]


def test_an_upstream_with_no_matching_file_skips_the_stream_naming_why(
    session: Session, tmp_path: Path
) -> None:
    a = _upstream(tmp_path, 2)
    b = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "x*.root", each=True))
    for j in (a, b):
        j.submit()
    _open(tmp_path, 0, 1)
    assert b.wait(timeout=120) == "skipped"
    assert b.history[-1].cause == (
        f"monitor: skipped: upstream {a.id} left no output file matching 'x*.root'"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"splitter": ArgSplitter(args=[["1"]])}, "give the job no splitter"),
        ({"when": "failed"}, "when='completed' or 'finished', not 'failed'"),
        ({"after": "other"}, "alone, not also for"),
    ],
)
def test_a_stream_that_cannot_be_is_refused_at_submit_and_nothing_changes(
    session: Session, tmp_path: Path, change: dict[str, object], message: str
) -> None:
    a = _upstream(tmp_path, 1)
    other = Job(application=_reader(tmp_path))
    if change.get("after") == "other":
        change = {"after": other}
    b = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root", each=True))
    for name, value in change.items():
        setattr(b, name, value)
    with pytest.raises(GangaError, match=message) as caught:
        b.submit()
    assert "\n" not in str(caught.value)
    assert b.status == "new" and str(a.id) not in b.after


def test_a_killed_streaming_map_grows_no_more(session: Session, tmp_path: Path) -> None:
    a = _upstream(tmp_path, 3)
    b = Job(application=_reader(tmp_path), inputdata=JobOutput(a, "*.root", each=True))
    later = Job(application=_reader(tmp_path), after=a)  # a stays waited for after b ends
    for j in (a, b, later):
        j.submit()
    _open(tmp_path, 0)
    wait_for(lambda: b.status == "running" and b.subjobs[0].status == "completed", 120, "b.0")
    assert b.kill()
    _open(tmp_path, 1, 2)
    assert later.wait(timeout=120) == "completed"
    assert len(b.subjobs) == 1 and b.status == "completed"
    assert any(e.cause == "user: kill: no more subjobs" for e in b.history)
