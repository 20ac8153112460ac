"""Iterate on the real Local backend in one session: a job repeated from the previous
iteration's outputs until a user's function says it converged, or max_iterations; ended
failed by a failed iteration or an `until` that raises, with monitoring going on; every
kind of bad input refused in one line with nothing changed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ganga_like import Executable, Iterate, Job, LocalFile, Resubmit, RunCommand, jobs, wait
from ganga_like.errors import GangaError
from ganga_like.runtime.session import Session, current_session

from .waiting import wait_until

FITLIB = """\
def converged(it):
    return int((it.outputdir / "n.txt").read_text()) >= 3

def never(it):
    return False

def broken(it):
    raise RuntimeError(f"cannot read chi2 of iteration {it.iteration}")

not_a_function = 3
"""
# Counts its runs: reads n.txt (the previous iteration's output, given as an input file),
# writes n + 1; fails when told to at some count.
COUNT = 'n=$(cat n.txt 2>/dev/null || echo 0); echo $((n+1)) > n.txt; test $((n+1)) != "$1"'


@pytest.fixture
def fitlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fitlib.py").write_text(FITLIB)
    monkeypatch.syspath_prepend(str(tmp_path))
    # An earlier test of this process (the docs' example) may have imported a fitlib of
    # its own: the one written here is the one imported.
    monkeypatch.delitem(sys.modules, "fitlib", raising=False)


def counting(fail_at: int = 0, name: str = "fit") -> Job:
    return Job(
        name=name,
        application=Executable(exe="sh", args=["-c", COUNT, "count", str(fail_at)]),
        outputfiles=[LocalFile("n.txt")],
    )


def causes(job: Job) -> list[str]:
    current_session().sync()
    return [e.cause for e in job.history]


def submits(job: Job) -> int:
    return sum(1 for e in job.history if e.new == "submitting")


def test_it_repeats_on_the_previous_outputs_until_converged(
    session: Session, fitlib: None, tmp_path: Path
) -> None:
    fit = Iterate(counting(), until="fitlib:converged", max_iterations=10)
    fit.on("completed", RunCommand(["touch", str(tmp_path / "converged")]))
    merge = Job(application=Executable(exe="echo"), after=fit)
    assert fit.submit() and merge.submit()
    assert wait([merge, fit], timeout=180) == [merge, fit]
    assert fit.status == "completed" and merge.status == "completed"
    runs = fit.iterations
    assert len(runs) == 3 and runs.ids()[0] == fit.id
    assert [r.status for r in runs] == ["completed"] * 3
    assert [submits(r) for r in runs] == [1, 1, 1]
    assert [(r.outputdir / "n.txt").read_text() for r in runs] == ["1\n", "2\n", "3\n"]
    assert [f.namePattern for f in runs[2].inputfiles] == [str(runs[1].outputdir / "n.txt")]
    assert f"monitor: iterate: converged at iteration 3 (job {runs[2].id})" in causes(fit)
    assert f"monitor: iterate: iteration 1 (job {fit.id}) did not converge; iteration 2 is " in (
        "\n".join(causes(fit))
    )
    # Its callbacks follow the Iterate, not its first run: called once, at the end.
    assert wait_until(lambda: (tmp_path / "converged").exists(), timeout=120)
    assert sum(c.endswith(": calling") for c in causes(fit)) == 1


def test_it_ends_failed_once_max_iterations_ran_out(session: Session, fitlib: None) -> None:
    fit = Iterate(counting(), until="fitlib:never", max_iterations=2)
    fit.submit()
    assert fit.wait(timeout=180) == "failed"
    assert len(fit.iterations) == 2
    assert causes(fit)[-1] == "monitor: iterate: not converged after 2 iterations"


def test_a_failed_iteration_ends_it_failed_naming_the_iteration(
    session: Session, fitlib: None
) -> None:
    fit = Iterate(counting(fail_at=2), until="fitlib:never", max_iterations=5)
    fit.submit()
    assert fit.wait(timeout=180) == "failed"
    second = fit.iterations[1]
    assert second.status == "failed"
    assert causes(fit)[-1] == f"monitor: iterate: iteration 2 (job {second.id}) failed (exit 1)"


def test_an_until_that_raises_ends_it_failed_and_monitoring_goes_on(
    session: Session, fitlib: None
) -> None:
    fit = Iterate(counting(), until="fitlib:broken", max_iterations=5)
    fit.submit()
    assert fit.wait(timeout=180) == "failed"
    assert causes(fit)[-1] == (
        "monitor: iterate: until fitlib:broken raised RuntimeError: cannot read chi2 of iteration 1"
    )
    assert len(fit.iterations) == 1
    later = Job(application=Executable(exe="echo"))
    later.submit()
    assert later.wait(timeout=120) == "completed"


BAD: list[tuple[Callable[[Job], object], str]] = [
    (lambda j: Iterate(j, until="fitlib:nothing"), "Iterate.until: 'fitlib:nothing' cannot be"),
    (lambda j: Iterate(j, until="nomodule:f"), "(ModuleNotFoundError: No module named 'nomodule')"),
    (lambda j: Iterate(j, until="fitlib.converged"), 'Iterate.until: expected a function as "mo'),
    (lambda j: Iterate(j, until=len), 'Iterate.until: expected a function as "module:name"'),
    (lambda j: Iterate(j, until="fitlib:not_a_function"), "is a int, not a function"),
    (lambda j: Iterate(j, "fitlib:never", max_iterations=0), "Iterate.max_iterations: expected"),
    (lambda j: Iterate(j, "fitlib:never", max_iterations=True), "Iterate.max_iterations: expec"),
    (lambda j: Iterate(j, "fitlib:never", max_iterations="3"), "Iterate.max_iterations: expect"),
    (lambda j: Iterate(3, "fitlib:never"), "Iterate.job: expected a new job (a Job), not the int"),
    (lambda j: Iterate(Iterate(j, "fitlib:never"), "fitlib:never"), "is iterated already"),
]


@pytest.mark.parametrize(("make", "message"), BAD)
def test_bad_input_to_iterate_is_one_line_and_changes_nothing(
    session: Session, fitlib: None, make: Callable[[Job], object], message: str
) -> None:
    job = counting()
    with pytest.raises(GangaError) as refused:
        make(job)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    if "iterated already" not in message:
        assert job.iterations.ids() == [job.id]  # no Iterate was made of it


def test_only_a_new_whole_unsplit_job_is_iterated(session: Session, fitlib: None) -> None:
    from ganga_like import ArgSplitter

    done = counting()
    done.submit()
    with pytest.raises(GangaError, match=r"Iterate.job: job \d+ is (submitted|running|comp)"):
        Iterate(done, "fitlib:never")
    split = Job(application=Executable(exe="echo"), splitter=ArgSplitter(args=[["1"]]))
    with pytest.raises(GangaError, match=r"has a splitter; a job iterated is not split"):
        Iterate(split, "fitlib:never")
    split.submit()
    with pytest.raises(GangaError, match=r"Iterate.job: job \d+\.0 is a subjob; iterate a whole"):
        Iterate(split.subjobs[0], "fitlib:never")
    done.wait(timeout=120)
    split.wait(timeout=120)


def test_killing_an_iterate_kills_its_current_iteration_and_it_is_not_resubmitted(
    session: Session, fitlib: None, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    held = f"{COUNT}; test $n = 0 || while ! test -e {gate}; do sleep 0.05; done"
    job = Job(
        name="fit",
        application=Executable(exe="sh", args=["-c", held, "count", "0"]),
        outputfiles=[LocalFile("n.txt")],
    )
    fit = Iterate(job, until="fitlib:never", max_iterations=5)
    fit.submit()
    assert wait_until(lambda: len(fit.iterations) == 2, timeout=120)
    second = fit.iterations[1]
    assert wait_until(lambda: second.status == "running", timeout=120)
    with pytest.raises(GangaError, match=rf"job {fit.id} is an Iterate going on \(its iterat"):
        fit.resubmit()
    assert fit.kill()
    assert fit.wait(timeout=120) == "failed" and second.status == "killed"
    assert causes(fit)[-1] == f"monitor: iterate: iteration 2 (job {second.id}) killed"
    with pytest.raises(GangaError) as refused:
        fit.resubmit()
    assert str(refused.value) == (
        f"job {fit.id} is an Iterate that ended failed; it is not resubmitted: make a new one "
        f"from its last iteration, Iterate(Job(jobs({second.id})), until=...)"
    )
    again = Iterate(Job(jobs(second.id)), until="fitlib:converged", max_iterations=5)
    gate.touch()
    again.submit()
    assert again.wait(timeout=180) == "completed"
    assert (again.iterations[-1].outputdir / "n.txt").read_text() == "3\n"


def test_a_resubmit_callback_of_an_iterate_resubmits_nothing(
    session: Session, fitlib: None
) -> None:
    fit = Iterate(counting(), until="fitlib:never", max_iterations=1)
    fit.on("failed", Resubmit())
    fit.submit()
    assert fit.wait(timeout=120) == "failed"
    done = "Resubmit(times=1): not resubmitted: an Iterate is not resubmitted"
    assert wait_until(lambda: any(c.endswith(done) for c in causes(fit)), timeout=120)
    assert submits(fit) == 1 and fit.status == "failed"
