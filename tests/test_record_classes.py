"""The class a stored record names is found once per database, not at every load, and
answered exactly as finding it again would answer: a module gone or replaced, a class
renamed in it, a plugin not installed, a damaged name."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import transaction
import ZODB
from hypothesis import given, settings
from hypothesis import strategies as st
from persistent import Persistent
from ZODB.broken import Broken
from ZODB.FileStorage import FileStorage

from ganga_like.repository.storage import GuardedDB, RecordClassError

MODULE = "record_classes_plugin"


def _install(name: str = "Thing") -> types.ModuleType:
    """A fresh module holding a fresh persistent class under ``name``."""
    module = types.ModuleType(MODULE)
    cls = type(name, (Persistent,), {"__module__": MODULE})
    setattr(module, name, cls)
    sys.modules[MODULE] = module
    return module


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Any]:
    database = GuardedDB(FileStorage(str(tmp_path / "Data.fs")))
    yield database
    database.close()
    sys.modules.pop(MODULE, None)


def _answer(find: Any, conn: Any, modulename: str, name: str) -> Any:
    """What a lookup gives: the object found, or the kind of error raised."""
    try:
        return find(conn, modulename, name)
    except RecordClassError:
        return RecordClassError


def test_records_of_one_class_find_it_once(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _install()
    conn = db.open()
    conn.root()["things"] = [module.Thing() for _ in range(50)]
    transaction.commit()
    conn.close()
    db.cacheMinimize()
    asked: list[tuple[str, str]] = []
    find = ZODB.DB.classFactory

    def counted(self: Any, connection: Any, modulename: str, globalname: str) -> Any:
        asked.append((modulename, globalname))
        return find(self, connection, modulename, globalname)

    monkeypatch.setattr(ZODB.DB, "classFactory", counted)
    conn = db.open()
    things = conn.root()["things"]
    for thing in things:
        thing._p_activate()
    assert all(type(thing) is module.Thing for thing in things)
    assert asked.count((MODULE, "Thing")) <= 1
    conn.close()


# One step of a session's life: look a name up, or change what the module holds.
LOOKUPS = [
    (MODULE, "Thing"),
    (MODULE, "Other"),
    ("ganga_like.model.job", "Job"),
    ("ganga_like.model.job", "NoSuchClass"),
    ("not_installed_plugin", "Thing"),
    ("not a module", "Thing"),
    ("builtins", "set"),
]
STEPS = st.one_of(
    st.tuples(st.just("lookup"), st.integers(0, len(LOOKUPS) - 1)),
    st.tuples(st.just("uninstall"), st.just(0)),
    st.tuples(st.just("reinstall"), st.just(0)),
    st.tuples(st.just("rebind"), st.just(0)),
    st.tuples(st.just("rename"), st.just(0)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(STEPS, max_size=25))
def test_lookups_answer_as_finding_again_would(tmp_path_factory: Any, steps: list[Any]) -> None:
    path = tmp_path_factory.mktemp("classes") / "Data.fs"
    db = GuardedDB(FileStorage(str(path)))
    try:
        conn = db.open()
        _install()
        for step, index in steps:
            module = sys.modules.get(MODULE)
            if step == "lookup":
                modulename, name = LOOKUPS[index]
                fast = _answer(db.classFactory, conn, modulename, name)
                slow = _answer(db._find_class, conn, modulename, name)
                if isinstance(slow, type) and issubclass(slow, Broken):
                    assert isinstance(fast, type) and issubclass(fast, Broken)
                    assert fast.__name__ == slow.__name__
                else:
                    assert fast is slow
            elif step == "uninstall":
                sys.modules.pop(MODULE, None)
            elif step == "reinstall":
                _install()
            elif module is not None and step == "rebind":
                module.Thing = type("Thing", (Persistent,), {"__module__": MODULE})
            elif module is not None and step == "rename":
                module.Other = module.__dict__.pop("Thing", None)
        conn.close()
    finally:
        db.close()
        sys.modules.pop(MODULE, None)
