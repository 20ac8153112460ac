"""An Iterate submitted by `ganga script.py`, which exits at once, driven to convergence by
the monitor daemon alone; the daemon killed -9 between iterations (before the next is
recorded, once its job is stored, once it is submitted) and started again: no iteration
started twice (the jobs in the repository, and the submit events in each one's log)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon_stops import kill_daemon_at
from .test_cli import ganga
from .test_iterate import FITLIB
from .test_job_callbacks_daemon import daemon_env, stop_daemon
from .test_workflow_daemon import statuses, submits
from .waiting import wait_for

SCRIPT = """\
count = 'n=$(cat n.txt 2>/dev/null || echo 0); echo $((n+1)) > n.txt'
fit = Job(name="fit", application=Executable(exe="sh", args=["-c", count]),
          outputfiles=[LocalFile("n.txt")])
fit = Iterate(fit, until="fitlib:converged", max_iterations=10)
fit.submit()
print(fit.id)
"""


@pytest.fixture
def env(env_for: dict[str, str], gangadir: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = daemon_env(env_for, tmp_path, "fitlib", FITLIB)
    yield env
    stop_daemon(env, gangadir)


def _submit(env: dict[str, str], tmp_path: Path) -> int:
    script = tmp_path / "iterate.py"
    script.write_text(SCRIPT)
    done = ganga([str(script)], env)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[0])


def _converged(env: dict[str, str], fit: int) -> None:
    wait_for(lambda: statuses(env)[fit] == "completed", 180, "the Iterate to converge")
    shown = statuses(env)
    assert len(shown) == 3 and set(shown.values()) == {"completed"}  # 3 iterations, no more
    assert [submits(env, job_id) for job_id in sorted(shown)] == [1, 1, 1]


def test_a_script_submits_an_iterate_and_exits_and_the_daemon_alone_converges_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    fit = _submit(env, tmp_path)
    assert ganga(["monitor", "start"], env).returncode == 0
    _converged(env, fit)


@pytest.mark.parametrize("point", ["iteration-due", "iteration-created", "iteration-submitted"])
def test_the_daemon_killed_between_iterations_starts_none_twice(
    env: dict[str, str], tmp_path: Path, point: str
) -> None:
    fit = _submit(env, tmp_path)
    kill_daemon_at(env, tmp_path, point)
    assert statuses(env)[fit] == "running"  # the Iterate, between its iterations
    assert ganga(["monitor", "start"], env).returncode == 0
    _converged(env, fit)
