"""GPI proxies over persistent objects: validation, read-only attributes, hints, lists,
components by name, schema-driven copies and three-way conflict resolution."""

from __future__ import annotations

import pytest
import transaction

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaDataset,
    Job,
    JobError,
    Local,
    LocalFile,
    PluginError,
    SchemaError,
    jobs,
)
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session


def test_wrong_type_is_refused_with_class_attribute_and_types_and_nothing_changes(
    session: Session,
) -> None:
    j = Job(name="keep")
    with pytest.raises(SchemaError, match=r"Job\.name: expected a name, not the int 5"):
        j.name = 5
    assert j.name == "keep"
    app = Executable()
    with pytest.raises(SchemaError, match=r"Executable\.args"):
        app.args = "not a list"
    with pytest.raises(SchemaError, match=r"Executable\.args"):
        app.args = [["nested"]]
    assert app.args == []


def test_component_attributes_name_the_kind_of_object_they_take(session: Session) -> None:
    j = Job()
    with pytest.raises(SchemaError) as raised:
        j.retry = 5
    assert str(raised.value) == ("Job.retry: expected a retry object or plugin name, not the int 5")
    with pytest.raises(SchemaError, match=r"expected a backend object or plugin name"):
        j.backend = 5
    help_text = Job.__doc__ or ""
    assert "retry (retry object, default None)" in help_text
    assert "postprocessors (list of postprocessor objects" in help_text
    assert "retrie" not in help_text


def test_a_wrong_element_of_a_list_says_it_is_an_element_and_what_the_list_holds() -> None:
    with pytest.raises(SchemaError) as raised:
        ArgSplitter(args=["a", "b"])  # a flat list, where each subjob needs a list of its own
    assert str(raised.value) == (
        "ArgSplitter.args: an element expected a list, not the str 'a' "
        "(One argument list per subjob)"
    )


def test_numbers_are_accepted_as_arguments() -> None:
    assert Executable(args=[1, 2.5, "x"]).args == ["1", "2.5", "x"]


def test_unknown_attributes_get_a_did_you_mean_hint(session: Session) -> None:
    j = Job()
    with pytest.raises(SchemaError, match="Job has no attribute 'nmae'; did you mean 'name'"):
        j.nmae = "x"
    with pytest.raises(SchemaError, match="did you mean 'application'"):
        _ = j.aplication
    with pytest.raises(AttributeError):  # SchemaError is an AttributeError: getattr works
        _ = Executable().exec
    assert getattr(Executable(), "nope", "default") == "default"


def test_protected_attributes_are_read_only(session: Session) -> None:
    j = Job()
    with pytest.raises(SchemaError, match=r"Job\.status is read-only"):
        j.status = "completed"
    with pytest.raises(SchemaError, match=r"Job\.id is read-only"):
        j.id = 42
    with pytest.raises(SchemaError, match="read-only"):
        Job(status="completed")
    assert j.status == "new"


def test_dir_shows_only_public_attributes_and_methods(session: Session) -> None:
    names = dir(Job())
    for expected in (
        "name",
        "status",
        "application",
        "backend",
        "subjobs",
        "submit",
        "kill",
        "resubmit",
        "remove",
        "copy",
        "wait",
        "peek",
        "force_status",
        "fqid",
        "inputdir",
        "outputdir",
        "history",
        "time",
        "info",
    ):
        assert expected in names
    assert not [n for n in names if n.startswith("_")]
    assert "history" in dir(Job()) and "submit_count" not in names
    assert set(dir(Executable())) >= {"exe", "args", "env"}


def test_components_accept_plugin_names(session: Session) -> None:
    j = Job()
    j.backend = "Local"
    assert isinstance(j.backend, Local)
    j.application = "Executable"
    assert isinstance(j.application, Executable)
    with pytest.raises(PluginError, match="no plugin named 'Locall'; did you mean 'Local'"):
        j.backend = "Locall"
    with pytest.raises(PluginError, match="not 'backends'"):
        j.backend = "Executable"
    with pytest.raises(SchemaError, match=r"Job\.backend: expected a backend object"):
        j.backend = 3


def test_list_attributes_validate_every_change_and_persist(session: Session) -> None:
    j = Job(application=Executable(args=["a"]))
    j.application.args.append("b")
    j.application.args += ["c"]
    assert j.application.args == ["a", "b", "c"]
    with pytest.raises(SchemaError):
        j.application.args.append(["bad"])
    assert j.application.args == ["a", "b", "c"]
    j.outputfiles.append(LocalFile("*.dat"))
    j.outputfiles.append("LocalFile")
    assert [type(f).__name__ for f in j.outputfiles] == ["LocalFile", "LocalFile"]
    # committed: a fresh connection sees the changes
    conn = session.repo.db.open(transaction_manager=transaction.TransactionManager())
    stored = Registry(conn.root()).get(j.id)
    assert stored is not None and stored.application.args == ("a", "b", "c")
    conn.close()


def test_copy_is_schema_driven(session: Session) -> None:
    j = Job(
        name="orig",
        application=Executable(exe="echo", args=["1"], env={"A": "b"}),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        inputdata=GangaDataset(files=["/x"]),
    )
    c = j.copy()
    assert c.id != j.id and c.status == "new" and c.name == "orig"
    assert c.application.args == ["1"] and c.application.env == {"A": "b"}
    c.application.args = ["changed"]
    assert j.application.args == ["1"]
    assert c.splitter.args == [["1"], ["2"]]
    assert c.inputdata.files == ["/x"]
    assert jobs(c.id) is c


def test_submitted_jobs_cannot_be_edited_except_name_and_comment(session: Session) -> None:
    j = Job(application=Executable(exe="true"))
    j.submit()
    with pytest.raises(JobError, match="can no longer be changed"):
        j.application.args = ["x"]
    with pytest.raises(JobError, match="can no longer be changed"):
        j.backend = "Local"
    j.name = "renamed"
    j.comment = "fine"
    assert j.name == "renamed"


def test_identity_one_proxy_per_object(session: Session) -> None:
    j = Job()
    assert jobs(j.id) is j
    assert j.application is j.application


def test_positional_arguments_for_files_and_clear_error_for_too_many() -> None:
    assert LocalFile("out.txt").namePattern == "out.txt"
    with pytest.raises(SchemaError, match="at most 0 positional"):
        Executable("echo")


def test_three_way_merge_lets_a_rename_and_a_status_change_commit_together(
    session: Session,
) -> None:
    j = Job(name="before")
    db = session.repo.db
    tm_user, tm_monitor = transaction.TransactionManager(), transaction.TransactionManager()
    user = db.open(transaction_manager=tm_user)
    monitor = db.open(transaction_manager=tm_monitor)
    job_user: JobImpl = Registry(user.root()).jobs[j.id]
    job_monitor: JobImpl = Registry(monitor.root()).jobs[j.id]
    job_user.name = "after"
    job_monitor.change_status(Status.SUBMITTING, "test")
    tm_monitor.commit()
    tm_user.commit()  # would raise ConflictError without the per-attribute merge
    check = db.open(transaction_manager=transaction.TransactionManager())
    merged = Registry(check.root()).jobs[j.id]
    assert merged.name == "after" and merged.status == "submitting"
    assert len(merged.history) == 1
    for c in (user, monitor, check):
        c.close()


def test_three_way_merge_refuses_two_different_values(session: Session) -> None:
    from ZODB.POSException import ConflictError

    j = Job(name="before")
    db = session.repo.db
    tms = [transaction.TransactionManager() for _ in range(2)]
    conns = [db.open(transaction_manager=tm) for tm in tms]
    for conn, name in zip(conns, ("one", "two"), strict=True):
        Registry(conn.root()).jobs[j.id].name = name
    tms[0].commit()
    with pytest.raises(ConflictError):
        tms[1].commit()
    tms[1].abort()
    for c in conns:
        c.close()


def test_history_appends_from_two_sides_are_both_kept(session: Session) -> None:
    j = Job()
    db = session.repo.db
    tms = [transaction.TransactionManager() for _ in range(2)]
    conns = [db.open(transaction_manager=tm) for tm in tms]
    Registry(conns[0].root()).jobs[j.id].log_event("first")
    Registry(conns[1].root()).jobs[j.id].log_event("second")
    tms[0].commit()
    tms[1].commit()
    check = db.open(transaction_manager=transaction.TransactionManager())
    causes = [e[3] for e in Registry(check.root()).jobs[j.id].history]
    assert sorted(causes) == ["first", "second"]
    for c in (*conns, check):
        c.close()
