"""ganga's own options (``--gangadir``, ``--readonly``, ``--Section.option``, ...) apply to a
subcommand, given before it or after it; real ``ganga`` processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import ganga


@pytest.fixture
def other(tmp_path: Path, env_for: dict[str, str]) -> Path:
    """A second gangadir holding one job named ``in-other``; GANGA_DIR names another."""
    gangadir = tmp_path / "other"
    env = {**env_for, "GANGA_DIR": str(gangadir)}
    subprocess.run(
        [sys.executable, "-c", "from ganga_like import *\nJob(name='in-other')"],
        env=env,
        check=True,
        timeout=120,
    )
    return gangadir


def _names(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [job["name"] for job in json.loads(result.stdout)]


def test_the_gangadir_option_chooses_the_repository_of_a_subcommand(
    other: Path, env_for: dict[str, str]
) -> None:
    assert _names(ganga(["jobs", "--json"], env_for)) == []  # GANGA_DIR's repository
    for args in (
        ["--gangadir=" + str(other), "jobs", "--json"],
        ["--gangadir", str(other), "jobs", "--json"],
        [f"--Repository.gangadir={other}", "jobs", "--json"],
        ["jobs", "--json", f"--gangadir={other}"],
        ["jobs", "--gangadir", str(other), "--json"],
        ["--no-monitor", "jobs", "0", "--json", "--Repository.gangadir", str(other)],
    ):
        assert _names(ganga(args, env_for)) == ["in-other"], args
    shown = ganga([f"--gangadir={other}", "show", "0"], env_for)
    assert shown.returncode == 0 and "in-other" in shown.stdout, shown.stderr


def test_the_config_option_names_the_file_a_subcommand_reads(
    other: Path, tmp_path: Path, env_for: dict[str, str]
) -> None:
    config = tmp_path / "elsewhere.py"
    config.write_text(f"c.Repository.gangadir = {str(other)!r}\n")
    env = {k: v for k, v in env_for.items() if k != "GANGA_DIR"}  # the file decides
    assert _names(ganga([f"--config={config}", "jobs", "--json"], env)) == ["in-other"]


def test_the_readonly_options_open_the_repository_of_a_subcommand_read_only(
    env_for: dict[str, str], gangadir: Path
) -> None:
    """A read-only view needs an existing repository: an empty gangadir shows the option
    reached the repository (a writer would create the file)."""
    for args in (
        ["--readonly", "jobs"],
        ["--Repository.mode=readonly", "jobs"],
        ["--mode", "readonly", "jobs"],
        ["jobs", "--readonly"],
    ):
        result = ganga(args, env_for)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert result.stderr.strip().splitlines() == [
            f"ganga: no repository at {gangadir.resolve() / 'repository' / 'Data.fs'} to "
            "open read-only"
        ], (args, result.stderr)
    assert ganga(["jobs"], env_for).returncode == 0
    assert ganga(["--readonly", "jobs"], env_for).returncode == 0  # now it exists


def test_options_that_are_not_settings_are_refused_with_a_subcommand(
    env_for: dict[str, str],
) -> None:
    for args, message in (
        (["-i", "jobs"], "ganga: -i cannot be used with the subcommand"),
        (["--generate-config", "status"], "ganga: --generate-config cannot be used"),
        (["--Monitor.bogus=1", "jobs"], "ganga: unknown option --Monitor.bogus"),
        (["jobs", "--Monitor.bogus=1"], "ganga: unknown option --Monitor.bogus"),
    ):
        result = ganga(args, env_for)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith(message), (args, result.stderr)
        assert "Traceback" not in result.stderr
    # After `--` the word is a script's name, as before.
    result = ganga(["--", "jobs"], env_for)
    assert result.returncode == 2 and "no such script: jobs" in result.stderr


def test_the_option_names_a_subcommand_accepts_are_those_of_the_shell_application() -> None:
    from traitlets.config import Application

    from ganga_like.commands import cli_options
    from ganga_like.shell.app import GangaApp

    assert set(cli_options.ALIASES) == set(GangaApp.aliases)
    assert set(cli_options.FLAGS) == set(GangaApp.flags) | set(Application.flags)
    assert GangaApp.NOT_WITH_SUBCOMMAND == cli_options.NOT_WITH_SUBCOMMAND


def test_a_plain_subcommand_imports_neither_ipython_nor_the_shell_application(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    dump = tmp_path / "modules.txt"
    listed = ganga(["jobs"], {**env_for, "GANGA_DEBUG_MODULES_FILE": str(dump)})
    assert listed.returncode == 0, listed.stderr
    modules = set(dump.read_text().split())
    assert "ganga_like.commands.listing" in modules  # the dump is of this command
    for heavy in ("IPython", "ganga_like.shell.app", "ganga_like.shell", "rich"):
        assert heavy not in modules, heavy
    # Nor the modules of the subcommands that were not asked for.
    assert "ganga_like.commands.job_commands" not in modules
    # With one of ganga's options the command goes through the shell application.
    ganga(["jobs", "--no-monitor"], {**env_for, "GANGA_DEBUG_MODULES_FILE": str(dump)})
    assert "ganga_like.shell.app" in set(dump.read_text().split())
    assert "IPython" not in set(dump.read_text().split())


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--frobnicate"], "ganga: unknown option --frobnicate; ganga --help lists the options"),
        (
            ["jobs", "--Display.colums=fqid"],
            "ganga: unknown option --Display.colums (Display has no option 'colums'; did you "
            "mean 'columns'?); ganga --help lists the options",
        ),
        (
            ["--Locl.max_concurrent=2", "jobs"],
            "ganga: unknown option --Locl.max_concurrent: no configuration section 'Locl'; "
            "did you mean 'Local'? (sections: Repository, Monitor, Dask, Local, Notifier, "
            "SGE, Slurm, Jobs, Display, Shell); ganga --help lists the options",
        ),
        (
            ["--Locl.max_concurrent=2", "script.py"],
            "ganga: unknown option --Locl.max_concurrent: no configuration section 'Locl'; "
            "did you mean 'Local'? (sections: Repository, Monitor, Dask, Local, Notifier, "
            "SGE, Slurm, Jobs, Display, Shell); ganga --help lists the options",
        ),
        (
            ["--verison"],
            "ganga: unknown option --verison (did you mean --version?); ganga --help lists "
            "the options",
        ),
        (
            ["jobs", "--gangadir"],
            "ganga: option --gangadir needs a value: --gangadir=VALUE; ganga --help lists "
            "the options",
        ),
        (
            ["--Display.columns"],
            "ganga: option --Display.columns needs a value: --Display.columns=VALUE; ganga "
            "--help lists the options",
        ),
        (
            ["jobs", "--bogus"],
            "ganga jobs: unrecognized arguments: --bogus; ganga jobs --help explains it",
        ),
        (
            ["show"],
            "ganga show: the following arguments are required: id; ganga show --help explains it",
        ),
    ],
)
def test_a_usage_error_is_one_line_and_status_2(
    args: list[str], line: str, env_for: dict[str, str]
) -> None:
    result = ganga(args, env_for)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
