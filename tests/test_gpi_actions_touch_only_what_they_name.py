"""Every GPI action on jobs and templates, called with arguments of any type, either
refuses in one line (and, refusing its arguments, changes nothing) or touches only the jobs
and templates it names: ``jobs``, a slice, ``j.subjobs``, one job or subjob, ``templates``,
a template slice, one template; against a real repository and the real Local backend."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaError,
    Job,
    JobTemplate,
    Local,
    SchemaError,
    jobs,
    templates,
)
from ganga_like.gpi.slices import JobSlice
from ganga_like.runtime.session import Session

JOB_ACTIONS = ("submit", "kill", "resubmit", "remove", "freeze", "unfreeze", "copy")
ONE_JOB_ACTIONS = (*JOB_ACTIONS, "force_status", "copy.copy", "copy.deepcopy")
MAKERS = {"Job": Job, "JobTemplate": JobTemplate}  # Job(target, ...): a new one of it
ACTIVE = ("submitting", "submitted", "running", "completing")


def _objects() -> st.SearchStrategy[Any]:
    """GPI objects, made when drawn (the session is open by then)."""
    makers: list[Callable[[], Any]] = [
        Local,
        lambda: Executable(exe="true"),
        lambda: ArgSplitter(args=[["1"]]),
        lambda: jobs[0] if len(jobs) else None,
        lambda: jobs,
        lambda: templates,
    ]
    return st.sampled_from(makers).map(lambda make: make())


@dataclass
class Later:
    """A job or template drawn as an argument, found once the repository is settled (what
    it holds is not known when the call is drawn)."""

    make: Callable[[], Any]


def _targets() -> st.SearchStrategy[Any]:
    """Jobs and templates as what to act on: one, some, a slice, a subjob, subjobs."""
    makers: list[Callable[[], Any]] = [
        lambda: jobs[-1],
        lambda: list(jobs)[1:3],
        lambda: jobs.select(name="new*"),
        lambda: next(j for j in jobs if len(j.subjobs)).subjobs[0],
        lambda: next(j for j in jobs if len(j.subjobs)).subjobs,
        lambda: templates[-1],
        lambda: [templates[0], 1],
    ]
    return st.sampled_from(makers).map(Later)


class Unshowable:
    """A value whose repr() raises: a message must still name it, in one line."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


ODD_SLICE_PART = st.one_of(
    st.none(), st.integers(), st.booleans(), st.floats(), st.text(max_size=2), st.just(0)
)
ANY_VALUE = st.one_of(
    st.integers(-2, 15),
    st.integers(),
    st.text(max_size=6),
    st.sampled_from(["0", "1.0", "Local", "completed", "status=new", "failed"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.lists(st.integers(-1, 15), max_size=3),
    st.tuples(st.integers(0, 15), st.integers(0, 15)),
    st.builds(range, st.integers(0, 6), st.integers(0, 15)),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.one_of(st.none(), st.text(max_size=2), st.floats()), min_size=1, max_size=2),
    _objects(),
    st.builds(Unshowable),
    st.builds(slice, ODD_SLICE_PART, ODD_SLICE_PART, ODD_SLICE_PART),
    st.builds(lambda v: slice(v, None), st.builds(Unshowable)),
    st.sampled_from([2**63, -(2**63) - 1, 10**30, -1, -(10**30)]),
)
OPTION = st.sampled_from(["keep_going", "backend", "dry_run", "force", "keepgoing", "ids"])


@dataclass
class Call:
    target: str
    action: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    pick: int  # which job, subjob or template, or which ones a slice keeps (a bit mask)


CALLS = st.builds(
    Call,
    target=st.sampled_from(
        ["jobs", "slice", "subjobs", "job", "subjob", "templates", "template slice", "template"]
    ),
    action=st.sampled_from([*ONE_JOB_ACTIONS, *MAKERS]),
    args=st.lists(st.one_of(_targets(), ANY_VALUE), max_size=2).map(tuple),
    kwargs=st.dictionaries(OPTION, ANY_VALUE, max_size=2),
    pick=st.integers(0, 255),
)


def _state() -> tuple[dict[int, Any], dict[int, str]]:
    """What a call may change: each job's status, submissions, history, name and its
    subjobs' statuses; each template's description."""
    seen_jobs = {
        j.id: (
            j.status,
            j.info["submit_count"],
            len(j.history),
            j.name,
            tuple(s.status for s in j.subjobs),
        )
        for j in jobs
    }
    return seen_jobs, {t.id: repr(t) for t in templates}


def _settle() -> None:
    """No job running (the monitor changes nothing meanwhile), and enough of each kind
    of job and template to act on."""
    for j in jobs:
        if j.status in ACTIVE:
            j.wait(timeout=120)
    plain = [j for j in jobs if not len(j.subjobs) and j.status == "new"]
    for i in range(3 - len(plain)):
        Job(name=f"new{i}", application=Executable(exe="true"))
    if not any(len(j.subjobs) for j in jobs):
        master = Job(
            name="split",
            application=Executable(exe="true"),
            splitter=ArgSplitter(args=[["1"], ["2"]]),
        )
        master.submit()
        master.wait(timeout=120)
    if len(jobs.select(name="failed")) == 0:
        failed = Job(name="failed", application=Executable(exe="false"))
        failed.submit()
        failed.wait(timeout=120)
    for i in range(2 - len(templates)):
        JobTemplate(name=f"t{i}", application=Executable(exe="true"))


def _resolve(call: Call) -> tuple[Any, set[int], set[int]]:
    """The object acted on, the job ids and the template ids the call names."""
    every = jobs.ids()
    masters = [j for j in jobs if len(j.subjobs)]
    if call.target == "jobs":
        return jobs, set(every), set()
    if call.target == "slice":
        kept = [i for n, i in enumerate(every) if call.pick >> (n % 8) & 1]
        return jobs.select(kept), set(kept), set()
    if call.target == "job":
        chosen = every[call.pick % len(every)]
        return jobs(chosen), {chosen}, set()
    master = masters[call.pick % len(masters)]
    if call.target == "subjobs":
        return master.subjobs, {master.id}, set()
    if call.target == "subjob":
        return master.subjobs[call.pick % len(master.subjobs)], {master.id}, set()
    every_template = templates.ids()
    if call.target == "templates":
        return templates, set(), set(every_template)
    if call.target == "template slice":
        kept = [i for n, i in enumerate(every_template) if call.pick >> (n % 8) & 1]
        return templates.select(kept), set(), set(kept)
    chosen = every_template[call.pick % len(every_template)]
    return templates(chosen), set(), {chosen}


def _named_by_ids(call: Call, target: Any, named: set[int]) -> set[int]:
    """Ids, and jobs or templates, given by position to a slice narrow what it names (a
    refusal follows for any other argument, and is checked to change nothing)."""
    if call.target not in ("jobs", "slice", "templates", "template slice") or not call.args:
        return named
    kind = JobTemplate if call.target.startswith("template") else Job
    ids: set[int] = set()
    for arg in call.args:
        many = isinstance(arg, list | tuple | range | JobSlice)
        for item in arg if many else [arg]:
            if isinstance(item, int) and not isinstance(item, bool):
                ids.add(item)
            elif isinstance(item, kind) and "." not in str(getattr(item, "fqid", "")):
                ids.add(item.id)
    return named & ids


def _act(call: Call, target: Any) -> Any:
    if call.action.startswith("copy."):
        copier = copy.copy if call.action == "copy.copy" else copy.deepcopy
        return copier(target)
    if call.action in MAKERS:
        return MAKERS[call.action](target, *call.args, **call.kwargs)
    return getattr(target, call.action)(*call.args, **call.kwargs)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(call=CALLS)
def test_an_action_touches_only_what_it_names_or_refuses_in_one_line(
    session: Session, call: Call
) -> None:
    _check(call)


# Actions given jobs and templates (and ids) as what to act on, with sound options: most
# of them act, and must act on those only.
CALLS_NAMING_JOBS = st.builds(
    Call,
    target=st.sampled_from(["jobs", "slice", "subjobs", "templates", "template slice"]),
    action=st.sampled_from(JOB_ACTIONS),
    args=st.lists(st.one_of(_targets(), st.integers(0, 8)), min_size=1, max_size=3).map(tuple),
    kwargs=st.fixed_dictionaries({}, optional={"keep_going": st.booleans()}),
    pick=st.integers(0, 255),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(call=CALLS_NAMING_JOBS)
def test_an_action_given_jobs_or_templates_touches_only_those(session: Session, call: Call) -> None:
    _check(call)


def _check(call: Call) -> None:
    assume(call.action != "force_status" or call.target in ("job", "subjob"))
    _settle()
    args = tuple(arg.make() if isinstance(arg, Later) else arg for arg in call.args)
    call = dataclasses.replace(call, args=args)
    target, named_jobs, named_templates = _resolve(call)
    named_jobs = _named_by_ids(call, target, named_jobs)
    named_templates = _named_by_ids(call, target, named_templates)
    if call.action in MAKERS:  # reads what it copies, changes nothing
        named_jobs, named_templates = set(), set()
    jobs_before, templates_before = _state()
    refused: GangaError | None = None
    try:
        _act(call, target)
    except GangaError as exc:
        refused = exc
    event("refused" if refused is not None else f"done: {call.target}.{call.action}")
    if refused is None and any(
        isinstance(a, Job | JobTemplate | JobSlice | list) for a in call.args
    ):
        event(f"done, given jobs or templates: {call.target}.{call.action}")
    # Anything else (a TypeError, an AttributeError) fails the test with its traceback.
    jobs_after, templates_after = _state()
    if refused is not None:
        assert "\n" not in str(refused), str(refused)
        if isinstance(refused, SchemaError) or "nothing done" in str(refused):
            assert (jobs_after, templates_after) == (jobs_before, templates_before), refused
    changed_jobs = {i for i in jobs_before if jobs_after.get(i) != jobs_before[i]}
    assert changed_jobs <= named_jobs, (call, changed_jobs, named_jobs, refused)
    changed_templates = {
        i for i in templates_before if templates_after.get(i) != templates_before[i]
    }
    assert changed_templates <= named_templates, (call, changed_templates, refused)
    new_jobs = set(jobs_after) - set(jobs_before)
    new_templates = set(templates_after) - set(templates_before)
    copying = call.action.startswith("copy")
    copied = len(target) if call.target == "subjobs" else len(named_jobs)  # each a new job
    made = 1 if call.action == "Job" else 0
    assert len(new_jobs) <= made or (copying and named_jobs and len(new_jobs) <= copied), call
    made = 1 if call.action == "JobTemplate" else 0
    assert len(new_templates) <= made or (copying and len(new_templates) <= len(named_templates)), (
        call
    )
