"""A streaming map's record, driven through any order of upstream changes (subjobs
completing, failing, resubmitted) and of monitor passes, some of which die before they
commit, on a real FileStorage repository: each completed upstream subjob gets exactly
one downstream subjob, naming it, and the downstream is final exactly when the upstream
is and every completed subjob's subjob is made."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like.model.job import Job
from ganga_like.model.job_output import JobOutput
from ganga_like.model.status import Status
from ganga_like.repository.connection import Repository
from ganga_like.runtime.workflow import engine, index, stream

PIECES = 5

_steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["complete", "fail", "resubmit"]), st.integers(0, PIECES - 1)),
        st.tuples(st.sampled_from(["drive", "crash"]), st.just(0)),
    ),
    max_size=30,
)


def _build(repo: Repository, workspace: Path) -> tuple[int, int]:
    ids: list[int] = []

    def add() -> None:
        registry = repo.registry()
        up = Job()
        registry.add(up)
        up.attach_subjobs([Job.new_subjob(up, i) for i in range(PIECES)])
        for sj in up.iter_subjobs():
            sj.change_status(Status.SUBMITTED, "test")
            out = workspace / str(up.id) / str(sj.id) / "output"
            out.mkdir(parents=True)
            (out / "part.root").write_text(str(sj.id))
        down = Job(
            inputdata=JobOutput(job=str(up.id), pattern="*.root", each=True), when="finished"
        )
        down._assign("after", (str(up.id),))
        registry.add(down)
        down.change_status(Status.WAITING, "test")
        index.add_dependent(registry.root, str(up.id), down.id)
        registry.reindex(up)
        registry.reindex(down)
        ids[:] = [up.id, down.id]

    repo.in_transaction(add, what="building")
    return ids[0], ids[1]


def _change(repo: Repository, up_id: int, piece: int, step: str) -> None:
    def change() -> None:
        registry = repo.registry()
        sj = registry.get(up_id).subjob(piece)
        status = Status.parse(sj.status)
        if step == "complete" and status is Status.SUBMITTED:
            sj.change_status(Status.RUNNING, "test")
            sj.change_status(Status.COMPLETED, "test")
        elif step == "fail" and status is Status.SUBMITTED:
            sj.change_status(Status.FAILED, "test")
        elif (step == "resubmit" and status in (Status.FAILED, Status.COMPLETED)) or (
            step == "resubmit_failed" and status is Status.FAILED
        ):
            sj.change_status(Status.SUBMITTING, "test")
            sj.change_status(Status.SUBMITTED, "test")
        else:
            return
        top = registry.get(up_id)
        registry.reindex(top)
        engine.upstream_changed(registry, [top], "test")

    repo.in_transaction(change, what=f"{step} {piece}")


def _drive(repo: Repository, workspace: Path, down_id: int, crash: bool) -> None:
    """What the monitor's pass does in its first transaction; a crash: never committed."""
    registry = repo.registry()
    repo.abort()
    if index.pending(registry.root) is None or down_id not in index.pending(registry.root):
        return
    down = registry.get(down_id)
    stream.make_arrived(registry, str(workspace), down)
    stream.finish_if_closed(down, "test")
    for sj in stream.new_subjobs(down):  # as if submitted and run at once
        sj.change_status(Status.SUBMITTED, "test")
        sj.change_status(Status.COMPLETED, "test")
    registry.reindex(down)
    if crash:
        repo.abort()
        return
    if not down._stream.arrived:
        del index.pending(registry.root)[down_id]
    repo.commit()


@settings(max_examples=40, deadline=None)
@given(_steps)
def test_each_completed_upstream_subjob_gets_exactly_one_downstream_subjob(
    steps: list[tuple[str, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        repo = Repository(Path(tmp) / "gangadir", mode="embedded")
        try:
            up_id, down_id = _build(repo, workspace)
            for step, piece in steps:
                if step in ("drive", "crash"):
                    _drive(repo, workspace, down_id, crash=step == "crash")
                else:
                    _change(repo, up_id, piece, step)
            for piece in range(PIECES):  # the upstream ends well: the stream closes
                _change(repo, up_id, piece, "resubmit_failed")
                _change(repo, up_id, piece, "complete")
            _drive(repo, workspace, down_id, crash=False)
            repo.abort()
            registry = repo.registry()
            down = registry.get(down_id)
            sources = [sj.inputdata.source for sj in down.iter_subjobs()]
            assert len(sources) == len(set(sources))  # none made twice
            assert sorted(sources) == [f"{up_id}.{i}" for i in range(PIECES)]
            for sj in down.iter_subjobs():  # the files of the subjob it names
                piece = sj.inputdata.source.rsplit(".", 1)[1]
                assert sj.inputdata.files == (
                    str(workspace / str(up_id) / piece / "output" / "part.root"),
                )
            assert down.current_status() is Status.COMPLETED
            assert not index.pending(registry.root)
        finally:
            repo.close()
