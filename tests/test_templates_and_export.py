"""Job templates, export/load of GPI text, and runfile: real repositories, real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    ExportError,
    GangaError,
    Job,
    JobTemplate,
    LoadError,
    Local,
    LocalFile,
    SchemaError,
    TemplateError,
    export,
    jobs,
    load,
    templates,
)
from ganga_like.gpi.proxy import unwrap
from ganga_like.model.base import ComponentList
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.parts import job_parts
from ganga_like.model.template import JobTemplate as TemplateImpl
from ganga_like.repository.layout import layout_problem
from ganga_like.runtime.session import Session
from ganga_like.shell import display
from ganga_like.shell.user_script import core_namespace, gpi_namespace


def _scan_template() -> JobTemplate:
    return JobTemplate(
        name="scan",
        application=Executable(exe="/bin/echo", args=["a"]),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        inputfiles=[LocalFile("in.txt")],
        backend=Local(),
    )


# -- templates ------------------------------------------------------------------------


def test_a_template_has_every_part_of_a_job_and_status_template(session: Session) -> None:
    t = _scan_template()
    assert t.status == "template"
    schema = TemplateImpl._schema
    for part in job_parts().parts:
        assert schema[part.name] is JobImpl._schema[part.name]
    assert {"name", "comment"} <= set(schema)
    assert not {"history", "exit_code", "metadata"} & set(schema)  # what a run produced
    assert t.splitter.args == [["1"], ["2"]]


def test_a_part_added_to_jobs_is_a_templates_part_too(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = {
        **JobImpl._schema,
        "logfiles": ComponentList("files", help="Logs kept with the job.").tag(subjob="share"),
    }
    monkeypatch.setattr(JobImpl, "_schema", schema)
    monkeypatch.setattr(JobImpl, "_validator", None)
    t = JobTemplate(name="logs", logfiles=[LocalFile("run.log")])
    j = Job(t)
    assert [f.namePattern for f in j.logfiles] == ["run.log"]
    assert unwrap(j).logfiles[0] is not unwrap(t).logfiles[0]


def test_a_template_cannot_be_submitted(session: Session) -> None:
    t = _scan_template()
    with pytest.raises(TemplateError, match=r"^a job template cannot be submitted; make a job"):
        t.submit()
    with pytest.raises(TemplateError):
        templates.submit()
    assert isinstance(TemplateError("x"), GangaError)
    assert len(jobs) == 0 and t.status == "template"


def test_a_job_made_from_a_template_or_a_job_is_new_and_shares_nothing(
    session: Session,
) -> None:
    t = _scan_template()
    j = Job(t, name="from-template")
    assert j.status == "new" and j.name == "from-template" and t.name == "scan"
    assert j.application == t.application and j.splitter == t.splitter
    for part in job_parts().components:
        ours, theirs = unwrap(j).stored().get(part.name), unwrap(t).stored().get(part.name)
        assert ours is None or ours is not theirs
    j.application.args = ["b"]
    assert list(t.application.args) == ["a"]

    k = Job(j)
    assert k.id != j.id and k.status == "new" and k.application.args == ["b"]
    assert unwrap(k).application is not unwrap(j).application
    assert [job.id for job in jobs] == [j.id, k.id]
    assert JobTemplate(k).application.args == ["b"]  # a template of a job's description

    with pytest.raises(SchemaError, match=r"JobTemplate\.application cannot be None"):
        JobTemplate(application=None)  # no job made of it could run
    with pytest.raises(SchemaError, match="did you mean 'name'"):
        Job(t, nmae="x")


def test_a_job_made_from_a_subjob_is_top_level_without_the_masters_splitter(
    session: Session,
) -> None:
    from ganga_like.gpi.proxy import wrap
    from ganga_like.runtime.submission.splitting import build_subjobs

    master = Job(t := _scan_template())
    first, _second = build_subjobs(unwrap(master), [{}, {}])
    copy = Job(wrap(first))
    assert copy.splitter is None and copy.master is None and copy.status == "new"
    assert copy.application == t.application and copy.inputfiles == t.inputfiles


def test_templates_are_listed_selected_and_shown_like_jobs(session: Session) -> None:
    first = _scan_template()
    second = JobTemplate(name="other", application=Executable(exe="/bin/true"))
    assert len(templates) == 2 and templates.ids() == [first.id, second.id]
    assert templates(second.id) is second
    assert templates["scan"] is first
    assert templates[-1] is second
    assert templates.select(name="sc*").ids() == [first.id]
    assert templates.select(application=Executable).ids() == [first.id, second.id]
    assert templates.select(status="template").ids() == [first.id, second.id]
    assert templates.select(status="new").ids() == []
    assert templates.select(status="Template").ids() == templates.select(status="").ids()
    for status in ("nosuch", "templat"):  # refused as jobs.select refuses it
        with pytest.raises(GangaError, match=f"^unknown status '{status}'; "):
            templates.select(status=status)
        with pytest.raises(GangaError, match=f"^unknown status '{status}'; "):
            jobs.select(status=status)
    # A misspelt plugin name is one line, as for jobs, not a selection matching nothing.
    with pytest.raises(GangaError, match="Executabel"):
        templates.select(application="Executabel")
    text = repr(templates)
    assert text.startswith("templates: 2") and "| template |" in text.splitlines()[3]
    assert "scan" in display.slice_text(templates)
    html = display.slice_html(templates)
    assert "scan" in html and ">template<" in html
    with pytest.raises(TemplateError, match="no template 99"):
        templates(99)
    with pytest.raises(KeyError, match="no template named 'nope'"):
        templates["nope"]
    assert len(jobs) == 0  # templates are not jobs


def test_a_removed_template_is_gone_and_its_id_is_not_reused(session: Session) -> None:
    t = _scan_template()
    made = Job(t)
    assert templates(t.id).remove()
    assert len(templates) == 0
    with pytest.raises(TemplateError):
        templates(t.id)
    assert JobTemplate().id == t.id + 1
    assert made.application.exe == "/bin/echo"  # jobs made of it stay
    assert t.status == "removed"
    with pytest.raises(TemplateError, match=r"^template 0 was removed: changing application.exe"):
        t.application.exe = "/bin/cat"
    assert Job(t).application.exe == "/bin/echo"  # still a description to copy


def test_the_gpi_and_the_shell_have_the_new_names() -> None:
    for name in ("JobTemplate", "templates", "export", "load", "runfile"):
        assert name in core_namespace() and name in gpi_namespace()


# -- export and load ------------------------------------------------------------------


def test_export_then_load_gives_equal_parts_as_new_objects(
    session: Session, tmp_path: Path
) -> None:
    j = Job(
        name="x",
        application=Executable(exe="/bin/echo", args=["a"], env={"K": "v"}),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        backend=Local(),
        comment="two, with 'quotes'\nand a line",
    )
    t = _scan_template()
    t.splitter = None
    path = tmp_path / "objects.txt"
    assert export([j, t, j.splitter], path)
    text = path.read_text()
    assert "Job(" in text and "JobTemplate(" in text
    assert "splitter=ArgSplitter(args=[['1'], ['2']])" in text

    loaded_job, loaded_template, loaded_splitter = load(path)
    assert loaded_job.id != j.id and loaded_job.status == "new"
    assert loaded_template.id != t.id and loaded_template.status == "template"
    for part in job_parts().parts:
        assert getattr(loaded_job, part.name) == getattr(j, part.name), part.name
        assert getattr(loaded_template, part.name) == getattr(t, part.name), part.name
    assert loaded_job.name == "x" and loaded_job.comment == j.comment
    assert loaded_splitter == j.splitter
    assert unwrap(loaded_job).application is not unwrap(j).application
    assert len(jobs) == 2 and len(templates) == 2
    export(loaded_job, tmp_path / "again.txt")
    assert (tmp_path / "again.txt").read_text() == text.split("\n\nJobTemplate(")[0] + "\n"


MARKER = "ran.txt"


def test_load_reports_its_progress_object_by_object_then_the_saving(
    session: Session, tmp_path: Path
) -> None:
    from ganga_like.gpi.progress import set_progress_factory
    from tests.test_shell_display import Recorder

    for i in range(250):
        Job(name=f"scan{i}", application=Executable(exe="/bin/echo", args=[str(i)]))
    path = tmp_path / "scans.txt"
    assert export(jobs, path)
    recorder = Recorder()
    previous = set_progress_factory(recorder)
    try:
        loaded = load(path)
    finally:
        set_progress_factory(previous)
    assert len(loaded) == 250
    assert recorder.opened == [("loading scans.txt", None, 0.5)]
    steps = [(done, total) for _title, done, total, _counts in recorder.updates]
    assert steps[0] == (0, None)  # parsing: no count yet
    assert steps[1:4] == [(0, 250), (100, 250), (200, 250)]
    assert steps[-2:] == [(250, 250), (250, 250)]  # every object built, then saving


@pytest.mark.parametrize(
    ("block", "said"),
    [
        ("__import__('os').system('touch {marker}')", "only GPI classes may be called"),
        ("Job(name=__import__('os').system('touch {marker}'))", "only GPI classes may"),
        ("LocalFile(__import__('os'))", "unknown class '__import__'"),
        ("Job(name=open('{marker}', 'w'))", "unknown class 'open'"),
        ("Job(application=Executable(exe=os.system('touch {marker}')))", "`os.system"),
        ("Job(name=(lambda: open('{marker}', 'w'))())", "only GPI classes may be called"),
        ("Job(name=Job.__class__)", "attribute access is not allowed"),
        ("Job(name=x)", "names are not values here"),
        ("import os", "`import os` is not allowed"),
        ("Job(**{{'name': 'x'}})", "'**' arguments are not allowed"),
        ("Frobnicator(level=3)", "unknown class 'Frobnicator'"),
        ("Job(name='a' + 'b')", "only literal values"),
        ("Job(status='completed')", "Job.status is read-only"),
        ("Job(nmae='x')", "did you mean 'name'"),
        ("Job(application=Local())", "Job.application: expected"),
        ("Job(name='x'", "not GPI text"),
        ("Executable(args=" + "[" * 40 + "]" * 40 + ")", "nested more than 32 deep"),
        ("Executable(env={{([1],): 'x'}})", "cannot be a dict key"),
        ("Job(application=Executable(exe=b'bytes'))", "not a str, number, bool or None"),
        ("Job(name='x', name='y')", "'name' given twice"),
    ],
)
def test_load_refuses_anything_but_gpi_objects_and_creates_nothing(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.txt"
    # A good block first: it is not created either.
    path.write_text("Job(name='good')\n\n" + block.format(marker=MARKER) + "\n")
    with pytest.raises(LoadError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:3: "), message
    assert said in message and "\n" not in message
    assert not (tmp_path / MARKER).exists()
    assert len(jobs) == 0 and len(templates) == 0


def test_load_of_a_missing_file_and_export_of_a_non_gpi_value_are_one_line(
    session: Session, tmp_path: Path
) -> None:
    with pytest.raises(LoadError, match=r"^load: no such file: .*missing\.txt$"):
        load(tmp_path / "missing.txt")
    with pytest.raises(SchemaError, match="not a GPI object: 42"):
        export([42], tmp_path / "x.txt")
    with pytest.raises(ExportError, match="cannot write"):
        export(Job(), tmp_path / "no-such-dir" / "x.txt")
    (tmp_path / "folder").mkdir()
    with pytest.raises(ExportError, match="cannot write"):
        export(Job(), tmp_path / "folder")
    assert list((tmp_path / "folder").iterdir()) == []  # no temporary file left behind
    assert not (tmp_path / "x.txt").exists()
    (tmp_path / "empty.txt").write_text("# nothing\n")
    assert load(tmp_path / "empty.txt") == []


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        (3, "a file path, not the int 3"),
        ("out\x00.txt", "a file path without a NUL byte, not the str 'out\\x00.txt'"),
        (b"/tmp/out.txt", "a file path, not the bytes b'/tmp/out.txt'"),
    ],
)
def test_a_path_that_is_no_file_name_is_one_line_for_export_and_load(
    session: Session, path: object, shown: str
) -> None:
    with pytest.raises(ExportError) as exported:
        export(Job(), path)  # type: ignore[arg-type]
    assert str(exported.value) == f"export: expected {shown}"
    with pytest.raises(LoadError) as loaded:
        load(path)  # type: ignore[arg-type]
    assert str(loaded.value) == f"load: expected {shown}"


def test_exporting_a_function_pickled_by_value_names_the_job_and_the_way_out(
    session: Session, tmp_path: Path
) -> None:
    pytest.importorskip("cloudpickle")
    from ganga_like import PythonFunction

    def square(x: int) -> int:  # a local function: stored pickled by value
        return x * x

    j = Job(name="pf", application=PythonFunction(function=square, args=[3]))
    with pytest.raises(SchemaError) as raised:
        export([Job(name="fine"), j], tmp_path / "pf.txt")
    message = str(raised.value)
    assert message.startswith(f"export: job {j.id}: PythonFunction.function is <function ")
    assert "square, pickled>" in message and "'module.function'" in message
    assert "missing plugin" not in message and "\n" not in message
    assert not (tmp_path / "pf.txt").exists()  # nothing written, not even the good job


def test_a_job_made_of_something_not_a_job_or_template_says_what_it_takes(
    session: Session,
) -> None:
    before = len(jobs)
    for wrong in (3, "scan"):
        with pytest.raises(SchemaError) as raised:
            Job(wrong)
        message = str(raised.value)
        assert message.startswith("Job() takes a job or a JobTemplate to copy, not the ")
        assert "keywords" in message
    with pytest.raises(SchemaError, match=r"^JobTemplate\(\) takes a job or a JobTemplate"):
        JobTemplate(3)
    assert len(jobs) == before


def test_a_large_split_job_exports_and_loads_back(session: Session, tmp_path: Path) -> None:
    args = [[str(i), f"p{i}"] for i in range(2000)]
    j = Job(application=Executable(exe="echo"), splitter=ArgSplitter(args=args))
    export(jobs, tmp_path / "all.txt")
    (loaded,) = load(tmp_path / "all.txt")
    assert loaded.splitter.args == args and loaded.id == j.id + 1


def test_load_runs_no_garbage_collection_pass_while_it_builds_and_restores_the_collector(
    session: Session, tmp_path: Path
) -> None:
    # Each automatic pass of the collector walks every object made so far: run while a
    # large file's syntax tree and objects grow, they made a load slower than linear.
    import gc

    for i in range(300):
        Job(name=f"scan{i}", application=Executable(exe="/bin/echo", args=[str(i)] * 20))
    path = tmp_path / "scans.txt"
    assert export(jobs, path)
    passes: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()
    gc.callbacks.append(seen)
    try:
        assert len(load(path)) == 300
    finally:
        gc.callbacks.remove(seen)
    # At most the one young-generation pass once load() hands the collector back.
    assert passes in ([], [0]), passes
    assert gc.isenabled()
    (tmp_path / "bad.txt").write_text("Job(name='good')\n\nJob(name=x)\n")
    with pytest.raises(LoadError):
        load(tmp_path / "bad.txt")
    assert gc.isenabled()


# -- real processes -------------------------------------------------------------------


def _ganga(
    args: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env={**env, "GANGA_REPOSITORY_MODE": "embedded"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_templates_survive_a_fresh_process_and_can_be_removed_there(
    tmp_path: Path, env_for: dict[str, str], gangadir: Path
) -> None:
    make = tmp_path / "make.py"
    make.write_text(
        "t = JobTemplate(name='scan', application=Executable(exe='/bin/echo'),\n"
        "                splitter=ArgSplitter(args=[['1'], ['2']]))\n"
        "t.application.args = ['changed']  # a change after creation is saved too\n"
        "print('MADE', t.id)\n"
    )
    result = _ganga([str(make)], env_for)
    assert result.returncode == 0, result.stderr
    assert "MADE 0" in result.stdout

    use = tmp_path / "use.py"
    use.write_text(
        "t = templates['scan']\n"
        "print('SEEN', len(templates), t.id, t.status, list(t.application.args))\n"
        "j = Job(t)\n"
        "print('JOB', j.id, j.status, len(j.splitter.args))\n"
        "templates(t.id).remove()\n"
    )
    result = _ganga([str(use)], env_for)
    assert result.returncode == 0, result.stderr
    assert "SEEN 1 0 template ['changed']" in result.stdout
    assert "JOB 0 new 2" in result.stdout

    after = tmp_path / "after.py"
    after.write_text("print('LEFT', len(templates), len(jobs))\n")
    result = _ganga([str(after)], env_for)
    assert result.returncode == 0, result.stderr
    assert "LEFT 0 1" in result.stdout

    from ganga_like.runtime.repository_check import check_file_deeply

    report = check_file_deeply(gangadir / "repository" / "Data.fs")
    assert report.sound, report.lines()


def test_a_repository_with_templates_has_a_sound_layout(session: Session) -> None:
    _scan_template()
    session.repo.commit()
    assert layout_problem(session.repo.connection()) is None


def test_a_ganga_script_runs_another_with_runfile_and_loads_its_export(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    (tmp_path / "make.py").write_text(
        "import sys\n"
        "count = int(sys.argv[1])\n"
        "made = [Job(name=f'm{i}', application=Executable(exe='/bin/echo', args=[str(i)]))\n"
        "        for i in range(count)]\n"
        "export(made, sys.argv[2])\n"
    )
    (tmp_path / "outer.py").write_text(
        "names = runfile('make.py', 3, 'made.txt')\n"
        "print('DEFINED', sorted(names))\n"
        "again = load('made.txt')\n"
        "print('LOADED', [j.id for j in again], [j.name for j in again])\n"
        "print('ARGS', [list(j.application.args) for j in again])\n"
    )
    result = _ganga(["outer.py"], env_for, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "DEFINED ['count', 'made', 'sys']" in lines
    assert "LOADED [3, 4, 5] ['m0', 'm1', 'm2']" in lines
    assert "ARGS [['0'], ['1'], ['2']]" in lines


def test_errors_in_a_script_run_by_runfile_surface_as_in_ganga_script(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    (tmp_path / "gpi_error.py").write_text("j = Job()\nj.nmae = 'x'\n")
    (tmp_path / "python_error.py").write_text("x = 1\ny = x / 0\n")
    for inner in ("gpi_error.py", "python_error.py", "missing.py"):
        (tmp_path / "outer.py").write_text(f"runfile({inner!r})\nprint('NOT REACHED')\n")
        by_runfile = _ganga(["outer.py"], env_for, cwd=tmp_path)
        assert by_runfile.returncode == 1 and "NOT REACHED" not in by_runfile.stdout
        if inner == "missing.py":
            assert by_runfile.stderr.strip() == "ERROR: runfile: no such script: missing.py"
            continue
        direct = _ganga([inner], env_for, cwd=tmp_path)
        if inner == "gpi_error.py":
            assert by_runfile.stderr == direct.stderr
            assert by_runfile.stderr.strip() == (
                "ERROR: Job has no attribute 'nmae'; did you mean 'name'?"
            )
        else:
            assert by_runfile.stderr.splitlines()[-3:] == direct.stderr.splitlines()[-3:]
            assert 'python_error.py", line 2' in by_runfile.stderr
            assert "ZeroDivisionError" in by_runfile.stderr


def test_runfile_restores_argv_and_path(session: Session, tmp_path: Path) -> None:
    from ganga_like import runfile

    script = tmp_path / "argv.py"
    script.write_text("import sys\nseen = list(sys.argv)\nmade = Job(name='r').id\n")
    before_argv, before_path = list(sys.argv), list(sys.path)
    names = runfile(script, 7)
    assert names["seen"] == [os.fspath(script), "7"]
    assert jobs(names["made"]).name == "r"
    assert sys.argv == before_argv and sys.path == before_path


def test_the_shell_lists_templates_refuses_to_submit_one_and_runs_scripts(
    env_for: dict[str, str], tmp_path: Path, gangadir: Path
) -> None:
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    from .test_shell import Shell

    env = {**env_for, "IPYTHONDIR": str(tmp_path / "ipython"), "TERM": "xterm-256color"}
    env.update(COLUMNS="200", GANGA_REPOSITORY_MODE="embedded")
    env.pop("PROMPT_TOOLKIT_NO_CPR", None)
    (tmp_path / "use.py").write_text(
        f"export(templates, {str(tmp_path / 't.txt')!r})\n"
        f"copies = load({str(tmp_path / 't.txt')!r})\n"
    )
    shell = Shell(env)
    try:
        shell.run("t = JobTemplate(name='tpl', application=Executable(exe='echo'))")
        table = shell.run("templates")
        assert "templates: 1" in table and " template " in table and "tpl" in table
        refused = shell.run("t.submit()")
        assert refused.strip() == (
            "ERROR: a job template cannot be submitted; make a job of it first: Job(template)"
        )
        shell.run(f"%ganga {tmp_path / 'use.py'}")
        assert "templates: 2" in shell.run("templates")
        assert "1" in shell.run("len(copies)")
        assert "new" in shell.run("Job(t).status")
    finally:
        shell.exit()
        runner_client.stop(runner_dir(gangadir))


def test_recovery_of_a_lost_root_record_finds_the_templates_again(gangadir: Path) -> None:
    from ganga_like.repository.checks.integrity import _write_empty_root
    from ganga_like.runtime.repository_check import check_repository, recover_repository
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings

    settings = Settings(gangadir=gangadir, repository_mode="embedded", monitoring=False)
    open_session(settings)
    try:
        Job(name="kept")
        _scan_template()
        JobTemplate(name="second")
    finally:
        close_session()
    _write_empty_root(gangadir / "repository" / "Data.fs")
    recover_repository(gangadir)
    assert check_repository(gangadir) == []
    open_session(settings)
    try:
        assert [t.name for t in templates] == ["scan", "second"]
        assert [j.name for j in jobs] == ["kept"]
        assert JobTemplate().id == 2 and Job().id == 1  # neither counter starts again
    finally:
        close_session()


def test_two_processes_sharing_a_gangadir_make_templates_at_once(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    env = {k: v for k, v in env_for.items() if k != "GANGA_REPOSITORY_MODE"}  # the default
    script = tmp_path / "many.py"
    script.write_text(
        "import sys\nfor i in range(10):\n    JobTemplate(name=f'{sys.argv[1]}-{i}')\n"
    )
    command = [sys.executable, "-m", "ganga_like.cli", str(script)]
    started = [
        subprocess.Popen(
            [*command, who], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for who in ("a", "b")
    ]
    for process in started:
        _out, err = process.communicate(timeout=180)
        assert process.returncode == 0, err
    count = tmp_path / "count.py"
    count.write_text(
        "print('IDS', sorted(t.id for t in templates), len({t.name for t in templates}))"
    )
    result = subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", str(count)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"IDS {list(range(20))} 20" in result.stdout
