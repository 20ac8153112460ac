"""A job's parts come from one place, Job's schema: a part added there is listed, shown,
given to subjobs, described at resubmission, stored and searchable with no other change,
and no module keeps a list of part names or reads plugin hooks around the interfaces."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaDataset,
    Job,
    LocalFile,
    SchemaError,
    jobs,
)
from ganga_like.commands.listing import _attributes
from ganga_like.gpi.proxy import unwrap
from ganga_like.model.base import Component, ComponentList, GangaObject
from ganga_like.model.interfaces import IApplication, IBackend, IDataset, IFile, ISplitter
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.parts import job_parts
from ganga_like.query import parse
from ganga_like.runtime.search import KNOWN_ROOTS, getter_for
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission.resubmit import describe_job
from ganga_like.runtime.submission.splitting import build_subjobs
from ganga_like.shell import display

ROOT = Path(__file__).resolve().parent.parent
# The schema itself is the one place part names are listed.
SCHEMA_HOME = ROOT / "ganga_like" / "model" / "job.py"
# The configuration lists the job tables' columns itself (checked equal below).
COLUMN_CHOICES = ROOT / "ganga_like" / "config" / "choices.py"


def _sources() -> Iterator[Path]:
    for top in ("ganga_like", "plugins"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path not in (SCHEMA_HOME, COLUMN_CHOICES):
                yield path


def test_the_configurable_columns_are_the_job_tables_columns() -> None:
    # The configuration sits below the model, so it cannot ask the schema: it keeps the
    # column names as literals, and this keeps them equal to what the schema derives.
    from ganga_like.config.choices import COLUMNS as CONFIGURABLE
    from ganga_like.gpi.job_table import COLUMNS as DERIVED

    assert CONFIGURABLE == DERIVED


def _strings(node: ast.AST) -> list[str]:
    items: list[ast.expr | None]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = list(node.elts)
    elif isinstance(node, ast.Dict):
        items = list(node.keys)
    else:
        return []
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def test_no_module_keeps_its_own_list_of_a_jobs_parts() -> None:
    parts = {p.name for p in job_parts().parts}
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            named = [s for s in _strings(node) if s in parts]
            if len(named) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')} {named}")
    assert not found, "lists of part names outside Job's schema (use model.parts):\n" + "\n".join(
        found
    )


def test_plugin_hooks_are_called_not_looked_up_with_getattr() -> None:
    hooks = {
        name
        for cls in (GangaObject, IApplication, IBackend, ISplitter, IDataset, IFile)
        for name in vars(cls)
        if not name.startswith("__")
    }
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in hooks
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.args[1].value}")
    assert not found, "hooks read with getattr instead of called:\n" + "\n".join(found)


@pytest.fixture
def two_more_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Job's schema with two parts more: one line each, nothing else changed."""
    schema = {
        **JobImpl._schema,
        "logfiles": ComponentList("files", help="Logs kept with the job.").tag(subjob="share"),
        "auxdata": Component("datasets", help="A second dataset.").tag(subjob="copy"),
    }
    monkeypatch.setattr(JobImpl, "_schema", schema)
    monkeypatch.setattr(JobImpl, "_validator", None)  # validate against the new schema


def test_a_part_added_to_the_schema_is_listed_shown_split_described_and_searchable(
    session: Session, two_more_parts: None
) -> None:
    j = Job(
        name="parts",
        application=Executable(exe="echo"),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        logfiles=[LocalFile("run.log")],
        auxdata=GangaDataset(files=["aux.dat"]),
    )
    impl = unwrap(j)
    impl._p_deactivate()  # read back from the repository: the new parts were stored
    assert [f.namePattern for f in impl.logfiles] == ["run.log"]

    assert {"logfiles", "auxdata"} <= {p.name for p in job_parts().parts}
    assert "auxdata=GangaDataset(files=['aux.dat'])" in repr(j)
    shown = display.job_text(j)
    assert "logfiles: [LocalFile(" in shown and "auxdata: GangaDataset" in shown
    listed = dict(_attributes(impl))
    assert listed["logfiles"].startswith("LocalFile(namePattern='run.log'")
    assert listed["auxdata"].startswith("GangaDataset(files=['aux.dat']")
    described = describe_job(impl)
    assert described["logfiles"] == "['LocalFile']"
    assert described["auxdata.files"] == "['aux.dat']"

    first, second = build_subjobs(impl, [{}, {}])
    assert first.stored()["logfiles"] is impl.stored()["logfiles"]  # shared
    assert first.auxdata is not impl.auxdata and first.auxdata is not second.auxdata
    assert list(first.auxdata.files) == ["aux.dat"]

    assert "auxdata" in KNOWN_ROOTS and "logfiles" in KNOWN_ROOTS
    assert getter_for(impl)(("auxdata", "files")) == ["aux.dat"]
    assert parse("auxdata=GangaDataset", known_roots=KNOWN_ROOTS)
    assert jobs.query("auxdata=GangaDataset").ids() == [j.id]


def test_a_required_part_cannot_be_taken_away(session: Session) -> None:
    j = Job(application=Executable(exe="echo"))
    for part in ("application", "backend"):
        with pytest.raises(SchemaError, match=rf"^Job.{part} cannot be None: a job needs one"):
            setattr(j, part, None)
    assert j.submit(dry_run=False) is True and j.status != "new"


def test_a_dataset_copies_its_files_next_to_the_program_only_when_asked(
    session: Session, tmp_path: Path
) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("42\n")
    read = Executable(exe="cat", args=["numbers.txt"])
    copied = Job(
        application=read, inputdata=GangaDataset(files=[str(data)], treat_as_inputfiles=True)
    )
    listed = Job(application=read, inputdata=GangaDataset(files=[str(data)]))
    copied.submit()
    listed.submit()
    assert copied.wait(timeout=60) == "completed"
    assert (copied.outputdir / "stdout").read_text() == "42\n"
    assert listed.wait(timeout=60) == "failed"  # only named in $GANGA_INPUTDATA
