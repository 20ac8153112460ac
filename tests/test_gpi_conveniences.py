"""Conveniences scripts rely on: jobs by name, config sections by key, selecting by plugin
class, and a removed job that says so."""

from __future__ import annotations

import pytest

from ganga_like import ArgSplitter, Executable, Job, JobError, Local, config, jobs
from ganga_like.errors import ConfigError, PluginError, SchemaError
from ganga_like.runtime.session import Session


def test_jobs_by_name_is_the_most_recent_job_of_that_name(session: Session) -> None:
    first = Job(name="calib")
    other = Job(name="other")
    latest = Job(name="calib")
    assert jobs["calib"] is latest
    assert jobs["other"] is other
    assert first.id < latest.id
    # Integer keys keep their meaning: a position, as for a list.
    assert jobs[0] is first
    assert jobs[-1] is latest


def test_jobs_by_an_unknown_name_is_one_line_naming_it(session: Session) -> None:
    Job(name="calib")
    with pytest.raises(JobError, match="no job named 'nosuch'") as caught:
        jobs["nosuch"]
    assert isinstance(caught.value, KeyError)
    assert str(caught.value) == "no job named 'nosuch' in the repository"
    assert "\n" not in str(caught.value)


def test_config_sections_and_options_are_read_and_set_by_key(session: Session) -> None:
    config["Monitor"]["max_interval"] = 7
    assert config.Monitor.max_interval == 7
    config.Monitor.max_interval = 8
    assert config["Monitor"]["max_interval"] == 8
    with pytest.raises(ConfigError) as by_key:
        config["Monitor"]["max_interval"] = "soon"
    with pytest.raises(ConfigError) as by_attribute:
        config.Monitor.max_interval = "soon"
    assert str(by_key.value) == str(by_attribute.value)
    assert config.Monitor.max_interval == 8


def test_unknown_config_keys_are_the_same_one_line_as_attributes(session: Session) -> None:
    for by_key, by_attribute in [
        (lambda: config["Nosuch"], lambda: config.Nosuch),
        (lambda: config["Monitor"]["nosuch"], lambda: config.Monitor.nosuch),
    ]:
        with pytest.raises(ConfigError) as key_error:
            by_key()
        with pytest.raises(ConfigError) as attribute_error:
            by_attribute()
        assert str(key_error.value) == str(attribute_error.value)
        assert "\n" not in str(key_error.value)
    with pytest.raises(ConfigError) as unknown_set:
        config["Monitor"]["nosuch"] = 1
    with pytest.raises(ConfigError) as unknown_attr_set:
        config.Monitor.nosuch = 1
    assert str(unknown_set.value) == str(unknown_attr_set.value)


def test_select_matches_plugins_by_their_class_or_its_name(session: Session) -> None:
    echo = Job(application=Executable(exe="echo"))
    assert list(jobs.select(application=Executable)) == [echo]
    assert list(jobs.select(application="Executable")) == [echo]
    assert list(jobs.select(backend=Local)) == [echo]
    assert list(jobs.select(backend="Local")) == [echo]
    assert list(jobs.select(backend=Local, application=ArgSplitter)) == []
    assert list(jobs.select(application="Local")) == []


def test_select_of_an_unknown_plugin_name_is_one_line_not_an_empty_slice(
    session: Session,
) -> None:
    Job(application=Executable(exe="echo"))
    with pytest.raises(PluginError, match=r"^no plugin named 'Executabel'; did you mean 'Exec"):
        jobs.select(application="Executabel")
    with pytest.raises(PluginError, match=r"^no plugin named 'Locl'"):
        jobs.select(backend="Locl")


def test_select_takes_a_first_and_last_id_as_ganga_does(session: Session) -> None:
    made = [Job(name=f"j{i}") for i in range(6)]
    ids = [j.id for j in made]
    assert jobs.select(ids[1], ids[3]).ids() == ids[1:4]  # both ends included, as in Ganga
    assert jobs.select(ids[4]).ids() == ids[4:]  # from that id up
    assert jobs.select(ids[1], ids[3], name="j2").ids() == [ids[2]]
    assert jobs.select([ids[0], ids[5]]).ids() == [ids[0], ids[5]]  # a list: exactly those
    for wrong, expected in [
        (lambda: jobs.select("3"), "ids expected a list or range of ids"),
        (lambda: jobs.select([ids[0]], ids[3]), "a last id needs a first id"),
    ]:
        with pytest.raises(SchemaError, match=expected) as raised:
            wrong()
        assert "\n" not in str(raised.value)


def test_a_removed_job_says_removed_and_refuses_changes_in_one_line(session: Session) -> None:
    j = Job(name="gone", application=Executable(exe="echo", args=["a"]))
    keep = Job(name="kept")
    assert j.remove()
    assert j.status == "removed"
    assert "status=removed" in repr(j)
    attempts = [
        lambda: setattr(j, "name", "back"),
        lambda: j.application.args.append("b"),
        lambda: setattr(j.application, "exe", "true"),
        j.submit,
        j.kill,
        j.resubmit,
        j.remove,
        lambda: j.force_status("failed"),
    ]
    for attempt in attempts:
        with pytest.raises(JobError, match=f"job {j.id} was removed: ") as err:
            attempt()
        assert "\n" not in str(err.value)
    assert j.name == "gone"
    assert list(j.application.args) == ["a"]
    assert list(jobs) == [keep]
    assert keep.status == "new"
    assert j.copy().status == "new"  # what it described can still start a new job


def test_a_position_that_is_not_a_whole_number_is_one_line(session: Session) -> None:
    j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"]]))
    j.submit()
    for container, index in ((jobs, 4.5), (jobs[:], 0.5), (j.subjobs, "0")):
        with pytest.raises(JobError, match="a position is a whole number or a slice") as raised:
            container[index]
        assert "\n" not in str(raised.value)
    assert j.subjobs[1].id == 1 and j.wait(timeout=60) == "completed"


def test_a_jobs_repr_cuts_a_huge_part_and_the_part_itself_stays_whole(session: Session) -> None:
    from ganga_like import ArgSplitter

    args = [[str(i)] for i in range(20_000)]
    j = Job(name="big", application=Executable(exe="true"), splitter=ArgSplitter(args=args))
    shown = repr(j)
    assert len(shown) < 1000  # not 200 kB on one line for print(j)
    assert shown.startswith("Job(fqid=") and shown.endswith(")")
    assert "application=Executable(exe='true')" in shown
    assert "splitter=ArgSplitter(args=[['0'], ['1']" in shown and "…" in shown
    assert len(repr(j.splitter)) > 100_000  # asked for, the splitter is shown whole
