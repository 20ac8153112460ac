"""Shared fixtures: every test gets its own real repository in a temporary gangadir."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

import pytest

from ganga_like.model.status import set_master_status_order
from ganga_like.repository.zeo import shared
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .slurm_up import slurm_answers

ROOT = Path(__file__).resolve().parent.parent

# Children get this process's import path as PYTHONPATH, as it was when the tests started:
# what tests add later must not reach them. Dask's scheduler puts its scratch directory
# (/tmp/dask-scratch-space, shared by every Dask user of the machine) first on sys.path;
# its mtime, changed by others at any moment, would make `ganga jobs` never answer from
# its table cache (which checks the import path has not changed).
CHILD_PYTHONPATH = os.pathsep.join(p for p in sys.path if p)


def pytest_configure(config: pytest.Config) -> None:
    """A worker of a run spread over several processes (pytest-xdist) has ``COLUMNS=80``
    and ``LINES=24`` in its environment, which a serial run has not: the shells and
    commands the tests start would take them for the terminal's size (IPython then pages
    ``Job?`` through ``less``). They are dropped, so children see what a serial run gives.

    With PYTHONDONTWRITEBYTECODE set (to keep ``__pycache__`` out of the source tree),
    every Python process the tests start (``ganga`` commands, runners, repository servers,
    other sessions) compiled the project's modules from source again: about a quarter of
    the CPU time of a ``ganga`` command. The tests' processes keep their byte
    code in a directory of their own instead (checked against the sources as always)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    prefix = str(Path(tempfile.gettempdir()) / f"ganga-like-test-pycache-{os.getuid()}")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix


# Tests that share one outside service run one after another on one worker when the run is
# spread over several (pytest-xdist, --dist loadgroup): some stop Slurm's controller or
# count its commands, and Grid Engine has one cell per machine.
_SERVICE_GROUPS = ("slurm", "sge")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A module that sets ``ONLY_CASE`` (tests/test_suites_on_postgres.py) runs the
    conformance cases of that backend only; tests of one outside service share a group."""
    kept, left_out = [], []
    for item in items:
        only = getattr(getattr(item, "module", None), "ONLY_CASE", None)
        callspec = getattr(item, "callspec", None)
        chosen = callspec.params.get("case") if callspec is not None else None
        if only is not None and chosen is not None and getattr(chosen, "name", only) != only:
            left_out.append(item)
        else:
            kept.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    for item in items:
        for service in _SERVICE_GROUPS:
            if item.get_closest_marker(service) is not None:
                item.add_marker(pytest.mark.xdist_group(service))
                break


@pytest.fixture(autouse=True)
def _private_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """No test reads the user's ganga config file; runtime config changes do not leak."""
    from ganga_like.config.store import store

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))
    store.reset()
    yield
    store.reset()


@pytest.fixture(autouse=True)
def _real_slurm_only_when_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test not marked ``slurm`` never runs a Slurm command: its fakes must answer for
    every command its code path calls, so it passes the same whether Slurm's client
    commands are installed, answering, or absent."""
    if request.node.get_closest_marker("slurm") is not None:
        return
    from ganga_like_slurm import slurm_commands

    def refuse(args: Sequence[str], **_: object) -> NoReturn:
        raise AssertionError(f"a test not marked slurm ran the real `{' '.join(args)}`")

    monkeypatch.setattr(slurm_commands, "_run", refuse)


@pytest.fixture(scope="session")
def slurm_walltime_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """The Slurm id of a plain job over its 1-minute walltime (None without a cluster).

    Slurm's limits are whole minutes, checked about every 30 s, so it ends 60-90 s after
    it starts: the first Slurm test of the run submits it (below) and
    tests/test_slurm_commands.py checks it, the wait overlapping everything in between."""
    from ganga_like_slurm import slurm_commands
    from ganga_like_slurm.resource_spec import ResourceSpec
    from ganga_like_slurm.sbatch_script import BatchScriptSpec, ElementCommand, render_script

    if shutil.which("sbatch") is None or not slurm_answers():
        yield None  # the Slurm tests skip, saying why
        return
    out = tmp_path_factory.mktemp("timeout")
    job = slurm_commands.sbatch(
        render_script(
            BatchScriptSpec(
                job_name="timeout-test",
                resources=ResourceSpec(walltime=timedelta(minutes=1)),
                stdout=str(out / "slurm-%j.out"),
                commands=ElementCommand(["sleep", "600"]),
            )
        )
    )
    yield job
    with contextlib.suppress(Exception):
        slurm_commands.scancel([job])


# A ganga script whose split job has one subjob over its 1-minute walltime and a Retry
# that grows it: what the retry did is written as JSON for tests/test_retry_slurm.py.
TIMEOUT_RETRY_SCRIPT = """
import json, subprocess, sys
exe, result = sys.argv[1], sys.argv[2]
j = Job(application=Executable(exe=exe), splitter=ArgSplitter(args=[["95"], ["1"]]),
        backend=Slurm(resources=Resources(walltime="1")),
        retry=Retry(attempts=1, on=["timeout"], grow={"walltime": 2.0}))
j.submit()
status = j.wait(timeout=400)
slow, quick = j.subjobs
shown = subprocess.run(["scontrol", "show", "job", slow.backend.id],
                       capture_output=True, text=True).stdout.split()
with open(result, "w") as out:
    json.dump({
        "status": status,
        "slow": [e.cause for e in slow.history],
        "quick": [e.cause for e in quick.history],
        "walltimes": [str(sj.backend.resources.walltime) for sj in (slow, quick)],
        "time_limit": [w.partition("=")[2] for w in shown if w.startswith("TimeLimit=")],
        "master": [e.new for e in j.history],
    }, out)
"""


@pytest.fixture(scope="session")
def slurm_timeout_retry(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[str], Path] | None]:
    """A ``ganga`` process running a job whose subjob times out on Slurm and is retried
    with twice the walltime, and the file it writes its findings to (None without a
    cluster). It takes 60-90 s and more: the first Slurm test of the run starts it in a
    gangadir of its own and tests/test_retry_slurm.py reads what it found."""
    # Only the first run of each argument is slow: the retry runs to the end at once.
    yield from _ganga_script_started(
        tmp_path_factory,
        "timeout-retry",
        TIMEOUT_RETRY_SCRIPT,
        'marker="WORK/ran-$1"\nif [ ! -e "$marker" ]; then touch "$marker"; sleep "$1"; fi\n',
    )


# A ganga script whose split job runs in a one-core pilot of 1 minute that its first subjob
# outlasts, then is resubmitted to a new pilot: what it saw is written as JSON for
# tests/test_slurm_pilot.py.
PILOT_WALLTIME_SCRIPT = """
import json, os, sys
from pathlib import Path
from ganga_like_slurm import slurm_commands
exe, result = sys.argv[1], sys.argv[2]
config.Monitor.max_interval = 0.5
config.Slurm.poll_interval = 0.3
j = Job(application=Executable(exe=exe),
        splitter=ArgSplitter(args=[["slow"], ["quick"], ["quick"]]),
        backend=Slurm(pilot=Pilot(cores=1, walltime="1")))
j.submit()
first = j.backend.id
found = {"status": j.wait(timeout=300)}
slow, *quick = j.subjobs
found["slow"] = [slow.status, slow.history[-1].cause]
found["quick"] = [[s.status, s.history[-1].cause] for s in quick]
(Path(exe).parent / "fixed").touch()
j.backend.pilot.walltime = "5"  # the next pilot's; the ended job may change it
before = slurm_commands.RUNNER.counts["sbatch"]
j.resubmit()
found["sbatch_calls"] = slurm_commands.RUNNER.counts["sbatch"] - before
scripts = (Path(os.environ["GANGA_DIR"]) / "workspace" / str(j.id) / "slurm").glob("*.sh")
found["five_minute_scripts"] = sum("--time=0-00:05:00" in s.read_text() for s in scripts)
found["pilots"] = [first, j.backend.id, sorted({s.backend.id for s in j.subjobs})]
found["end"] = j.wait(timeout=180)
found["stdout"] = [(s.outputdir / "stdout").read_text() for s in j.subjobs]
with open(result, "w") as out:
    json.dump(found, out)
"""


def _ganga_script_started(
    tmp_path_factory: pytest.TempPathFactory, name: str, script_text: str, program: str
) -> Iterator[tuple[subprocess.Popen[str], Path] | None]:
    """A ``ganga`` process running ``script_text`` in a gangadir of its own, with a program
    (``program``, a shell script body) and the file it writes its findings to; None
    without a cluster. Its output goes to ``output.txt`` beside them."""

    if shutil.which("sbatch") is None or not slurm_answers():
        yield None
        return
    work = tmp_path_factory.mktemp(name)
    exe = work / "prog.sh"
    exe.write_text("#!/bin/sh\n" + program.replace("WORK", str(work)))
    exe.chmod(0o755)
    script = work / "script.py"
    script.write_text(script_text)
    env = {
        **os.environ,
        "GANGA_DIR": str(work / "gangadir"),
        "XDG_CONFIG_HOME": str(work / "xdg"),
        "PYTHONPATH": CHILD_PYTHONPATH,
    }
    result = work / "result.json"
    # Its output goes to a file: a pipe nobody reads for minutes could fill and stop it.
    with open(work / "output.txt", "w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "ganga_like.cli", str(script), str(exe), str(result)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    yield process, result
    if process.poll() is None:
        process.kill()
    process.wait()


def findings_of(
    started: tuple[subprocess.Popen[str], Path] | None, timeout: float
) -> dict[str, Any]:
    """What a ganga process started by :func:`_ganga_script_started` found, once it has
    ended (within ``timeout`` s); the test is skipped without a cluster."""
    if started is None:
        pytest.skip("no Slurm cluster answers")
    process, result = started
    process.wait(timeout=timeout)
    assert process.returncode == 0, (result.parent / "output.txt").read_text()
    found: dict[str, Any] = json.loads(result.read_text())
    return found


@pytest.fixture(scope="session")
def slurm_pilot_walltime(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[str], Path] | None]:
    """A ``ganga`` process whose pilot of 1 minute ends while a subjob runs, and the file
    it writes what it saw to (None without a cluster). Slurm ends it 60-90 s after it
    starts: the first Slurm test of the run starts it, tests/test_slurm_pilot.py reads it."""
    yield from _ganga_script_started(
        tmp_path_factory,
        "pilot-walltime",
        PILOT_WALLTIME_SCRIPT,
        '[ -e WORK/fixed ] || [ "$1" != slow ] || sleep 300; echo "$1"\n',
    )


# A ganga script whose job outlasts its 1-minute walltime on Slurm: what it saw is written
# as JSON for tests/test_slurm_backend.py.
BACKEND_WALLTIME_SCRIPT = """
import json, sys
exe, result = sys.argv[1], sys.argv[2]
config.Monitor.max_interval = 0.5
config.Slurm.poll_interval = 0.3
j = Job(application=Executable(exe=exe), backend=Slurm(resources={"walltime": "1"}))
j.submit()
found = {"status": j.wait(timeout=300)}
found["cause"] = j.history[-1].cause
found["exit_code"] = j.exit_code
found["actual_partition"] = j.backend.actual_partition
found["slurm_out"] = (j.outputdir / "slurm.out").read_text()
with open(result, "w") as out:
    json.dump(found, out)
"""


@pytest.fixture(scope="session")
def slurm_backend_walltime(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[str], Path] | None]:
    """A ``ganga`` process whose Slurm job runs past its 1-minute walltime, and the file it
    writes what it saw to (None without a cluster); started by the first Slurm test of the
    run, read by tests/test_slurm_backend.py."""
    yield from _ganga_script_started(
        tmp_path_factory, "backend-walltime", BACKEND_WALLTIME_SCRIPT, "sleep 300\n"
    )


@pytest.fixture(autouse=True)
def _slurm_walltime_job_started_early(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("slurm") is not None:
        request.getfixturevalue("slurm_walltime_job")
        request.getfixturevalue("slurm_timeout_retry")
        request.getfixturevalue("slurm_pilot_walltime")
        request.getfixturevalue("slurm_backend_walltime")


# The module that holds the class of tests.conftest.vanishing_class.
GONE_MODULE = "gone_job_classes"


@pytest.fixture
def vanishing_class() -> Iterator[type]:
    """A persistent class in a module that can be made to disappear, as when the package
    that defined a stored class is uninstalled: ``sys.modules.pop(cls.__module__)``."""
    from persistent import Persistent

    module = types.ModuleType(GONE_MODULE)

    class Gone(Persistent):  # type: ignore[misc]
        pass

    Gone.__module__ = GONE_MODULE
    module.Gone = Gone  # type: ignore[attr-defined]
    sys.modules[GONE_MODULE] = module
    yield Gone
    sys.modules.pop(GONE_MODULE, None)


@pytest.fixture
def gangadir_with_a_broken_job(gangadir: Path, vanishing_class: type) -> Path:
    """A repository of two jobs whose job 1 was replaced by an object of a class that is
    gone since (its index entries still name it): what an uninstalled plugin leaves."""
    from ganga_like.model.job import Job as JobImpl
    from ganga_like.repository.connection import Repository

    repo = Repository(gangadir)
    try:

        def store() -> None:
            registry = repo.registry()
            registry.add(JobImpl())
            registry.add(JobImpl())
            registry.jobs[1] = vanishing_class()  # keeps job 1's index entries

        repo.in_transaction(store)
    finally:
        repo.close()
    sys.modules.pop(vanishing_class.__module__)
    return gangadir


@pytest.fixture
def gangadir(tmp_path: Path) -> Iterator[Path]:
    """A fresh gangadir; a repository server and a Dask cluster that a test's sessions
    started there (both are started on demand) are stopped after the test, not left
    idling."""
    path = tmp_path / "gangadir"
    yield path
    if (path / "dask").exists():
        from ganga_like_dask.default_cluster import stop_cluster

        with contextlib.suppress(Exception):
            stop_cluster(path)
    repo_dir = path / "repository"
    if (repo_dir / shared.PID_NAME).exists():
        with contextlib.suppress(Exception):
            shared.stop_server(repo_dir)


@pytest.fixture
def session(gangadir: Path, request: pytest.FixtureRequest) -> Iterator[Session]:
    """An open session with monitoring on, in a fresh gangadir; runner stopped after.

    A test module may set ``SESSION_SETTINGS`` (a dict of Settings fields) to change some,
    and ``SESSION_CONFIG`` (section class -> option -> value) for plugins' sections.
    The repository is opened embedded: these tests are about jobs, not about sessions
    sharing a gangadir (tests/test_sessions.py covers the default, shared, mode)."""
    from ganga_like.config.store import store
    from ganga_like_local.settings import Local

    extra = {"repository_mode": "embedded", **getattr(request.module, "SESSION_SETTINGS", {})}
    sections = {Local: {"max_concurrent": 2, "idle_exit": 5.0}}
    sections.update(getattr(request.module, "SESSION_CONFIG", {}))
    s = open_session(Settings(gangadir=gangadir, **extra), store.snapshot().replaced(sections))
    try:
        yield s
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
        set_master_status_order(Settings().master_status_order)


@pytest.fixture
def env_for(gangadir: Path) -> dict[str, str]:
    """Environment for a child process using the same gangadir."""
    env = dict(os.environ)
    env["GANGA_DIR"] = str(gangadir)
    env["XDG_CONFIG_HOME"] = str(gangadir.parent / "xdg-config")
    env["PYTHONPATH"] = CHILD_PYTHONPATH
    return env


@pytest.fixture
def postgres_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A new, empty PostgreSQL database as this test's repository (``GANGA_REPOSITORY``,
    which child processes inherit), dropped after the test; skips without a server."""
    from .postgres_db import fresh_database

    with fresh_database(tmp_path / "xdg-cache") as url:
        monkeypatch.setenv("GANGA_REPOSITORY", url)
        yield url
