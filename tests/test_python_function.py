"""PythonFunction: a Python function called in a (sub)job, its return value read back.

Real Local jobs (the detached runner), results read back by a fresh process, and the bad
input that must be refused in one line. The same application on Slurm and Dask is run by
the backend conformance suite (tests/test_backend_conformance.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaError,
    GenericSplitter,
    Job,
    JobError,
    PythonFunction,
    SchemaError,
)
from ganga_like.runtime.session import Session

from . import test_notebook

kernel_env = test_notebook.kernel_env  # the fixture: a real kernel, this interpreter

PATIENCE = 120


def test_a_split_function_job_gives_each_subjobs_return_value_also_to_a_fresh_process(
    session: Session, gangadir: Path, env_for: dict[str, str]
) -> None:
    j = Job(
        application=PythonFunction(function="tests.pyfunctions.power", kwargs={"exponent": 2}),
        splitter=ArgSplitter(args=[[1], [2], [3]]),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert j.result() == [1, 4, 9]
    assert j.subjobs[2].result() == 9
    assert [s.application.args for s in j.subjobs] == [[1], [2], [3]]
    shown = json.loads((j.subjobs[1].outputdir / "result.json").read_text())
    assert shown == {"repr": "4", "value": 4}
    assert (j.subjobs[0].inputdir / "call.pickle").is_file()
    session.close()
    reader = textwrap.dedent(f"""
        from ganga_like import jobs
        j = jobs({j.id})
        print(j.result(), j.subjobs[1].result(), j.subjobs[1].status)
    """)
    done = subprocess.run(
        [sys.executable, "-c", reader],
        env=env_for,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[1, 4, 9] 4 completed"


def test_arguments_reach_the_function_with_their_types(session: Session) -> None:
    j = Job(
        application=PythonFunction(
            function="tests.pyfunctions.describe",
            args=[1, 2.5, "three", None, [4, [5]], {"k": (6,)}, b"raw"],
            kwargs={"flag": True},
        )
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert j.result() == {
        # Lists and tuples arrive as lists, as j.application.args shows them.
        "args": [1, 2.5, "three", None, [4, [5]], {"k": [6]}, b"raw"],
        "types": ["int", "float", "str", "NoneType", "list", "dict", "bytes"],
        "kwargs": {"flag": True},
    }


def test_a_function_defined_here_is_pickled_by_value_and_its_output_kept(
    session: Session,
) -> None:
    offset = 100

    def shifted(x: int) -> set[int]:  # a closure: it cannot be found by name elsewhere
        print("shifting", x)
        return {x + offset}

    j = Job(
        application=PythonFunction(function=shifted),
        splitter=GenericSplitter(attribute="application.args", values=[[1], [2]]),
    )
    shown = repr(j.application.function)
    assert shown.startswith("<function test_a_") and shown.endswith("<locals>.shifted, pickled>")
    j.submit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert j.result() == [{101}, {102}]
    assert (j.subjobs[1].outputdir / "stdout").read_text() == "shifting 2\n"
    # A set is no JSON: result.json keeps its repr only.
    assert json.loads((j.subjobs[0].outputdir / "result.json").read_text()) == {"repr": "{101}"}


def test_a_function_importable_by_name_is_stored_by_name() -> None:
    from tests.pyfunctions import power

    app = PythonFunction(function=power)
    assert app.function == "tests.pyfunctions.power"
    assert app.load() is power


def test_an_exception_fails_the_job_with_its_traceback_in_stderr(session: Session) -> None:
    j = Job(
        application=PythonFunction(function="tests.pyfunctions.divide"),
        splitter=ArgSplitter(args=[[1, 2], [1, 0]]),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    ok, bad = j.subjobs
    assert [ok.status, bad.status, bad.exit_code] == ["completed", "failed", 1]
    stderr = (bad.outputdir / "stderr").read_text()
    assert "Traceback (most recent call last)" in stderr
    assert 'tests/pyfunctions.py", line' in stderr and "return a / b" in stderr
    assert stderr.endswith("PythonFunction: divide() raised ZeroDivisionError: division by zero\n")
    assert ok.result() == 0.5
    reason = re.escape("divide() raised ZeroDivisionError: division by zero")
    with pytest.raises(JobError, match=rf"^job {bad.fqid} failed \(exit code 1: .*{reason}\)"):
        bad.result()
    with pytest.raises(
        JobError, match=rf"^job {j.id}: 1 of 2 subjobs have no result: {bad.fqid} failed"
    ):
        j.result()


def test_a_return_value_that_cannot_be_pickled_fails_the_job_saying_so(session: Session) -> None:
    j = Job(application=PythonFunction(function="tests.pyfunctions.a_lock"))
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    assert j.exit_code == 3
    line = "PythonFunction: the return value of a_lock() (a lock) cannot be pickled"
    pattern = re.escape(line)
    assert line in (j.outputdir / "stderr").read_text()
    with pytest.raises(JobError, match=rf"^job {j.id} failed \(exit code 3: {pattern}"):
        j.result()
    assert not (j.outputdir / "result.pickle").exists()


def test_a_failed_call_resubmitted_runs_again_and_a_copy_runs_the_same_call(
    session: Session, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    j = Job(application=PythonFunction(function="tests.pyfunctions.read_text", args=[str(marker)]))
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    marker.write_text("here")
    j.resubmit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert j.result() == "here"
    assert "FileNotFoundError" in (j.outputdir.parent / "output.1" / "stderr").read_text()
    c = j.copy()
    assert c.application.function == "tests.pyfunctions.read_text"
    c.submit()
    assert c.wait(timeout=PATIENCE) == "completed"
    assert c.result() == "here"


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("tests.no_such_module.f", r"cannot load 'tests.no_such_module.f': ModuleNotFoundError"),
        (
            "tests.pyfunctions.nope",
            r"cannot load 'tests.pyfunctions.nope': AttributeError: "
            r"tests.pyfunctions has no attribute 'nope'",
        ),
        (
            "tests.pyfunctions.NOT_CALLABLE",
            r"'tests.pyfunctions.NOT_CALLABLE' is not callable \(it is an int\)",
        ),
        ("", r": give 'package.module.function' or a callable$"),
    ],
)
def test_a_function_that_cannot_be_loaded_is_refused_at_submit_and_nothing_changes(
    session: Session, function: str, message: str
) -> None:
    j = Job(application=PythonFunction(function=function), splitter=ArgSplitter(args=[[1], [2]]))
    with pytest.raises(JobError, match=rf"^PythonFunction\.function(: | is not set){message}"):
        j.submit()
    assert j.status == "new" and len(j.subjobs) == 0


def test_a_missing_interpreter_is_refused_at_submit_and_a_given_one_is_used(
    session: Session,
) -> None:
    j = Job(application=PythonFunction(function="os.getenv", python="/no/such/python"))
    with pytest.raises(JobError, match=r"^PythonFunction\.python: interpreter not found: /no/"):
        j.submit()
    assert j.status == "new"
    k = Job(
        application=PythonFunction(
            function="os.getenv", args=["GREETING"], env={"GREETING": "hi"}, python=sys.executable
        )
    )
    k.submit()
    assert k.wait(timeout=PATIENCE) == "completed"
    assert k.result() == "hi"


def test_wrong_values_are_refused_when_set_and_nothing_changes() -> None:
    app = PythonFunction(function="math.factorial", args=[5])
    cases: list[tuple[str, Any, str]] = [
        ("function", "factorial", r"expected a dotted name .* got 'factorial': not a dotted name"),
        ("function", "math..pi", r"expected .*, got 'math..pi': not a dotted name"),
        ("function", 5, r"expected a dotted name 'package.module.function' or a callable"),
        ("args", 5, r"expected"),
        (
            "args",
            [threading.Lock()],
            r"expected a picklable value \(TypeError: cannot pickle '_thread.lock' object\), not",
        ),
        ("kwargs", {1: 2}, r"expected keys that are a unicode string, got 1$"),
        (
            "kwargs",
            {"x": (i for i in range(3))},
            r"expected values that are a picklable value, got <generator",
        ),
    ]
    for name, value, message in cases:
        with pytest.raises(SchemaError, match=rf"^PythonFunction\.{name}: {message}"):
            setattr(app, name, value)
    assert app.function == "math.factorial" and app.args == [5] and app.kwargs == {}


def test_an_argument_of_a_class_defined_in_main_is_refused_when_set() -> None:
    class Point:
        pass

    Point.__module__ = "__main__"  # as for a class a script or notebook defines
    with pytest.raises(
        SchemaError,
        match=r"^PythonFunction\.args: expected a picklable value \(PicklingError: .*Point is "
        r"defined in __main__ \(a script or notebook\): define it in an importable module\)",
    ):
        PythonFunction(args=[Point()])


def test_without_cloudpickle_a_function_of_main_is_refused_in_one_line(
    env_for: dict[str, str],
) -> None:
    code = textwrap.dedent("""
        import sys
        sys.modules["cloudpickle"] = None  # as if it were not installed
        from ganga_like import GangaError, PythonFunction
        def f():
            return 1
        try:
            PythonFunction(function=f)
        except GangaError as exc:
            print(exc)
        print(PythonFunction(function="math.factorial").function)
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env_for, capture_output=True, text=True, timeout=PATIENCE
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.strip().splitlines()
    assert first.startswith("PythonFunction.function: expected a dotted name")
    assert "install cloudpickle to store it by value" in first
    assert second == "math.factorial"


def test_result_is_refused_in_one_line_before_completion_and_for_other_applications(
    session: Session,
) -> None:
    j = Job(application=PythonFunction(function="time.sleep", args=[60]))
    with pytest.raises(JobError, match=rf"^job {j.id} is new: it has no result yet$"):
        j.result()
    j.submit()
    assert j.wait(timeout=PATIENCE, until="running") == "running"
    with pytest.raises(GangaError, match=rf"^job {j.id} is running: it has no result yet$"):
        j.result()
    j.kill()
    with pytest.raises(JobError, match=rf"^job {j.id} is killed: it has no result$"):
        j.result()
    e = Job(application=Executable(exe="true"))
    with pytest.raises(JobError, match=rf"^job {e.id}: an Executable job has no result\(\)"):
        e.result()


def test_a_masters_result_leaves_out_frozen_subjobs_as_its_status_does(
    session: Session,
) -> None:
    j = Job(
        application=PythonFunction(function="math.sqrt"),
        splitter=ArgSplitter(args=[[4], [-1], [9]]),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    j.subjobs[1].resplit(ArgSplitter(args=[[16], [25]]))  # the failed piece, split again
    assert j.wait(timeout=120) == "completed"
    assert j.result() == [2.0, 3.0, 4.0, 5.0]  # subjobs 0, 2, 3, 4: 1 is frozen
    j.subjobs[2].freeze()  # a completed subjob frozen is left out too, as mergers do
    assert j.result() == [2.0, 4.0, 5.0]
    assert j.subjobs[2].result() == 3.0  # its own result is still there
    j.subjobs.select(status="completed").freeze()
    with pytest.raises(JobError, match=rf"^job {j.id}: every subjob is frozen"):
        j.result()


def test_argsplitter_keeps_values_and_executable_still_takes_strings(session: Session) -> None:
    splitter = ArgSplitter(args=[[1, "a"], [2.5, None]])
    assert splitter.args == [[1, "a"], [2.5, None]]
    with pytest.raises(SchemaError, match=r"^ArgSplitter\.args: expected"):
        splitter.args = [[object()]]
    j = Job(application=Executable(exe="echo"), splitter=ArgSplitter(args=[[1], [2.5]]))
    j.submit()
    assert [s.application.args for s in j.subjobs] == [["1"], ["2.5"]]
    k = Job(application=Executable(exe="echo"), splitter=ArgSplitter(args=[["x"], [True]]))
    with pytest.raises(JobError, match=r"splitter: subjob 1: Executable\.args: expected a string"):
        k.submit()
    assert k.status == "new" and len(k.subjobs) == 0
    assert j.wait(timeout=PATIENCE) == "completed"


def test_the_job_shows_its_function_and_arguments_in_text_and_html(session: Session) -> None:
    from ganga_like.shell.display import job_html, job_text

    j = Job(application=PythonFunction(function="tests.pyfunctions.power", args=[3]))
    text = job_text(j)
    assert "application: PythonFunction" in text
    assert "function: 'tests.pyfunctions.power'" in text and "args: [3]" in text
    html = job_html(j)
    assert "PythonFunction" in html and "tests.pyfunctions.power" in html
    assert "PythonFunction(function='tests.pyfunctions.power', args=[3])" in repr(j)


def test_the_called_module_starts_without_importing_ganga_like() -> None:
    code = (
        "import sys, ganga_like_std.pycall\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ganga_like', 'traitlets', 'ZODB'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=PATIENCE, check=True
    )
    assert done.stdout.strip() == "['ganga_like_std', 'ganga_like_std.pycall']"


@pytest.mark.parametrize(
    "name", ["Dask", pytest.param("Slurm", marks=pytest.mark.slurm)], ids=["Dask", "Slurm"]
)
def test_a_function_pickled_by_value_runs_on_a_real_cluster(name: str, gangadir: Path) -> None:
    from ganga_like.runtime.session import close_session

    from .backends import CASES, open_case_session

    case = CASES[name]
    case.available()
    open_case_session(case, gangadir, repository_mode="embedded")
    try:
        scale = 10

        def scaled(x: int) -> list[int]:  # a closure: only cloudpickle can send it
            return [x * scale]

        j = Job(
            application=PythonFunction(function=scaled),
            splitter=ArgSplitter(args=[[1], [2], [3]]),
            backend=case.make(),
        )
        if name == "Slurm":
            # The preview shows the call, and writes no call file.
            preview = str(j.submit(dry_run=True))
            assert "-m ganga_like_std.pycall call.pickle" in preview
            assert not list(gangadir.glob("workspace/**/call.pickle"))
        j.submit()
        assert j.wait(timeout=PATIENCE) == "completed"
        assert j.result() == [[10], [20], [30]]
    finally:
        close_session()
        case.leftovers(gangadir, [])


def test_a_function_defined_in_a_notebook_cell_runs_and_its_result_comes_back(
    kernel_env: Path,
) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    cells = [
        "from ganga_like import *",
        "def triple(x):\n    return 3 * x",
        "j = Job(application=PythonFunction(function=triple),\n"
        "        splitter=ArgSplitter(args=[[1], [2]]))\n"
        "j.submit()\n"
        "print(j.application.function)",
        "print(j.wait(timeout=120), j.result())",
    ]
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    test_notebook.run_notebook(nb, kernel_env)
    texts = ["".join(o.get("text", "") for o in cell.outputs) for cell in nb.cells]
    assert texts[2] == "<function triple, pickled>\n"
    assert texts[3] == "completed [3, 6]\n"
