"""Callbacks stored on a job (``j.on(status, action)``), run by the monitor on the real
Local backend: each once per trigger, each call and its outcome in the job's event log, a
raising one logged while monitoring goes on, a mail through a real SMTP server, and
every kind of bad input refused in one line with nothing stored."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ganga_like import Executable, Job, Notify, Resubmit, RunCommand, SchemaError
from ganga_like.errors import JobError
from ganga_like.runtime.session import Session, current_session

from .test_notifier import Collector, mailing, smtp  # noqa: F401 (the fixtures)
from .waiting import wait_until

FUNCTIONS = """\
import os

def mark(job):
    with open(os.path.join(os.environ["CALLBACK_MARKS"], "marks"), "a") as out:
        out.write(f"{job.fqid} {job.status} {job.name}\\n")

def boom(job):
    raise ValueError(f"boom in {job.fqid}")

not_a_function = 3
"""


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module of callbacks importable here (``cbfuns``), writing into ``marks``."""
    (tmp_path / "cbfuns.py").write_text(FUNCTIONS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cbfuns", raising=False)  # the one written here
    monkeypatch.setenv("CALLBACK_MARKS", str(tmp_path))
    return tmp_path / "marks"


def causes(job: Job) -> list[str]:
    current_session().sync()  # what the monitor committed
    return [e.cause for e in job.history]


def logged(job: Job, text: str) -> Callable[[], bool]:
    return lambda: any(text in cause for cause in causes(job))


def test_each_callback_runs_once_with_its_call_and_outcome_in_the_event_log(
    session: Session, tmp_path: Path, marks: Path
) -> None:
    j = Job(name="sim", application=Executable(exe="echo", args=["hi"]))
    j.on("completed", "cbfuns:mark")
    j.on("completed", RunCommand(["sh", "-c", 'echo "$GANGA_JOB_ID $GANGA_JOB_STATUS" > ran']))
    j.on("failed", "cbfuns:mark")  # not reached: never called
    assert j.callbacks == [
        "on completed: cbfuns:mark",
        "on completed: RunCommand(['sh', '-c', 'echo \"$GANGA_JOB_ID $GANGA_JOB_STATUS\" > ran'])",
        "on failed: cbfuns:mark",
    ]
    j.submit()
    assert j.wait(timeout=120) == "completed"
    assert wait_until(logged(j, "RunCommand(['sh'"), timeout=120)
    assert wait_until(lambda: sum(": exit 0" in c for c in causes(j)) == 1, timeout=120)
    assert marks.read_text() == f"{j.id} completed sim\n"
    assert (j.outputdir / "ran").read_text() == f"{j.id} completed\n"
    shown = [c for c in causes(j) if c.startswith("monitor: on ")]
    assert shown == [
        "monitor: on completed: cbfuns:mark: calling",
        "monitor: on completed: cbfuns:mark: done",
        shown[2],
        shown[3],
    ]
    assert shown[2].endswith(": calling") and shown[3].endswith(": exit 0")


def test_a_raising_callback_is_logged_and_monitoring_goes_on(
    session: Session, tmp_path: Path, marks: Path
) -> None:
    first = Job(application=Executable(exe="echo"))
    first.on("completed", "cbfuns:boom")
    first.on("completed", RunCommand(["sh", "-c", "echo oops >&2; exit 4"]))
    first.submit()
    assert wait_until(logged(first, "exit 4: oops"), timeout=120)
    assert f"monitor: on completed: cbfuns:boom: raised ValueError: boom in {first.id}" in (
        causes(first)
    )
    second = Job(name="after", application=Executable(exe="echo"))
    second.on("completed", "cbfuns:mark")
    second.submit()
    assert second.wait(timeout=120) == "completed"
    assert wait_until(lambda: marks.exists(), timeout=120)
    assert marks.read_text() == f"{second.id} completed after\n"


def test_resubmit_on_failure_resubmits_at_most_the_times_asked(
    session: Session, tmp_path: Path
) -> None:
    marker = tmp_path / "second-try"
    j = Job(application=Executable(exe="sh", args=["-c", f"test -e {marker} || exit 3"]))
    j.on("failed", Resubmit(times=1))
    j.submit()
    assert wait_until(logged(j, "Resubmit(times=1): resubmitted"), timeout=120)
    assert j.wait(timeout=120) == "failed"  # it failed again: not resubmitted again
    assert wait_until(logged(j, "not resubmitted: it was 1 time(s) already"), timeout=120)
    assert sum(1 for e in j.history if e.new == "submitting") == 2
    marker.touch()
    j.resubmit()  # a user's resubmission: the callback's count is its own
    assert j.wait(timeout=120) == "completed"


def test_notify_mails_through_the_notifier_configuration(
    mailing: Collector,  # noqa: F811
    tmp_path: Path,
) -> None:
    j = Job(name="fit", application=Executable(exe="sh", args=["-c", "exit 3"]))
    j.on("failed", Notify(email="me@example.org"))
    j.submit()
    assert j.wait(timeout=120) == "failed"
    assert wait_until(lambda: len(mailing.messages) == 1, timeout=120)
    assert mailing.subjects() == [f"ganga job {j.id} (fit) failed"]
    assert wait_until(logged(j, "Notify(email='me@example.org'): sent to me@example.org"))


BAD_ON = [
    (("complete", "cbfuns:mark"), "Job.on(): status: unknown status 'complete'; did you mean"),
    ((3, "cbfuns:mark"), "Job.on(): status: unknown status 3; expected one of: new,"),
    (("completed", 3), "Job.on(): action expected Notify(email=...), Resubmit(), RunCommand"),
    (("completed", print), "(a function object cannot be stored: name it)"),
    (("completed", "cbfuns"), 'Job.on(): action: expected a function as "module:name"'),
    (("completed", "nomodule:f"), "'nomodule:f' cannot be used (ModuleNotFoundError: No module"),
    (("completed", "cbfuns:absent"), "cannot be used (AttributeError: module 'cbfuns' has no"),
    (("completed", "cbfuns:not_a_function"), "(TypeError: cbfuns:not_a_function is a int,"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_ON)
def test_bad_input_to_on_is_one_line_and_stores_nothing(
    session: Session, marks: Path, arguments: tuple[object, object], message: str
) -> None:
    j = Job(application=Executable(exe="echo"))
    with pytest.raises(SchemaError) as refused:
        j.on(*arguments)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert j.callbacks == []


BAD_ACTIONS: list[tuple[Callable[[], object], str]] = [
    (lambda: Notify(email="not an address"), "Notify.email: expected an e-mail address"),
    (lambda: Notify(email=3), "Notify.email: expected an e-mail address"),
    (lambda: Notify(email=""), "Notify.email: expected an e-mail address"),
    (lambda: Resubmit(times=0), "Resubmit.times: expected an int, 1 or more, not the int 0"),
    (lambda: Resubmit(times=True), "Resubmit.times: expected an int, 1 or more"),
    (lambda: RunCommand("ls -l"), "RunCommand.args: expected a list of non-empty strings"),
    (lambda: RunCommand([]), "RunCommand.args: expected a list of non-empty strings"),
    (lambda: RunCommand(["ls", 3]), "RunCommand.args: expected a list of non-empty strings"),
]


@pytest.mark.parametrize(("make", "message"), BAD_ACTIONS)
def test_a_built_in_action_given_nonsense_is_one_line(
    session: Session, make: Callable[[], object], message: str
) -> None:
    with pytest.raises(SchemaError) as refused:
        make()
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_callbacks_are_set_on_a_whole_job_not_on_a_subjob(session: Session) -> None:
    from ganga_like import ArgSplitter

    j = Job(application=Executable(exe="echo"), splitter=ArgSplitter(args=[["1"], ["2"]]))
    j.submit()
    with pytest.raises(JobError, match=r"callbacks are set on a whole job, not on a subjob"):
        j.subjobs[0].on("completed", Resubmit())
    j.wait(timeout=120)
