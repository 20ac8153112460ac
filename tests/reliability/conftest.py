"""Fixtures for the fault suite: real processes, real servers, cleaned up after each test.

Tests marked ``slow`` (full-scale loops) are skipped in the default run, with the reason
shown; run them with ``GANGA_SLOW_TESTS=1 python -m pytest tests/reliability -m slow``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from ganga_like.repository.zeo import shared
from ganga_like.runtime.monitoring import daemon
from ganga_like.runtime.session import close_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from ..conftest import CHILD_PYTHONPATH

SLOW_ENV = "GANGA_SLOW_TESTS"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("slow") and not os.environ.get(SLOW_ENV):
        pytest.skip(f"slow: set {SLOW_ENV}=1 to run the full-scale version")


def shared_settings(gangadir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "gangadir": gangadir,  # the default mode: sessions share the repository
        "zeo_idle_exit": 2.0,
        "monitor_lease_timeout": 0.5,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def child_env(gangadir: Path, mode: str | None = None) -> dict[str, str]:
    """A child's environment; no mode unless one is asked for (the default is shared)."""
    env = dict(os.environ)
    env["GANGA_DIR"] = str(gangadir)
    env.pop("GANGA_REPOSITORY_MODE", None)
    if mode is not None:
        env["GANGA_REPOSITORY_MODE"] = mode
    env["XDG_CONFIG_HOME"] = str(gangadir.parent / "xdg-config")
    env["PYTHONPATH"] = CHILD_PYTHONPATH
    return env


def python(
    code: str, env: dict[str, str], argv: tuple[str, ...] = (), stdin: bool = False
) -> subprocess.Popen[str]:
    """A child Python running ``code`` (stdout and stderr piped, stdin too if asked)."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *argv],
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_python(
    code: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_until(predicate: Callable[[], object], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def kill_tree(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


@pytest.fixture
def cleanup(gangadir: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Children to kill, then the daemon, the runner and the repository server to stop."""
    children: list[subprocess.Popen[str]] = []
    yield children
    for child in children:
        if child.poll() is None:
            kill_tree(child)
    close_session()
    with contextlib.suppress(Exception):
        daemon.stop(gangadir)
    with contextlib.suppress(Exception):
        runner_client.stop(runner_dir(gangadir))
    repo_dir = gangadir / "repository"
    if repo_dir.exists():
        with contextlib.suppress(Exception):
            shared.stop_server(repo_dir)
    _kill_leftovers(gangadir)


def _kill_leftovers(gangadir: Path) -> None:
    """Anything still running with this gangadir on its command line (a killed test's
    server or daemon) is ours: end it, so nothing outlives the test."""
    needle = str(gangadir.resolve())
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.pid != os.getpid() and any(needle in part for part in cmdline):
            with contextlib.suppress(psutil.Error):
                proc.kill()
