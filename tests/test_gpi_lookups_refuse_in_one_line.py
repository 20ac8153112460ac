"""Looking jobs, subjobs and templates up (``jobs(x)``, ``jobs[x]``, ``j.subjobs[x]``,
``templates(x)``...), selecting them, making a job of something, and the numbers
``wait()``, ``peek()`` and ``force_status()`` take: given a value of any type, each answers
or refuses in one line naming what it expected and what it was given, and changes nothing;
against a real repository and the real Local backend."""

from __future__ import annotations

import io
import math
import pickle
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaError,
    Job,
    JobError,
    JobTemplate,
    SchemaError,
    jobs,
    templates,
)
from ganga_like.runtime.session import Session

from .test_gpi_actions_touch_only_what_they_name import ANY_VALUE, Unshowable, _settle, _state


def _master() -> Any:
    return next(j for j in jobs if len(j.subjobs))


def _new_job() -> Any:
    return next(j for j in jobs if j.status == "new" and not len(j.subjobs))


def _select(on: Any, option: str) -> Callable[[Any], Any]:
    return lambda value: on().select(**{option: value})


SELECT_OPTIONS = ("ids", "status", "name", "backend", "application")

# Each entry point, given one value.
ENTRY_POINTS: dict[str, Callable[[Any], Any]] = {
    "jobs(x)": lambda v: jobs(v),
    "jobs[x]": lambda v: jobs[v],
    "jobs slice[x]": lambda v: jobs.select()[v],
    "subjobs[x]": lambda v: _master().subjobs[v],
    "subjobs(x)": lambda v: _master().subjobs(v),
    "templates(x)": lambda v: templates(v),
    "templates[x]": lambda v: templates[v],
    "templates slice[x]": lambda v: templates.select()[v],
    "Job(x)": lambda v: Job(v),
    "force_status(x)": lambda v: _new_job().force_status(v),
    "jobs.select(1, maxid=x)": lambda v: jobs.select(1, v),
    "templates.select(1, maxid=x)": lambda v: templates.select(1, v),
    **{f"jobs.select({o}=x)": _select(lambda: jobs, o) for o in SELECT_OPTIONS},
    **{f"templates.select({o}=x)": _select(lambda: templates, o) for o in SELECT_OPTIONS},
    "wait(timeout=x) done": lambda v: _master().wait(timeout=v),
    "wait(timeout=x) new": lambda v: _new_job().wait(timeout=v),
    "wait(until=x)": lambda v: _master().wait(until=v),
    "wait(progress=x)": lambda v: _master().wait(progress=v),
    "peek(x)": lambda v: _master().subjobs[0].peek(v),
    "peek(lines=x)": lambda v: _master().subjobs[0].peek(lines=v),
    "result(x)": lambda v: _master().result(v),
}


def _call_quietly(entry: str, value: Any) -> GangaError | None:
    """Call ``entry`` with ``value`` (what peek() prints is not shown); its refusal."""
    try:
        with redirect_stdout(io.StringIO()):
            ENTRY_POINTS[entry](value)
    except GangaError as exc:
        return exc
    return None


def _check_one_line_and_unchanged(entry: str, value: Any) -> GangaError | None:
    before = _state()
    refused = _call_quietly(entry, value)
    # Anything but a GangaError (a TypeError, a RuntimeError) fails with its traceback.
    after = _state()
    if refused is not None:
        assert "\n" not in str(refused), (entry, str(refused))
        assert after == before, (entry, refused)
    elif entry == "Job(x)":  # a new job of the job given, the others untouched
        assert {i: after[0][i] for i in before[0]} == before[0], entry
        assert len(after[0]) == len(before[0]) + 1 and after[1] == before[1], entry
    else:
        assert after == before, entry
    return refused


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entry=st.sampled_from(sorted(ENTRY_POINTS)), value=ANY_VALUE)
def test_a_lookup_given_any_value_answers_or_refuses_in_one_line_changing_nothing(
    session: Session, entry: str, value: Any
) -> None:
    _settle()
    refused = _check_one_line_and_unchanged(entry, value)
    event("refused" if refused is not None else f"answered: {entry}")


ODD_VALUES = [
    Unshowable(),
    1.5,
    math.nan,
    None,
    "x.y",
    10**30,
    -(10**30),
    True,
    object(),
    slice("a", "b"),
    slice(None, None, 0),
    slice(Unshowable(), None),
    [1.5],
]


def _may_answer(entry: str, value: Any) -> bool:
    """Which of the odd values an entry point takes as meant: a select's ids or name (a
    first id, 10**30, keeps none), a number of seconds or last lines, None for an option."""
    if ".select(" in entry:
        return True
    if entry.startswith(("wait(timeout=x) done", "peek(lines")):
        return value is None or type(value) in (int, float)
    return entry == "wait(progress=x)" and (value is None or isinstance(value, bool))


@pytest.mark.parametrize(
    "entry",
    [
        e
        for e in ENTRY_POINTS
        # A status that does not exist is refused as the name of none (one line too).
        if not e.startswith(("wait(until", "jobs.select(status", "templates.select(status"))
    ],
)
def test_each_lookup_refuses_odd_values_naming_what_it_expected_and_was_given(
    session: Session, entry: str
) -> None:
    _settle()
    for value in ODD_VALUES:
        refused = _check_one_line_and_unchanged(entry, value)
        if refused is None:
            assert _may_answer(entry, value), (entry, value)
            continue
        if isinstance(value, Unshowable):
            assert "a Unshowable object whose repr() raises RuntimeError" in str(refused), (
                entry,
                str(refused),
            )
        # What was given, after what was expected; or no such job, subjob or template.
        shown = str(refused)
        assert any(w in shown for w in (" not ", "no ", "out of range", "nothing")), shown


def test_select_names_the_option_and_the_value_of_the_wrong_type(session: Session) -> None:
    Job(name="a")
    for option in ("name", "status"):
        with pytest.raises(SchemaError) as raised:
            jobs.select(**{option: Unshowable()})
        assert str(raised.value) == (
            f"jobs.select(): {option} expected a string, not a Unshowable object whose "
            "repr() raises RuntimeError"
        )
    with pytest.raises(SchemaError, match=r"^templates.select\(\): backend expected a plugin"):
        templates.select(backend=3)
    with pytest.raises(SchemaError, match=r"^jobs.select\(\): ids expected whole numbers"):
        jobs.select([[1]])
    assert jobs.select(range(10**15)).ids() == [0]  # a huge range is not listed
    assert jobs.select(i for i in (0, 7)).ids() == [0]  # any iterable of ids
    with pytest.raises(SchemaError, match=r"ids expected a list or range of ids"):
        jobs.select({0: "a"})


def test_wait_refuses_a_timeout_that_is_no_number_of_seconds_even_on_a_finished_job(
    session: Session,
) -> None:
    j = Job(application=Executable(exe="true"))
    j.submit()
    assert j.wait(timeout=60) == "completed"
    for timeout in (-1, math.nan, math.inf, object(), "5", True):
        with pytest.raises(SchemaError, match=r"^wait\(\): timeout expected a number of seconds"):
            j.wait(timeout=timeout)
    assert j.wait(timeout=0) == "completed"


def test_peek_of_no_lines_prints_nothing_and_refuses_a_negative_count(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    j = Job(application=Executable(exe="echo", args=["one"]))
    j.submit()
    j.wait(timeout=60)
    capsys.readouterr()
    j.peek(lines=1)
    assert capsys.readouterr().out == "one\n"
    j.peek(lines=0)
    assert capsys.readouterr().out == ""
    with pytest.raises(SchemaError, match=r"lines expected a number of last lines"):
        j.peek(lines=-1)


@pytest.mark.parametrize("what", ["jobs", "slice", "subjobs", "templates", "template slice"])
def test_pickling_jobs_or_templates_says_to_pickle_their_ids(session: Session, what: str) -> None:
    master = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"]]))
    JobTemplate(name="t")
    target = {
        "jobs": jobs,
        "slice": jobs.select(),
        "subjobs": master.subjobs,
        "templates": templates,
        "template slice": templates.select(),
    }[what]
    with pytest.raises(JobError) as raised:
        pickle.dumps(target)
    assert "\n" not in str(raised.value)
    assert "cannot be pickled" in str(raised.value) and "(.ids())" in str(raised.value)
