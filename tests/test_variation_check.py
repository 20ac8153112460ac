"""A split's variations checked without making subjobs refuse exactly what making them
refuses, in the same words, and accept the rest."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, Job, LocalFile
from ganga_like.gpi.proxy import unwrap
from ganga_like.model.job import Job as JobImpl
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission.splitting import build_subjobs, splitter_fixed
from ganga_like.runtime.submission.variation_check import VariationChecker

# Paths into what a subjob starts from: valid ones, unknown ones, ones through a value
# that is not an object, protected or derived ones, a component set whole, a class that
# checks its attributes together (Slurm's resources).
PATHS = [
    "application.args",
    "application.exe",
    "application.env",
    "application.nope",
    "application.args.deeper",
    "application",
    "backend",
    "backend.process_count",
    "backend.resources",
    "backend.resources.process_count",
    "backend.resources.processes_per_node",
    "backend.host",
    "name",
    "comment",
    "status",
    "id",
    "time",
    "submit_count",
    "submit_count.x",
    "id.x",
    "inputfiles",
    "inputfiles.x",
    "name.x",
    "splitter.args",
    "nothing",
    "nothing.at.all",
]
VALUES = st.one_of(
    st.none(),
    st.integers(-3, 9),
    st.text(max_size=3),
    st.sampled_from(["Local", "Slurm", "Executable", "true", "2G"]),
    st.lists(st.text(max_size=2), max_size=3),
    st.lists(st.lists(st.integers(0, 3), max_size=2), max_size=2),
    st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2),
)
VARIATIONS = st.dictionaries(st.sampled_from(PATHS), VALUES, max_size=3)


def outcome(call: Any) -> tuple[str, str] | None:
    """The refusal of ``call()`` (its type and words), None when it accepts."""
    try:
        call()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return None


def checker_noting(master: JobImpl, made: list[int]) -> VariationChecker:
    """A checker of ``master``'s variations noting in ``made`` the positions of the ones it
    makes a subjob of."""

    def make_one(variation: dict[str, Any], position: int) -> object:
        made.append(position)
        return build_subjobs(master, [variation], first_id=position, first_position=position)

    return VariationChecker(master, splitter_fixed(), make_one)


@pytest.fixture(params=["Local", "Slurm"])
def master(session: Session, request: pytest.FixtureRequest) -> JobImpl:
    j = Job(
        application=Executable(exe="true", args=["a"], env={"K": "v"}),
        backend=request.param,
        inputfiles=[LocalFile("in.txt")],
        splitter=ArgSplitter(args=[["x"]]),
        name="master",
    )
    impl = unwrap(j)
    assert isinstance(impl, JobImpl)
    return impl


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(variations=st.lists(VARIATIONS, min_size=1, max_size=3), first=st.integers(0, 20))
@example(variations=[{"backend.resources.processes_per_node": 3}], first=0)  # on Slurm
@example(variations=[{"application": "Executable", "application.args": [1]}], first=2)
def test_a_check_without_subjobs_refuses_what_making_them_refuses(
    master: JobImpl, variations: list[dict[str, Any]], first: int
) -> None:
    made: list[int] = []
    checker = checker_noting(master, made)
    checked = outcome(lambda: checker.check(variations, first))
    built = outcome(lambda: build_subjobs(master, variations, first_position=first))
    assert checked == built


def test_a_variation_setting_a_component_and_a_path_inside_it_is_checked_on_its_subjob(
    master: JobImpl,
) -> None:
    made: list[int] = []
    checker = checker_noting(master, made)
    checker.check(
        [
            {"application.args": ["1"]},
            {"application": "Executable", "application.args": ["2"]},
        ],
        5,
    )
    assert made == [6]
