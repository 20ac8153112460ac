"""Which subcommands ask a backend: the read-only ones never with ``--no-monitor``, and a
backend that cannot be reached is said at most once, in one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ganga_like import Executable, Job, Slurm
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings

from .test_cli import ganga

FATAL = "squeue: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host"
UNREACHABLE = "fatal: Could not establish a configuration source"


def _repository_with_a_slurm_job(gangadir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 0 on Local (new), job 1 on Slurm (submitted as Slurm id 7437)."""
    from ganga_like_slurm import slurm_commands

    def sbatch(_text: str, **_: Any) -> str:
        return "7437"

    monkeypatch.setattr(slurm_commands, "sbatch", sbatch)
    open_session(Settings(gangadir=gangadir, repository_mode="embedded", monitoring=False))
    try:
        Job(application=Executable(exe="/bin/true"))
        Job(application=Executable(exe="/bin/true"), backend=Slurm(partition="debug")).submit()
    finally:
        close_session()


def _fake_squeue(tmp_path: Path, env: dict[str, str]) -> Path:
    """A ``squeue`` first on PATH that records its arguments and fails as Slurm's client
    does without a configuration; the file it records to."""
    calls = tmp_path / "squeue-calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "squeue"
    script.write_text(
        f'#!/bin/sh\necho "squeue $*" >> {calls}\n'
        f'echo "{FATAL}" >&2\necho "squeue: {UNREACHABLE}" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env.pop("SLURM_CONF", None)
    return calls


def _asks_no_backend(
    command: list[str],
    gangadir: Path,
    env_for: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ganga COMMAND`` about a repository holding a Slurm job succeeds, silent, without
    running squeue."""
    _repository_with_a_slurm_job(gangadir, monkeypatch)
    calls = _fake_squeue(tmp_path, env_for)
    done = ganga(command, env_for)
    assert done.returncode == 0, done.stderr
    assert not calls.exists(), calls.read_text()
    assert done.stderr == ""


@pytest.mark.parametrize(
    "command",
    [["stats", "0"], ["why", "0"], ["log", "0"], ["show", "0"], ["jobs"], ["jobs", "0"]],
)
def test_read_only_subcommands_with_no_monitor_never_ask_a_backend(
    command: list[str],
    gangadir: Path,
    env_for: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _asks_no_backend([*command, "--no-monitor"], gangadir, env_for, tmp_path, monkeypatch)


@pytest.mark.parametrize("command", [["stats", "0"], ["why", "0"], ["log", "0"], ["show", "0"]])
def test_subcommands_about_one_job_read_the_repository_as_it_is(
    command: list[str],
    gangadir: Path,
    env_for: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _asks_no_backend(command, gangadir, env_for, tmp_path, monkeypatch)


def test_ganga_jobs_updates_statuses_and_says_an_unreachable_backend_once(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repository_with_a_slurm_job(gangadir, monkeypatch)
    calls = _fake_squeue(tmp_path, env_for)
    done = ganga(["jobs"], env_for)
    assert done.returncode == 0, done.stderr
    assert "--jobs=7437" in calls.read_text()
    said = done.stderr.splitlines()
    assert len(said) == 1, done.stderr
    assert said[0].startswith("Slurm backend cannot be reached, jobs kept as they are:")
    assert UNREACHABLE in said[0]
