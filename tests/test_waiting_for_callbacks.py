"""``j.wait()``, ``wait()`` and ``as_completed()`` return once the awaited jobs' callbacks
(``j.on``) for the status they reached have been called, not as soon as the status is."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ganga_like import Executable, Job, RunCommand, as_completed, wait
from ganga_like.runtime.session import Session

from .waiting import wait_for


def _held_callback(tmp_path: Path) -> tuple[Job, Path, Path]:
    """A job whose callback on completed says it started, then waits for the gate."""
    started, gate = tmp_path / "started", tmp_path / "gate"
    j = Job(application=Executable(exe="/bin/true"))
    script = f"touch {started}; while ! test -e {gate}; do sleep 0.05; done; touch called"
    j.on("completed", RunCommand(["sh", "-c", script]))
    return j, started, gate


@pytest.mark.parametrize(
    "waiting",
    [
        lambda j: j.wait(timeout=120),
        lambda j: wait(j, timeout=120),
        lambda j: list(as_completed([j], timeout=120)),
    ],
    ids=["j.wait", "wait", "as_completed"],
)
def test_waiting_for_a_job_returns_once_its_callbacks_were_called(
    session: Session, tmp_path: Path, waiting: Callable[[Job], object]
) -> None:
    j, started, gate = _held_callback(tmp_path)
    # The gate opens once the callback has started: the callback ends after that, while
    # the job has been completed for a while.
    opener = threading.Thread(
        target=lambda: (wait_for(started.exists, 120, "the callback to start"), gate.touch()),
        daemon=True,
    )
    opener.start()
    j.submit()
    waiting(j)
    assert (Path(j.outputdir) / "called").exists()
    opener.join(10)
