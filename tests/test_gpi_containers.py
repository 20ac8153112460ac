"""List and dict attributes changed in place: every change is validated, stored through the
attribute that holds it (so another connection or process sees it), and refused with one
line on a job that was submitted, storing nothing."""

from __future__ import annotations

import json
from collections.abc import MutableMapping

import pytest
import transaction

from ganga_like import Executable, GenericSplitter, Job, JobError, SchemaError
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session

from .test_repository import run_python


def stored_env(session: Session, job_id: int) -> dict[str, str]:
    """The application's env as a fresh connection reads it from the database."""
    conn = session.repo.db.open(transaction_manager=transaction.TransactionManager())
    try:
        stored = Registry(conn.root()).get(job_id)
        assert stored is not None
        return dict(stored.application.env)
    finally:
        conn.close()


def test_dict_changes_on_an_unattached_object_take_effect() -> None:
    app = Executable()
    app.env["A"] = "b"
    assert app.env == {"A": "b"}
    splitter = GenericSplitter(multi_attrs={"application.args": [["1"], ["2"]]})
    splitter.multi_attrs["name"] = ["one", "two"]
    splitter.multi_attrs["application.args"][0].append("x")
    assert splitter.multi_attrs == {"application.args": [["1", "x"], ["2"]], "name": ["one", "two"]}


def test_every_dict_change_on_a_new_job_is_kept_and_stored(session: Session) -> None:
    k = Job()
    env = k.application.env
    env["A"] = "b"
    assert k.application.env == {"A": "b"} and stored_env(session, k.id) == {"A": "b"}
    env.update({"B": "c"}, C="d")
    assert env.setdefault("D", "e") == "e" and env.setdefault("D", "zzz") == "e"
    assert env.pop("A") == "b" and env.pop("missing", None) is None
    del env["B"]
    env |= {"E": "f"}
    assert stored_env(session, k.id) == {"C": "d", "D": "e", "E": "f"}
    # reads behave like a dict's
    assert "C" in env and "A" not in env and len(env) == 3 and sorted(env) == ["C", "D", "E"]
    assert dict(env.items()) == {"C": "d", "D": "e", "E": "f"} and env.get("X", 1) == 1
    assert json.loads(json.dumps(dict(env))) == {"C": "d", "D": "e", "E": "f"}
    assert repr(env) == "{'C': 'd', 'D': 'e', 'E': 'f'}"
    assert isinstance(env, MutableMapping) and {**env} == {"C": "d", "D": "e", "E": "f"}
    with pytest.raises(KeyError):
        env.pop("missing")
    with pytest.raises(SchemaError, match=r"Executable\.env"):
        env["F"] = 5
    assert stored_env(session, k.id) == {"C": "d", "D": "e", "E": "f"}
    env.clear()
    assert k.application.env == {} and stored_env(session, k.id) == {}


def test_splitter_multi_attrs_change_in_place_at_every_depth(session: Session) -> None:
    j = Job(splitter=GenericSplitter(multi_attrs={"application.args": [["1"], ["2"]]}))
    j.splitter.multi_attrs["name"] = ["a", "b"]
    j.splitter.multi_attrs["application.args"][1].append("y")
    j.splitter.multi_attrs["application.env"] = [{"A": "1"}, {"A": "2"}]
    j.splitter.multi_attrs["application.env"][1]["B"] = "3"
    conn = session.repo.db.open(transaction_manager=transaction.TransactionManager())
    stored = Registry(conn.root()).get(j.id)
    assert stored is not None
    assert stored.splitter.multi_attrs == {
        "application.args": (("1",), ("2", "y")),
        "name": ("a", "b"),
        "application.env": ({"A": "1"}, {"A": "2", "B": "3"}),
    }
    conn.close()


def test_list_sort_and_reverse_are_stored(session: Session) -> None:
    j = Job(application=Executable(args=["b", "c", "a"]))
    j.application.args.sort()
    assert j.application.args == ["a", "b", "c"]
    j.application.args.reverse()
    j.application.args.sort(key=lambda a: a == "b")
    assert j.application.args == ["c", "a", "b"]
    assert j.application.args.index("a") == 1 and j.application.args.count("a") == 1


def test_another_process_sees_dict_changes_made_in_place(env_for: dict[str, str]) -> None:
    made = run_python(
        """
        from ganga_like import *
        k = Job()
        k.application.env["A"] = "b"
        k.application.env.update(B="c")
        k.splitter = GenericSplitter(multi_attrs={"name": ["x"]})
        k.splitter.multi_attrs["name"].append("y")
    """,
        env_for,
    )
    assert made.returncode == 0, made.stderr
    read = run_python(
        """
        from ganga_like import *
        import json
        k = jobs(0)
        print(json.dumps([dict(k.application.env), k.splitter.multi_attrs.copy()]))
    """,
        env_for,
    )
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == [{"A": "b", "B": "c"}, {"name": ["x", "y"]}]


def test_a_submitted_job_refuses_every_in_place_change_and_stores_nothing(session: Session) -> None:
    j = Job(application=Executable(exe="true", args=["1"], env={"K": "v"}))
    j.submit()
    env = j.application.env
    changes = [
        lambda: env.__setitem__("A", "b"),
        lambda: env.update(A="b"),
        lambda: env.pop("K"),
        lambda: env.setdefault("A", "b"),
        lambda: env.__delitem__("K"),
        lambda: env.__ior__({"A": "b"}),
        env.clear,
        env.popitem,
        lambda: j.application.args.append("2"),
        j.application.args.sort,
        j.application.args.reverse,
    ]
    for change in changes:
        with pytest.raises(
            JobError,
            match=r"^job 0 is \w+: application\.(env|args) can no "
            r"longer be changed; copy\(\) the job",
        ):
            change()
    assert j.application.env == {"K": "v"} and j.application.args == ["1"]
    assert stored_env(session, j.id) == {"K": "v"}
