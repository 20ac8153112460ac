"""GPI actions take what to act on by position and their options by keyword: a positional
flag is never read as something else (``jobs.remove(10)`` removes job 10, not every job),
and any argument that does not fit is one line, with nothing changed."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaError,
    Job,
    JobError,
    JobTemplate,
    Local,
    SchemaError,
    TextMerger,
    jobs,
    templates,
)
from ganga_like.runtime.session import Session

from .split_jobs import two_subjobs_running_one_waiting


def _script(
    env: dict[str, str], code: str, *, runner: str = "python"
) -> subprocess.CompletedProcess[str]:
    """``code`` run as users run it: ``python -c`` or ``ganga script.py``."""
    body = "from ganga_like import *\n" + textwrap.dedent(code)
    if runner == "python":
        argv = [sys.executable, "-c", body]
    else:
        script = Path(env["GANGA_DIR"]).parent / "script.py"
        script.write_text(body)
        argv = [sys.executable, "-m", "ganga_like.cli", str(script)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("runner", ["python", "ganga"])
def test_remove_with_an_id_removes_that_job_only(env_for: dict[str, str], runner: str) -> None:
    done = _script(
        env_for,
        """
        for i in range(12):
            Job(name=f"j{i}")
        print("RETURNED", jobs.remove(10))
        print("LEFT", jobs.ids())
        print("THEN", jobs.select(name="j[12]").remove([1, 2]), jobs.ids())
        """,
        runner=runner,
    )
    assert done.returncode == 0, done.stderr
    assert "RETURNED []" in done.stdout
    assert "LEFT [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]" in done.stdout
    assert "THEN [] [0, 3, 4, 5, 6, 7, 8, 9, 11]" in done.stdout


@pytest.mark.parametrize(
    ("call", "line"),
    [
        (
            "jobs.remove(True)",
            "jobs.remove(): expected job ids or jobs, not the bool True; options are "
            "keywords, e.g. keep_going=True",
        ),
        ("jobs.remove(99)", "jobs.remove(): no job 99 in jobs; nothing done"),
        ("jobs.remove(2, 99)", "jobs.remove(): no job 99 in jobs; nothing done"),
        (
            "jobs.kill('3')",
            "jobs.kill(): expected job ids or jobs (e.g. 3, or a list of them), not the str '3'",
        ),
        (
            "jobs.remove(keep_going=0)",
            "jobs.remove(): keep_going expected True or False, not the int 0",
        ),
        (
            "jobs.remove(keepgoing=True)",
            "jobs.remove() has no option 'keepgoing'; did you mean "
            "'keep_going'? (options: keep_going)",
        ),
        ("jobs.select(name='x*').remove(1)", "JobSlice.remove(): no job 1 in jobs; nothing done"),
        ("jobs(0).remove(True)", "Job.remove() takes no argument, not the bool True"),
        (
            "jobs(0).submit(True)",
            "Job.submit() takes its options as keywords, submit(keep_going=..."
            ", dry_run=...); not by position the bool True",
        ),
        (
            "jobs(0).resubmit(Local())",
            "Job.resubmit() takes its options as keywords, resubmit("
            "keep_going=..., backend=..., group=..., memory=..., walltime=...); not by position "
            "the Local Local()",
        ),
        (
            "jobs(0).kill(False)",
            "Job.kill() takes its options as keywords, kill(keep_going=..., dependents=..., "
            "group=...); not by position the bool False",
        ),
        (
            "jobs(0).force_status('failed', True)",
            "Job.force_status() takes status by position; not also the bool True",
        ),
        ("jobs(0).copy(3)", "Job.copy() takes no argument, not the int 3"),
        ("jobs(0).wait(timout=5)", "Job.wait() has no option 'timout'; did you mean 'timeout'?"),
        (
            "jobs(0).peek('stdout', 3, 4)",
            "Job.peek() takes filename, lines by position; not also the int 4",
        ),
        ("jobs(0).force_status()", "Job.force_status() needs status: force_status(...)"),
        (
            "jobs.select(nosuch=1)",
            "jobs.select() has no option 'nosuch' (options: status, name, backend, application)",
        ),
        (
            "jobs.select(stauts='failed')",
            "jobs.select() has no option 'stauts'; did you mean "
            "'status'? (options: status, name, backend, application)",
        ),
        ("templates.remove(5)", "templates.remove(): no template 5 in templates; nothing done"),
        (
            "templates.remove(jobs(0))",
            "templates.remove(): expected template ids or templates (e.g. 3, or a list of "
            "them), not the Job Job(fqid=0, status=new, name='j0', application=Executable...",
        ),
        (
            "jobs.select(name='j1').remove(jobs(2))",
            "JobSlice.remove(): no job 2 in jobs; nothing done",
        ),
        (
            "jobs.remove(templates[0])",
            "jobs.remove(): expected job ids or jobs (e.g. 3, or a list of them), not the "
            "JobTemplate JobTemplate(id=0, status=template, application=Executable...",
        ),
        (
            "copy.copy(templates)",
            "copy.copy() of templates is not done: templates.copy() makes new templates of "
            "them, list(templates) lists them",
        ),
        (
            "copy.deepcopy(jobs)",
            "copy.copy() of jobs is not done: jobs.copy() makes new jobs of them, list(jobs) "
            "lists them",
        ),
        (
            "templates.copy(keep_going=None)",
            "templates.copy(): keep_going expected True or False, not the NoneType None",
        ),
    ],
)
def test_an_argument_that_does_not_fit_is_one_line_and_nothing_changes(
    session: Session, call: str, line: str
) -> None:
    for i in range(4):
        Job(name=f"j{i}")
    JobTemplate(name="t")
    before = (jobs.ids(), templates.ids(), [j.status for j in jobs])
    with pytest.raises(GangaError) as caught:
        eval(call)
    assert str(caught.value) == line
    assert "\n" not in str(caught.value)
    assert (jobs.ids(), templates.ids(), [j.status for j in jobs]) == before


def test_a_slice_acts_on_the_ids_it_is_given_and_only_those(session: Session) -> None:
    made = [Job(name=f"j{i}", application=Executable(exe="true")) for i in range(5)]
    assert jobs.submit(1, [3]) == []
    assert made[0].status == "new"
    assert made[2].status == made[4].status == "new"
    for j in (made[1], made[3]):
        assert j.wait(timeout=60) == "completed"
    copies = jobs.copy(range(1, 3))
    assert [c.name for c in copies] == ["j1", "j2"] and len(jobs) == 7
    assert jobs.freeze(3) == [] and made[3].status == "completed_frozen"
    assert made[1].status == "completed"
    assert jobs.unfreeze(3) == [] and made[3].status == "completed"
    assert jobs.remove([]) == [] and len(jobs) == 7  # no id named: nothing removed
    t1, t2 = JobTemplate(name="a"), JobTemplate(name="b")
    assert templates.remove(t1.id) == [] and templates.ids() == [t2.id]
    with pytest.raises(JobError, match="cannot be frozen"):
        templates.freeze()


def test_a_slice_acts_on_the_jobs_or_templates_it_is_given_and_only_those(
    session: Session,
) -> None:
    made = [Job(name=f"j{i}") for i in range(5)]
    assert jobs.remove(made[1]) == [] and jobs.ids() == [0, 2, 3, 4]
    assert jobs.remove([made[2], 3]) == [] and jobs.ids() == [0, 4]
    assert jobs.copy(jobs.select(name="j4"), made[4]).ids() == [5]  # each once
    assert jobs.select([0, 5]).remove(jobs.select([5])) == [] and jobs.ids() == [0, 4]
    gone = made[1]
    with pytest.raises(JobError, match=r"^jobs.remove\(\): no job 1 in jobs; nothing done$"):
        jobs.remove(made[0], gone)
    assert jobs.ids() == [0, 4]
    t1, t2 = JobTemplate(name="a"), JobTemplate(name="b")
    assert templates.remove(t1) == [] and templates.ids() == [t2.id]
    assert [t.name for t in templates.copy(templates)] == ["b"]


def test_copies_are_listed_under_a_title_saying_they_are_new(session: Session) -> None:
    Job(name="a")
    JobTemplate(name="t")
    assert repr(jobs.copy(0)).startswith("new jobs copied from jobs")
    assert repr(templates.copy()).startswith("new templates copied from templates")


def test_subjob_actions_take_subjob_ids(session: Session) -> None:
    with two_subjobs_running_one_waiting() as j:
        assert j.subjobs.kill(2) == []
        assert j.subjobs[2].status == "killed"
        assert [s.status for s in j.subjobs[:2]] == ["running", "running"]
        with pytest.raises(JobError, match=r"no subjob 7 in subjobs of job 0; nothing done"):
            j.subjobs.kill(7)
        with pytest.raises(JobError, match=r"remove the master: jobs\(0\).remove\(\)"):
            j.subjobs.remove(1)
        assert [s.status for s in j.subjobs[:2]] == ["running", "running"]
        with pytest.raises(JobError, match=r"no subjob 0 in subjobs of job 0; nothing done"):
            j.subjobs.kill(jobs(0))  # the master is not one of its subjobs
        assert j.subjobs.kill(j.subjobs[1]) == [] and j.subjobs[1].status == "killed"
        assert j.subjobs[0].status == "running"
        copied = j.subjobs.copy(0)
        assert repr(copied).startswith("new jobs copied from subjobs of job 0")
        assert [c.id for c in copied] == [jobs[-1].id] and not len(jobs[-1].subjobs)


def _split(exe: str, args: list[list[str]]) -> Job:
    return Job(application=Executable(exe=exe), splitter=ArgSplitter(args=args))


@pytest.fixture
def job_in_every_status(session: Session) -> Iterator[dict[str, Job]]:
    """A job, plain and split, in each status a user meets (the running ones killed after)."""
    made: dict[str, Job] = {"new": Job(application=Executable(exe="true"))}
    made["split new"] = _split("true", [["1"], ["2"]])
    for label, exe in (("completed", "true"), ("failed", "false")):
        made[label] = Job(application=Executable(exe=exe))
        made[f"split {label}"] = _split(exe, [["1"], ["2"]])
    made["split frozen"] = _split("true", [["1"]])
    finished = ("completed", "failed", "split completed", "split failed", "split frozen")
    for name in finished:
        made[name].submit()
    for name in finished:
        assert made[name].wait(timeout=120) == name.split()[-1].replace("frozen", "completed")
    made["split frozen"].subjobs[0].freeze()
    # The session runs two at once: both slots taken, then one more submitted and killed.
    made["running"] = Job(application=Executable(exe="sleep", args=["600"]))
    made["split running"] = _split("sleep", [["600"]])
    made["killed"] = Job(application=Executable(exe="sleep", args=["600"]))
    for name in ("running", "split running", "killed"):
        made[name].submit()
    made["killed"].kill()
    for name in ("running", "split running"):
        made[name].wait(timeout=120, until="running")
    yield made
    for name in ("running", "split running"):
        made[name].kill()


def test_a_job_or_template_of_a_job_copies_its_description_in_every_status(
    job_in_every_status: dict[str, Job],
) -> None:
    for name, job in job_in_every_status.items():
        # What the backend recorded of a run (the Local host it ran on) is not copied.
        expected = (repr(job.application), repr(copy.copy(job.backend)), repr(job.splitter))
        for made in (
            Job(job),
            JobTemplate(job),
            job.copy(),
            copy.copy(job),
            copy.deepcopy(job),
            Job(JobTemplate(job)),
        ):
            assert (repr(made.application), repr(made.backend), repr(made.splitter)) == (
                expected
            ), name
            assert made.status in ("new", "template"), name
            assert made.id != job.id or isinstance(made, JobTemplate), name
    subjob = job_in_every_status["split completed"].subjobs[1]
    assert Job(subjob).application.args == ["2"] and Job(subjob).splitter is None


def test_copy_module_copies_gpi_objects_as_their_copy_method(session: Session) -> None:
    j = Job(name="orig", application=Executable(exe="echo", args=["a"]), backend=Local())
    for copier in (copy.copy, copy.deepcopy):
        clone = copier(j)
        assert isinstance(clone, Job) and clone.id != j.id and clone.name == "orig"
        app = copier(j.application)
        app.args.append("b")  # an unattached copy: the job's own is unchanged
        assert app.args == ["a", "b"] and j.application.args == ["a"]
        assert copier(j.backend) == Local()
        assert copier(ArgSplitter(args=[["1"]])).args == [["1"]]
        t = JobTemplate(name="t")
        assert copier(t).id != t.id
    assert len(jobs) == 3


def test_a_copy_of_a_list_or_dict_attribute_is_plain_and_changes_nothing_stored(
    session: Session,
) -> None:
    j = Job(application=Executable(exe="echo", args=["a"], env={"K": "v"}))
    j.postprocessors = [TextMerger(files=["stdout"])]
    for copier in (copy.copy, copy.deepcopy, lambda held: held.copy()):
        args, env = copier(j.application.args), copier(j.application.env)
        assert (type(args), type(env)) == (list, dict)
        args.append("b")
        env["X"] = "y"
        assert j.application.args == ["a"] and j.application.env == {"K": "v"}
    merger = copy.deepcopy(j.postprocessors)[0]
    merger.files.append("x")  # a deep copy holds unattached components
    assert j.postprocessors[0].files == ["stdout"]
    assert len(jobs) == 1


@pytest.mark.parametrize("part", ["application", "backend"])
def test_a_required_part_set_to_none_is_refused_at_once(session: Session, part: str) -> None:
    j = Job(application=Executable(exe="true"))
    with pytest.raises(SchemaError) as caught:
        setattr(j, part, None)
    example = {"application": "Executable", "backend": "Local"}[part]
    assert str(caught.value) == f"Job.{part} cannot be None: a job needs one, e.g. {example}()"
    assert getattr(j, part) is not None
    with pytest.raises(SchemaError, match=f"Job.{part} cannot be None"):
        Job(**{part: None})
    with pytest.raises(SchemaError, match=f"JobTemplate.{part} cannot be None"):
        JobTemplate(**{part: None})
    assert len(jobs) == 1 and len(templates) == 0
    j.submit()  # the job refused None kept its part, and runs with it
    assert j.wait(timeout=60) == "completed"
