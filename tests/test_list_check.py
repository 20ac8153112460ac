"""Long list attributes are checked in one pass; whatever that pass accepts, the ordinary
traitlets check accepts too, giving the same value, and whatever it does not decide is
refused or accepted the ordinary way, with the ordinary message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import traitlets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like import load
from ganga_like.gpi.proxy import unwrap
from ganga_like.model import plugin_registry
from ganga_like.model.base import GangaObject, _storable
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.list_check import UNDECIDED, checked_list
from ganga_like.runtime.session import Session
from tests.test_attribute_values import values


def _list_traits() -> list[tuple[type[GangaObject], str, traitlets.TraitType[Any, Any]]]:
    classes: list[type[GangaObject]] = [JobImpl]
    classes += [plugin_registry.find(name) for name in plugin_registry.known_names()]
    return [
        (cls, name, trait)
        for cls in classes
        for name, trait in cls._schema.items()
        if type(trait) is traitlets.List
    ]


LIST_TRAITS = _list_traits()

# Plain values and odd ones (a repr that raises, a lock...), nested, as assignment gets them.
_values = values


def _same_shape(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_shape(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_shape(a[k], b[k]) for k in a)
    return bool(a == b) or (a != a and b != b)


def test_the_schemas_have_list_attributes_to_check() -> None:
    assert {f"{cls.__name__}.{name}" for cls, name, _ in LIST_TRAITS} >= {
        "Executable.args",
        "ArgSplitter.args",
    }


@settings(max_examples=300, deadline=None)
@given(at=st.integers(min_value=0), value=st.lists(_values, max_size=6) | _values)
def test_what_the_one_pass_accepts_the_ordinary_check_accepts_as_the_same_value(
    at: int, value: Any
) -> None:
    cls, _name, trait = LIST_TRAITS[at % len(LIST_TRAITS)]
    checker = cls._checker()
    fast = checked_list(trait, checker, value)
    if fast is UNDECIDED:
        return
    slow = trait._validate(checker, value)  # raises if the one pass accepted too much
    assert _same_shape(fast, slow)
    # In the stored form the inner lists may come as tuples: the same value stored.
    stored = _storable(checked_list(trait, checker, value, inner_tuples=True))
    assert _same_shape(stored, _storable(slow))


def _ordinary(cls: type[GangaObject], value: Any) -> Any:
    """``cls.args`` checked by traitlets alone, as stored: raises TraitError if refused."""
    return _storable(cls._schema["args"]._validate(cls._checker(), value))


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    args=st.lists(st.one_of(st.text(max_size=6), st.integers(), st.booleans()), max_size=5),
    points=st.lists(st.lists(st.one_of(st.text(max_size=4), st.integers(), st.none()), max_size=3)),
)
def test_a_loaded_export_holds_what_the_ordinary_check_gives_or_is_refused(
    session: Session, tmp_path: Path, args: list[Any], points: list[list[Any]]
) -> None:
    from ganga_like.errors import LoadError

    app, splitter = plugin_registry.find("Executable"), plugin_registry.find("ArgSplitter")
    path = tmp_path / "random.txt"
    path.write_text(
        f"Job(application=Executable(exe='/bin/echo', args={args!r}), "
        f"splitter=ArgSplitter(args={points!r}))\n"
    )
    try:
        expected = (_ordinary(app, args), _ordinary(splitter, points))
    except traitlets.TraitError:
        with pytest.raises(LoadError, match=r"(Executable|ArgSplitter)\.args: expected"):
            load(path)
        return
    (loaded,) = load(path)
    job = unwrap(loaded)
    assert _same_shape((job.application.args, job.splitter.args), expected)


def test_a_splitter_given_many_argument_lists_holds_one_more_copy_of_them_at_most() -> None:
    import tracemalloc

    splitter = plugin_registry.find("ArgSplitter")
    points = [[str(i)] for i in range(50_000)]
    from ganga_like import ArgSplitter

    tracemalloc.start()
    try:
        made = ArgSplitter(args=points)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # What it holds is one copy (tuples); on their way in the lists were copied twice more.
    assert peak < 2 * held
    assert unwrap(made).args == _storable(points)
    assert isinstance(unwrap(made), splitter)


def test_a_list_given_to_an_object_is_copied_and_can_change_after(session: Session) -> None:
    from ganga_like import ArgSplitter, Executable

    points, args = [["a"], ["b", "c"]], ["x", "y"]
    splitter, app = ArgSplitter(args=points), Executable(exe="/bin/echo", args=args)
    points[1].append("d")
    points.append(["e"])
    args[0] = "changed"
    assert unwrap(splitter).args == (("a",), ("b", "c"))
    assert unwrap(app).args == ("x", "y")
    app.args = args
    args.append("later")
    assert unwrap(app).args == ("changed", "y")
