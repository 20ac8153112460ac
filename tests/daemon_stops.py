"""The monitor daemon killed -9 at one of its stop points (ganga_like.model.stop_points),
as the daemon tests of workflows, callbacks, streams and iterations do it."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from ganga_like.model.stop_points import STOP_VARIABLE

from .test_cli import ganga
from .waiting import wait_for


def kill_daemon_at(
    env: dict[str, str], tmp_path: Path, point: str, release: Callable[[], None] = lambda: None
) -> None:
    """Start the daemon held at ``point``, call ``release`` (what lets it get there), kill
    it -9 once it is there, and return when ``ganga monitor status`` says it is gone."""
    stopped = tmp_path / "stopped"
    held = dict(env, **{STOP_VARIABLE: f"{point}:{stopped}"})
    assert ganga(["monitor", "start"], held).returncode == 0
    release()
    # The stop point writes its pid into the file it creates: read once it is there whole.
    wait_for(lambda: _pid_in(stopped) is not None, 120, f"the daemon to reach {point}")
    pid = _pid_in(stopped)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "not running" in ganga(["monitor", "status"], env).stdout, 30, "exit")


def _pid_in(path: Path) -> int | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.strip().isdigit() and text.endswith("\n") else None
