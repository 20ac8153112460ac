"""Callbacks set by `ganga script.py`, which exits at once, run by the monitor daemon
alone; the daemon killed -9 before it records the call and while it calls, then started
again: the call is made once (a marker line per call), or logged as interrupted and never
made twice. And in the real shell: `j.on` refuses nonsense in one line."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like.model.stop_points import STOP_VARIABLE
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .daemon_stops import kill_daemon_at
from .test_cli import ganga
from .test_shell import Shell, shell_env  # noqa: F401 (the fixture)
from .waiting import wait_for

FUNCTIONS = """\
import os

def mark(job):
    with open(os.path.join(os.environ["CALLBACK_MARKS"], "marks"), "a") as out:
        out.write(f"{job.fqid} {job.status}\\n")
"""

SCRIPT = """\
import sys
gate = sys.argv[1]
wait = ["-c", f"while ! test -e {gate}; do sleep 0.05; done"]
j = Job(application=Executable(exe="/bin/sh", args=wait))
j.on("completed", "cbfuns:mark")
j.submit()
print(j.id)
"""


def daemon_env(env_for: dict[str, str], tmp_path: Path, module: str, text: str) -> dict[str, str]:
    """The environment of `ganga` and its daemon: the shared repository, and a module
    ``module`` (written with ``text``) that they import."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / f"{module}.py").write_text(text)
    env = dict(env_for)
    env.pop("GANGA_REPOSITORY_MODE", None)  # the default: shared with the daemon
    env.pop(STOP_VARIABLE, None)
    env["PYTHONPATH"] = f"{tmp_path / 'mods'}{os.pathsep}{env['PYTHONPATH']}"
    return env


def stop_daemon(env: dict[str, str], gangadir: Path) -> None:
    ganga(["monitor", "stop"], env)
    with contextlib.suppress(Exception):
        runner_client.stop(runner_dir(gangadir))


@pytest.fixture
def env(env_for: dict[str, str], gangadir: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = daemon_env(env_for, tmp_path, "cbfuns", FUNCTIONS)
    env["CALLBACK_MARKS"] = str(tmp_path)
    yield env
    stop_daemon(env, gangadir)


def callback_lines(env: dict[str, str], job_id: int) -> list[str]:
    log = ganga(["log", str(job_id)], env)
    assert log.returncode == 0, log.stderr
    return [line.split("monitor: ", 1)[1] for line in log.stdout.splitlines() if " on " in line]


def _submit(env: dict[str, str], tmp_path: Path) -> int:
    script = tmp_path / "callbacks.py"
    script.write_text(SCRIPT)
    done = ganga([str(script), str(tmp_path / "gate")], env)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[0])


def test_a_script_sets_a_callback_and_exits_and_the_daemon_runs_it_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    job_id = _submit(env, tmp_path)
    (tmp_path / "gate").touch()
    assert ganga(["monitor", "start"], env).returncode == 0
    done = "on completed: cbfuns:mark: done"
    wait_for(lambda: done in callback_lines(env, job_id), 120, "the daemon to run it")
    assert callback_lines(env, job_id) == ["on completed: cbfuns:mark: calling", done]
    assert (tmp_path / "marks").read_text() == f"{job_id} completed\n"


def _killed_at(env: dict[str, str], tmp_path: Path, point: str) -> int:
    """The job's id, once the daemon that reached ``point`` was killed -9 there and a
    new one started."""
    job_id = _submit(env, tmp_path)
    kill_daemon_at(env, tmp_path, point, (tmp_path / "gate").touch)
    assert ganga(["monitor", "start"], env).returncode == 0
    return job_id


def test_the_daemon_killed_after_the_change_before_the_call_calls_it_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    job_id = _killed_at(env, tmp_path, "callback-due")
    done = "on completed: cbfuns:mark: done"
    wait_for(lambda: done in callback_lines(env, job_id), 120, "the new daemon to call it")
    assert callback_lines(env, job_id) == ["on completed: cbfuns:mark: calling", done]
    assert (tmp_path / "marks").read_text() == f"{job_id} completed\n"


def test_the_daemon_killed_during_the_call_logs_it_interrupted_and_never_calls_it_again(
    env: dict[str, str], tmp_path: Path
) -> None:
    job_id = _killed_at(env, tmp_path, "callback-calling")
    interrupted = "on completed: cbfuns:mark: interrupted (the monitor stopped during it)"
    wait_for(lambda: interrupted in callback_lines(env, job_id), 120, "the new daemon")
    assert callback_lines(env, job_id) == ["on completed: cbfuns:mark: calling", interrupted]
    assert not (tmp_path / "marks").exists()  # killed before the function ran


def test_the_shell_refuses_a_bad_callback_in_one_line_and_runs_a_good_one(
    shell_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    (tmp_path / "cbfuns.py").write_text(FUNCTIONS)
    env = dict(shell_env, CALLBACK_MARKS=str(tmp_path))
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    shell = Shell(env)
    try:
        shell.run("j = Job(application=Executable(exe='echo'))")
        refused = shell.run("j.on('complete', 'cbfuns:mark')")
        assert "Job.on(): status: unknown status 'complete'; did you mean 'completed'?" in refused
        assert "Traceback" not in refused
        refused = shell.run("j.on('completed', 'cbfuns:nothing')")
        assert "'cbfuns:nothing' cannot be used (AttributeError" in refused
        assert shell.run("print(j.callbacks)") == "[]"
        shell.run("j.on('completed', 'cbfuns:mark'); j.submit()")
        assert shell.run("print(j.wait(timeout=60, progress=False))") == "completed"
        marks = tmp_path / "marks"
        wait_for(marks.exists, 60, "the shell's monitor to call it")
        assert marks.read_text().split() == [shell.run("print(j.id)"), "completed"]
    finally:
        shell.exit()
