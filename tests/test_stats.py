"""``j.stats()``: counts, run times, failures by cause and resources used, over real Local
runs and over model masters driven through random changes."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, Job, JobError, jobs
from ganga_like.gpi.stats import job_stats
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status, check_transition
from ganga_like.runtime.session import Session
from ganga_like.runtime.stats import job_stats as compute
from ganga_like.runtime.stats import plain_counts
from ganga_like.runtime.stats.compute import failure_reason

from .split_jobs import submitted_model_master
from .test_resources_used import HUNGRY, MIB

# Each subjob: MiB held, CPU seconds spun, exit code.
RUNS = [(150, 0.3, 0), (5, 0.0, 0), (5, 0.0, 3), (40, 0.1, 3), (5, 0.0, 7)]


def hungry_job(runs: list[tuple[int, float, int]]) -> Job:
    args = [["-c", HUNGRY, str(mib), str(cpu), str(code)] for mib, cpu, code in runs]
    return Job(application=Executable(exe=sys.executable), splitter=ArgSplitter(args=args))


def test_a_local_split_job_shows_its_failures_grouped_and_what_each_subjob_used(
    session: Session,
) -> None:
    j = hungry_job(RUNS)
    j.submit()
    assert j.wait(timeout=120) == "failed"
    stats = j.stats()
    assert stats.total == 5 and stats.counts == {"completed": 2, "failed": 3}
    assert [(g.exit_code, g.reason, g.fqids) for g in stats.failures] == [
        (3, "exit code 3", (f"{j.id}.2", f"{j.id}.3")),
        (7, "exit code 7", (f"{j.id}.4",)),
    ]
    assert stats.time_left == 0.0
    assert stats.run_time.count == stats.queue_wait.count == 5
    assert stats.slowest[0].fqid == f"{j.id}.0"  # the one that spun longest
    used = stats.resources
    assert used.measured == 5 and used.max_rss_fqid == f"{j.id}.0"
    assert used.max_rss is not None and used.max_rss >= 150 * MIB
    assert used.cpu >= 0.35
    assert [row.fqid for row in used.per_subjob] == [f"{j.id}.{i}" for i in range(5)]
    # The counts over time start with subjobs being submitted and end with the counts now.
    assert stats.over_time[-1][1] == stats.counts
    assert [t for t, _ in stats.over_time] == sorted(t for t, _ in stats.over_time)
    # Plain data all the way down.
    data = json.loads(stats.to_json())
    assert data["failures"][0]["count"] == 2 and data["counts"] == stats.counts
    assert data["resources"]["per_subjob"][0]["used"]["max_rss"] >= 150 * MIB
    shown = repr(stats)
    assert f"stats of job {j.id}: 5 subjobs" in shown
    assert f"2: exit code 3: {j.id}.2, {j.id}.3" in shown
    # A slice of subjobs, a subjob and a list of jobs read the same records.
    assert j.subjobs.stats().counts == stats.counts
    assert j.subjobs.select(status="failed").stats().counts == {"failed": 3}
    assert j.subjobs[4].stats().failures[0].fqids == (f"{j.id}.4",)
    assert job_stats([j, j.subjobs[0]]).total == 6
    assert jobs.select(j.id, j.id).stats().total == 5


def test_bad_input_is_refused_in_one_line(session: Session) -> None:
    with pytest.raises(JobError) as found:
        job_stats(3)
    assert str(found.value) == (
        "job_stats(): expected a job, a slice or a list of jobs, not the int 3"
    )
    with pytest.raises(JobError, match=r"^job_stats\(\): expected a list of jobs, found the str"):
        job_stats([Job(), "x"])
    j = Job()
    j.remove()
    with pytest.raises(JobError) as gone:
        j.stats()
    assert str(gone.value) == (
        f"job {j.id} was removed: stats() is not possible; copy() it to make a new job"
    )
    with pytest.raises(JobError, match="was removed"):
        job_stats([j])


def test_an_unsubmitted_job_has_stats_of_one_new_job(session: Session) -> None:
    stats = Job().stats()
    assert (stats.total, stats.counts, stats.failures, stats.time_left) == (1, {"new": 1}, (), None)
    assert stats.run_time.count == 0 and stats.resources.measured == 0
    assert "run time   -" in repr(stats)


def test_failure_reasons_drop_the_backend_name_and_keep_the_last_line() -> None:
    assert failure_reason("Local: failed, exit code 3") == "exit code 3"
    assert failure_reason("Slurm: failed, OUT_OF_MEMORY") == "OUT_OF_MEMORY"
    assert failure_reason("Local: failed") == "failed"
    assert (
        failure_reason("Dask: failed, Traceback\n  ...\nValueError: bad x\n") == "ValueError: bad x"
    )
    assert failure_reason("postprocessing failed: merger") == "postprocessing failed: merger"


def test_requested_memory_and_walltime_are_set_against_what_was_used(session: Session) -> None:
    from ganga_like_slurm.backend import Slurm
    from ganga_like_slurm.resource_object import Resources

    master, subjobs = submitted_model_master(2)
    for index, sj in enumerate(subjobs):
        sj.backend = Slurm(resources=Resources(memory="1G", walltime="0:10:00"))
        sj.change_status(Status.RUNNING, "test", when=100.0)
        sj.change_status(Status.COMPLETED, "test", when=160.0 + index * 60)
        sj.record_use([256 * 1024 * (index + 1), 30.0, 1.0], 100.0, 160.0 + index * 60)
    stats = compute([master], "job", now=300.0)
    rows = stats.resources.per_subjob
    assert rows[0].requested.memory == 1024**3 and rows[0].requested.walltime == 600.0
    assert rows[0].requested.cores == 1
    assert stats.resources.max_memory_share == 0.5  # 512 MiB of 1 GiB
    assert stats.resources.max_walltime_share == 0.2  # 120 s of 600 s
    assert "memory up to 50%, walltime up to 20%" in repr(stats)


# -- the master's counter against counting its subjobs ---------------------------------

_MOVES = [s for s in Status if s not in (Status.NEW, Status.SUBMITTING)]


def _allowed(old: Status, new: Status) -> bool:
    try:
        check_transition(old, new)
    except JobError:
        return False
    return old is not new


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 12),
    moves=st.lists(st.tuples(st.integers(0, 11), st.sampled_from(_MOVES)), max_size=60),
)
def test_the_counts_the_stats_take_from_the_counter_are_the_subjobs_counted(
    size: int, moves: list[tuple[int, Status]]
) -> None:
    master, subjobs = submitted_model_master(size)
    now = 1000.0
    for index, target in moves:
        sj = subjobs[index % size]
        current = Status.parse(sj.status)
        if _allowed(current, target):
            now += 1.0
            sj.change_status(target, "test", when=now)
    stats = compute([master], "job", now=now)
    assert stats.counts == plain_counts(subjobs)
    assert stats.total == size == sum(stats.counts.values())
    assert stats.over_time[-1][1] == stats.counts
    # The plain pass over single jobs agrees with the master's counter.
    singles = compute(subjobs, "subjobs", now=now)
    assert singles.counts == stats.counts
    assert singles.run_time == stats.run_time and singles.failures == stats.failures
    assert Counter(master.subjob_statuses() or []) == Counter(stats.counts)


def test_a_fresh_model_master_is_not_a_job_of_the_repository() -> None:
    assert isinstance(submitted_model_master(1)[0], JobImpl)
