"""The indexed search answers exactly what evaluating the query on every job answers.

One real repository (FileStorage in a temporary gangadir) is built for the module: jobs
with gaps in their ids, shared, numeric-looking, empty and odd names, every status,
masters with subjobs in several statuses, status times, applications with arguments and
comments. Hypothesis then writes random queries over every operator and kind of value of
the query language; for each, ``jobs.query`` (indexes, then the evaluator) must select
exactly the jobs a brute-force evaluation over all jobs selects. The same holds for a
query on a slice and on a master's subjobs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like import Executable, Job, jobs
from ganga_like.gpi.job import unwrap_job
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.query import Condition, Query, QueryError, Range, RelativeTime, matches, parse
from ganga_like.query.ast import EQUALITY_OPERATORS, GLOB_OPERATORS, OPERATORS
from ganga_like.query.query_errors import QuerySyntaxError
from ganga_like.runtime.search import KNOWN_ROOTS, getter_for, search
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like.runtime.submission.splitting import build_subjobs

BASE = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
NOW = BASE + dt.timedelta(days=10)
NAMES = [
    "scan-a",
    "scan-b",
    "scan-a",
    "7",
    "1.5",
    "",
    "a b",
    "x*y",
    "2026-11-01",
    "now",
    "fail",
    "scan-[ab]",
    "Scan-A",
    "0",
]
# The way to each status from new, for a job without subjobs.
PATHS = {
    Status.NEW: [],
    Status.SUBMITTED: [Status.SUBMITTED],
    Status.RUNNING: [Status.SUBMITTED, Status.RUNNING],
    Status.COMPLETED: [Status.SUBMITTED, Status.RUNNING, Status.COMPLETED],
    Status.FAILED: [Status.SUBMITTED, Status.RUNNING, Status.FAILED],
    Status.KILLED: [Status.SUBMITTED, Status.KILLED],
}
STATUSES = list(PATHS)


def _advance(job: JobImpl, target: Status, start: float) -> None:
    for step, status in enumerate(PATHS[target]):
        job.change_status(status, "test", when=start + 3600 * step)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    gangadir: Path = tmp_path_factory.mktemp("differential") / "gangadir"
    session = open_session(Settings(gangadir=gangadir, monitoring=False))
    try:
        made = []
        for i in range(40):
            args = [str(i % 5), "--fast"] if i % 3 else []
            made.append(
                Job(
                    name=NAMES[i % len(NAMES)],
                    comment="c" * (i % 3),
                    application=Executable(exe=["echo", "true", "/bin/sh"][i % 3], args=args),
                )
            )
        impls = [unwrap_job(j) for j in made]
        registry = session.registry()

        def shape() -> None:
            for i, job in enumerate(impls):
                start = (BASE + dt.timedelta(hours=7 * i)).timestamp()
                if i % 4 == 3:  # a master with subjobs in several statuses
                    job.change_status(Status.SUBMITTED, "test", when=start)
                    variations = [{"application.args": [str(k)]} for k in range(1 + i % 4)]
                    job.attach_subjobs(build_subjobs(job, variations))
                    for k, sj in enumerate(job.iter_subjobs()):
                        _advance(sj, STATUSES[(i + k) % len(STATUSES)], start + 60)
                        if k % 2:
                            sj.exit_code = k
                else:
                    _advance(job, STATUSES[i % len(STATUSES)], start)
                    if i % 5 == 1:
                        job.exit_code = i % 3
                registry.reindex(job)
            for gone in (5, 6, 17, 30):  # gaps in the ids
                registry.remove(impls[gone].id)

        session.repo.in_transaction(shape)
        made[8].name = "renamed"  # through the GPI, which keeps the name index right
        yield session
    finally:
        close_session()


# -- queries -------------------------------------------------------------------------

PATHS_QUERIED = [
    ("id",),
    ("name",),
    ("status",),
    ("fqid",),
    ("comment",),
    ("application",),
    ("application", "exe"),
    ("application", "args"),
    ("backend",),
    ("splitter",),
    ("subjobs",),
    ("subjobs", "failed"),
    ("subjobs", "completed"),
    ("time", "submitted"),
    ("time", "running"),
    ("exit_code",),
    ("submit_count",),
]

texts = st.sampled_from(
    [
        *NAMES,
        "scan*",
        "*a*",
        "?",
        "[0-9]*",
        "new",
        "failed",
        "running",
        "completed",
        "killed",
        "submitted",
        "echo",
        "true",
        "--fast",
        "12",
        "3",
        "abc",
        "1e3",
        "1k",
        "99999999999999999999",
        "Executable",
        "Local",
    ]
) | st.text(max_size=3)
integers = st.integers(-3, 45) | st.sampled_from([2**31, -(2**31) - 1, 10**20, 2**31 - 1])
floats = st.floats(-3, 45, allow_nan=False).map(lambda x: round(x, 2))
moments = st.integers(-2, 14 * 24).map(lambda h: BASE + dt.timedelta(hours=h))
relatives = st.integers(0, 12 * 24).map(lambda h: RelativeTime(dt.timedelta(hours=h)))
scalars = texts | integers | floats | moments | relatives


@st.composite
def ranges(draw: Any) -> Range:
    kind = draw(st.sampled_from(["int", "float", "time", "relative"]))
    ends = {"int": integers, "float": floats, "time": moments, "relative": relatives}[kind]
    a, b = draw(ends), draw(ends)
    if kind == "relative":
        a, b = sorted([a, b], key=lambda r: -r.ago)
    else:
        a, b = sorted([a, b])
    return Range(a, b)


@st.composite
def conditions(draw: Any) -> Condition:
    path = draw(st.sampled_from(PATHS_QUERIED))
    op = draw(st.sampled_from(OPERATORS))
    value: Any
    if op in GLOB_OPERATORS:
        value = draw(texts | st.lists(texts, min_size=2, max_size=3).map(tuple))
    elif op in EQUALITY_OPERATORS:
        item = scalars | ranges()
        value = draw(item | st.lists(item, min_size=2, max_size=4).map(tuple))
    else:
        value = draw(scalars)
    return Condition(path, op, value)


queries = st.lists(conditions(), max_size=3).map(lambda cs: Query(tuple(cs)))


def _outcome(query: Query, job: JobImpl, now: dt.datetime) -> str:
    try:
        return "match" if matches(query, getter_for(job), now=now) else "no"
    except QueryError:
        return "error"


def _same_answer(
    query: Query, answer: Any, candidates: list[JobImpl], now: dt.datetime | None = None
) -> None:
    """``answer()`` gives the fqids; an error is only allowed where brute force has one.

    Evaluation stops at a job's first failing condition, so a condition that cannot be
    evaluated only surfaces for jobs that get that far: an index that rules a job out
    early may avoid an error brute force meets, never the other way round, and never
    changes which jobs match.
    """
    # Queries through the GPI resolve relative times against the clock: a brute force
    # run a moment earlier agrees (no job time lies within milliseconds of it).
    when = now or dt.datetime.now(dt.UTC)
    outcomes = {job.fqid: _outcome(query, job, when) for job in candidates}
    expected = [fqid for fqid, outcome in outcomes.items() if outcome == "match"]
    some_error = "error" in outcomes.values()
    try:
        got = answer()
    except QueryError:
        assert some_error, f"{query}: error where no job fails to evaluate"
        return
    assert got == expected, f"{query}"


def _refused_by_the_gpi(*queries: Query) -> bool:
    """Whether a query compares ``status`` with ``=`` or ``<>`` to a text no status has:
    the GPI's ``query()`` refuses it (a mistake, not a query that matches nothing), which
    is checked here instead of its answer."""
    labels = {s.label for s in Status}
    for condition in (c for q in queries for c in q.conditions):
        values = condition.value if isinstance(condition.value, tuple) else (condition.value,)
        unknown = any(isinstance(v, str) and v not in labels for v in values)
        if condition.path == ("status",) and condition.op in EQUALITY_OPERATORS and unknown:
            with pytest.raises(QuerySyntaxError, match=r"^unknown status '"):
                jobs.query("; ".join(str(q) for q in queries))
            return True
    return False


def _all_jobs(session: Session) -> list[JobImpl]:
    return list(session.registry().jobs.values())


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(query=queries)
def test_the_indexed_search_selects_what_evaluating_every_job_selects(
    repository: Session, query: Query
) -> None:
    text = str(query)
    assert parse(text, known_roots=KNOWN_ROOTS) == query
    registry = repository.registry()
    _same_answer(
        query,
        lambda: [str(i) for i in search(registry, query, now=NOW)],
        _all_jobs(repository),
        NOW,
    )


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(query=queries)
def test_jobs_query_selects_what_evaluating_every_job_selects(
    repository: Session, query: Query
) -> None:
    if _refused_by_the_gpi(query):
        return
    _same_answer(
        query, lambda: [str(i) for i in jobs.query(str(query)).ids()], _all_jobs(repository)
    )


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(first=queries, then=queries)
def test_a_query_on_a_slice_selects_what_both_queries_select(
    repository: Session, first: Query, then: Query
) -> None:
    both = Query(first.conditions + then.conditions)
    if _refused_by_the_gpi(first, then):
        return
    try:
        part = jobs.query(str(first))
    except QueryError:
        return  # covered above
    chosen = [j for j in _all_jobs(repository) if j.id in set(part.ids())]
    _same_answer(then, lambda: [str(unwrap_job(j).fqid) for j in part.query(str(then))], chosen)
    selected = jobs.select(status="failed")
    _same_answer(
        both,
        lambda: [str(unwrap_job(j).fqid) for j in selected.query(str(both))],
        [j for j in _all_jobs(repository) if j.current_status() is Status.FAILED],
    )


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(query=queries)
def test_a_query_on_subjobs_selects_what_evaluating_every_subjob_selects(
    repository: Session, query: Query
) -> None:
    if _refused_by_the_gpi(query):
        return
    for master in (j for j in _all_jobs(repository) if j.is_master):
        subjobs = list(master.iter_subjobs())
        _same_answer(
            query,
            lambda m=master: [unwrap_job(s).fqid for s in jobs(m.id).subjobs.query(str(query))],
            subjobs,
        )


def test_the_repository_has_what_the_queries_need(repository: Session) -> None:
    every = _all_jobs(repository)
    assert {j.current_status() for j in every} == set(STATUSES)
    assert sum(j.is_master for j in every) >= 8
    assert {s.current_status() for j in every for s in j.iter_subjobs()} == set(STATUSES)
    ids = [j.id for j in every]
    assert len(ids) == 36 and 5 not in ids and max(ids) == 39
    assert [j.id for j in every if j.name == "scan-a"] == [0, 2, 14, 16, 28]
    assert repository.registry().indexed_status(39) == every[-1].current_status().label


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id=1,3", [1, 3]),
        ("id=1,4,10..13", [1, 4, 10, 11, 12, 13]),
        ('id="7"', [7]),
        ("id=abc", []),
        ("id=1k", []),
        ("id>99999999999999999999", []),
        ("id<-99999999999999999999", []),
        ("id=2.5", []),
        ("name=scan-b,7", [1, 3, 15, 29, 31]),
        # job 3 is a master with a subjob never submitted beside finished ones: it is new
        ("status<>new; id=0..3", [1, 2]),
    ],
)
def test_an_id_or_name_list_query_matches_only_those_jobs(
    repository: Session, text: str, expected: list[int]
) -> None:
    assert jobs.query(text).ids() == expected


def test_a_non_integer_id_bound_is_an_error_not_every_job(repository: Session) -> None:
    with pytest.raises(QueryError, match="'>' needs two numbers"):
        jobs.query("id > 1e3")
