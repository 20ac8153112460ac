"""Acting on one failure group of ``j.stats()``: exactly its subjobs are resubmitted (or
killed), with more memory or walltime where its cause says so; a stale group, a group of
another job and bad values are refused in one line with nothing changed. Real Local runs;
Slurm's growth is tests/test_slurm_failure_groups.py's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, GangaError, Job, JobError
from ganga_like.runtime.session import Session
from ganga_like.runtime.stats.data import FailureGroup

# Each subjob exits with its argument, after waiting for its marker file when it has one:
# a resubmitted subjob then stays running until the test lets it end.
PROGRAM = 'if [ -n "$2" ]; then while [ ! -e "$2" ]; do sleep 0.05; done; fi; exit "$1"'


def exiting(codes: list[int], gate: str = "") -> Job:
    args = [["-c", PROGRAM, "prog", str(code), gate] for code in codes]
    return Job(application=Executable(exe="/bin/sh"), splitter=ArgSplitter(args=args))


def events(j: Job) -> list[list[str]]:
    return [[entry.cause for entry in sj.history] for sj in j.subjobs]


@pytest.fixture
def failed(session: Session) -> Iterator[Job]:
    j = exiting([3, 0, 7, 3, 3, 7])
    j.submit()
    assert j.wait(timeout=120) == "failed"
    yield j


def test_resubmitting_a_group_resubmits_exactly_its_subjobs(failed: Job) -> None:
    j = failed
    stats = j.stats()
    assert [(g.number, g.reason, g.fqids) for g in stats.failures] == [
        (1, "exit code 3", (f"{j.id}.0", f"{j.id}.3", f"{j.id}.4")),
        (2, "exit code 7", (f"{j.id}.2", f"{j.id}.5")),
    ]
    assert "failed #2  2: exit code 7: " in repr(stats)
    before = events(j)
    assert j.resubmit(group=stats.failures[1])
    after = events(j)
    touched = [i for i in range(6) if after[i] != before[i]]
    assert touched == [2, 5]
    assert all("user: resubmit" in after[i] for i in touched)
    assert j.wait(timeout=120) == "failed"  # exit 7 again


def test_a_group_is_named_by_its_number_and_a_stale_one_is_refused(failed: Job) -> None:
    j = failed
    group = j.stats().failures[1]
    assert j.resubmit(group=2)  # the same group, by number: the subjobs with exit code 7
    before = events(j)
    with pytest.raises(JobError, match=r"failure group 2 \(exit code 7\) is stale: .* since"):
        j.resubmit(group=group)
    with pytest.raises(JobError, match=r"resubmit\(\): no failure group 3; it has only group 1"):
        j.resubmit(group=3)
    assert events(j) == before


def test_bad_arguments_are_refused_in_one_line_with_nothing_changed(
    failed: Job, session: Session
) -> None:
    j = failed
    other = exiting([5])
    other.submit()
    assert other.wait(timeout=60) == "failed"
    before = events(j)
    foreign = other.stats().failures[0]
    with pytest.raises(JobError, match=r"failure group 1 \(exit code 5\) is not of this job "):
        j.resubmit(group=foreign)
    with pytest.raises(JobError, match=r"its Local backend has no memory to give"):
        j.resubmit(group=1, memory="4G")
    with pytest.raises(GangaError, match=r"no option 'memroy'; did you mean 'memory'\?"):
        j.resubmit(group=1, memroy="4G")
    with pytest.raises(JobError, match=r"memory= and walltime= go with group=N"):
        j.resubmit(memory="4G")
    with pytest.raises(JobError, match=r"expected a group number or a FailureGroup, not 'x'"):
        j.resubmit(group="x")
    assert events(j) == before


def test_killing_a_group_kills_those_of_its_subjobs_that_run_again(
    session: Session, tmp_path: object
) -> None:
    gate = f"{tmp_path}/gate"
    j = exiting([3, 4, 3], gate)
    open(gate, "w").close()
    j.submit()
    assert j.wait(timeout=120) == "failed"
    import os

    os.unlink(gate)
    group = j.stats().failures[0]
    with pytest.raises(
        JobError, match=rf"^job {j.id}: kill\(\): none of failure group 1 \(exit code 3\) runs"
    ):
        j.kill(group=group)
    assert j.resubmit(group=group)
    assert j.kill(group=group)
    assert j.wait(timeout=60) == "failed"
    assert [sj.status for sj in j.subjobs] == ["killed", "failed", "killed"]


def test_a_kill_takes_the_resubmitted_group_itself_never_a_number_that_moved(
    session: Session, tmp_path: object
) -> None:
    gate = f"{tmp_path}/gate"
    j = exiting([4, 4, 5, 0], gate)
    open(gate, "w").close()
    j.submit()
    assert j.wait(timeout=120) == "failed"
    import os

    os.unlink(gate)
    resubmitted = j.stats().failures[0]
    assert resubmitted.reason == "exit code 4"
    assert j.resubmit(group=resubmitted)  # the two exit-4 subjobs run again, held by the gate
    # Counted again, "group 1" is now the exit-5 one: a number is refused, in one line.
    before = events(j)
    for number in (1, 2):
        with pytest.raises(
            JobError,
            match=rf"^job {j.id}: kill\(\): group= takes the group you resubmitted, not a "
            rf"number \({number}; .*j.kill\(group=g\)$",
        ):
            j.kill(group=number)
    assert events(j) == before
    assert j.kill(group=resubmitted)
    assert j.wait(timeout=60) == "failed"
    assert [sj.status for sj in j.subjobs] == ["killed", "killed", "failed", "completed"]


def test_a_group_whose_subjob_ran_and_failed_alike_again_is_stale(failed: Job) -> None:
    j = failed
    group = j.stats().failures[1]  # exit code 7: subjobs 2 and 5
    assert j.resubmit(group=group)
    assert j.wait(timeout=120) == "failed"  # both failed with exit code 7 again
    before = events(j)
    with pytest.raises(
        JobError,
        match=rf"^job {j.id}: resubmit\(\): failure group 2 \(exit code 7\) is stale: "
        rf"{j.id}.2 ran and failed again since; take j.stats\(\) again \(nothing done\)$",
    ):
        j.resubmit(group=group)
    assert events(j) == before
    assert j.resubmit(group=j.stats().failures[1])  # taken again, it is the new failures


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(codes=st.lists(st.sampled_from([0, 3, 7, 9]), min_size=2, max_size=6), pick=st.integers(0))
def test_acting_on_a_group_never_touches_a_subjob_outside_it(
    session: Session, codes: list[int], pick: int
) -> None:
    if not any(codes):
        codes = [*codes, 3]
    j = exiting(codes)
    j.submit()
    j.wait(timeout=120)
    groups = j.stats().failures
    group: FailureGroup = groups[pick % len(groups)]
    before = events(j)
    assert j.resubmit(group=group)
    after = events(j)
    changed = {sj.fqid for sj, old, new in zip(j.subjobs, before, after, strict=True) if old != new}
    assert changed == set(group.fqids)
    j.wait(timeout=120)
