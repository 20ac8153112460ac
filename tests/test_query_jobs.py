"""`jobs.query(...)` over a real repository: indexes by status and name, paths into
components, subjob counts, dates, ids, and bulk actions on the result."""

from __future__ import annotations

import pytest

from ganga_like import ArgSplitter, Executable, GangaError, Job, jobs
from ganga_like.query import QuerySyntaxError
from ganga_like.runtime.session import Session


@pytest.fixture
def population(session: Session) -> dict[str, Job]:
    made = {
        "ok": Job(name="scan-ok", application=Executable(exe="true")),
        "bad": Job(name="scan-bad", application=Executable(exe="false")),
        "fresh": Job(name="other"),
        "split": Job(
            name="scan-split",
            application=Executable(exe="sh"),
            splitter=ArgSplitter(args=[["-c", "exit 1"]] * 4 + [["-c", "exit 0"]]),
        ),
    }
    for key in ("ok", "bad", "split"):
        made[key].submit()
    for key in ("ok", "bad", "split"):
        made[key].wait(timeout=60)
    return made


def ids(text: str) -> list[int]:
    return jobs.query(text).ids()


def test_queries_by_status_name_id_paths_counts_and_dates(population: dict[str, Job]) -> None:
    ok, bad, fresh, split = (population[k] for k in ("ok", "bad", "fresh", "split"))
    assert ids("status=failed") == [bad.id, split.id]
    assert ids("status=completed,new") == [ok.id, fresh.id]
    assert ids("status<>new; name~scan*") == [ok.id, bad.id, split.id]
    assert ids("name=other") == [fresh.id]
    assert ids("subjobs.failed>3") == [split.id]
    assert ids("subjobs=5") == [split.id]
    assert ids("application.exe=true") == [ok.id]
    assert ids(f"id={ok.id}..{bad.id}") == [ok.id, bad.id]
    assert ids(f"id>{bad.id}") == [fresh.id, split.id]
    assert ids("time.submitted>1h-ago") == [ok.id, bad.id, split.id]
    assert ids("time.submitted<2000-01-01") == []
    assert ids("") == [ok.id, bad.id, fresh.id, split.id]


def test_the_index_follows_renames_monitoring_and_removal(population: dict[str, Job]) -> None:
    fresh, split = population["fresh"], population["split"]
    fresh.name = "scan-renamed"
    assert ids("name=scan-renamed") == [fresh.id] and ids("name=other") == []
    split.resubmit()
    assert split.id in ids("status=submitted,running,failed")
    split.wait(timeout=60)
    assert split.id in ids("status=failed")
    split.remove()
    assert split.id not in ids("status=failed")


def test_the_result_is_a_slice_with_bulk_actions(population: dict[str, Job]) -> None:
    failed = jobs.query("status=failed")
    assert "scan-bad" in repr(failed)
    assert failed.resubmit() == []
    for job in failed:
        job.wait(timeout=60)
    assert jobs.query("status=failed; name=scan-bad")[0].info["submit_count"] == 2
    copies = jobs.query("name=scan-ok").copy()
    assert len(copies) == 1 and copies[0].status == "new"


def test_a_malformed_query_points_at_the_character_and_runs_nothing(session: Session) -> None:
    Job(name="x")
    with pytest.raises(QuerySyntaxError) as info:
        jobs.query("status=failed; name")
    text = str(info.value)
    assert "expected an operator" in text and "^" in text
    with pytest.raises(GangaError, match="did you mean 'status'"):
        jobs.query("stauts=failed")
    for query in ("status=complete", "status=new,complete", "status<>complete"):
        with pytest.raises(QuerySyntaxError, match="unknown status 'complete'; did you mean "):
            jobs.query(query)
        with pytest.raises(QuerySyntaxError, match="unknown status 'complete'; did you mean "):
            jobs.select(name="x").query(query)
    with pytest.raises(GangaError, match="unknown status 'complete'; did you mean 'completed'"):
        jobs.select(status="complete")
    assert len(jobs.query("status~complete*")) == 0  # a pattern is no status name


def test_slices_and_subjobs_can_be_queried_too(population: dict[str, Job]) -> None:
    split = population["split"]
    assert [s.id for s in split.subjobs.query("status=failed")] == [0, 1, 2, 3]
    assert [s.id for s in split.subjobs.query("exit_code=0")] == [4]


def test_a_query_on_id_status_and_name_loads_no_job(session: Session) -> None:
    from ganga_like.runtime.session import close_session, open_session

    for i in range(6):
        Job(name=f"n{i % 2}")
    settings = session.settings
    close_session()
    reopened = open_session(settings)
    assert jobs.query("id=1,3,5; status<>failed; name=n1").ids() == [1, 3, 5]
    assert jobs.query("name~n*; id>=4; status=new,killed").ids() == [4, 5]
    assert jobs.query('id="2"').ids() == [2]
    loaded = [i for i, job in reopened.registry().jobs.items() if job._p_status != "ghost"]
    assert loaded == []
    assert jobs.query("application.exe=x; id=1,3").ids() == []
    loaded = [i for i, job in reopened.registry().jobs.items() if job._p_status != "ghost"]
    assert loaded == [1, 3]  # only the candidates the id list allows


class _Unshowable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    ("given", "shown"),
    [(3, "3"), (None, "None"), (_Unshowable(), "a _Unshowable object whose repr() raises")],
)
def test_a_query_that_is_not_text_is_one_line(
    population: dict[str, Job], given: object, shown: str
) -> None:
    for where in (jobs, jobs.select(name="*")):
        with pytest.raises(GangaError) as caught:
            where.query(given)
        line = str(caught.value)
        assert line.startswith(f"a query is text such as 'status=failed', not {shown}")
        assert "\n" not in line
