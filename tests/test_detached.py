"""Starting detached helper processes and waiting for their ready line, with real children."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ganga_like.detached import HelperNotReady, start_detached, stop_detached

# Writes its session id and working directory to the log, then its ready line on the fd
# given after --ready-fd (the last two arguments).
READY = (
    "import os, sys\n"
    "print(os.getsid(0), os.getcwd(), flush=True)\n"
    "os.write(int(sys.argv[-1]), b'ready 7\\nignored\\n')\n"
)


def helper(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_helper_runs_in_its_own_session_from_the_root_and_its_ready_line_is_returned(
    tmp_path: Path,
) -> None:
    log = tmp_path / "helper.log"
    started = start_detached(helper(READY), log, ready_timeout=30)
    assert started.proc.wait(timeout=30) == 0
    assert started.ready_line == "ready 7"
    sid, cwd = log.read_text().split()
    assert int(sid) == started.proc.pid
    assert cwd == "/"
    assert log.stat().st_mode & 0o777 == 0o600


def test_a_helper_that_exits_without_a_ready_line_is_an_error_with_its_exit_code(
    tmp_path: Path,
) -> None:
    with pytest.raises(HelperNotReady, match="exited at start"):
        start_detached(
            helper("import sys; print('boom'); sys.exit(3)"), tmp_path / "h.log", ready_timeout=30
        )
    assert "boom" in (tmp_path / "h.log").read_text()


def test_a_helper_that_stays_silent_past_its_deadline_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HelperNotReady, match=r"within 0\.5 s") as raised:
        start_detached(helper("import time; time.sleep(60)"), tmp_path / "h.log", ready_timeout=0.5)
    assert raised.value.proc.poll() is None  # left to the caller, still running
    raised.value.proc.send_signal(signal.SIGKILL)
    raised.value.proc.wait(timeout=30)


def test_what_a_helper_wrote_before_closing_its_pipe_counts_as_its_line(tmp_path: Path) -> None:
    code = "import os, sys; os.write(int(sys.argv[-1]), b'error no room')"
    started = start_detached(helper(code), tmp_path / "h.log", ready_timeout=30)
    started.proc.wait(timeout=30)
    assert started.ready_line == "error no room"


def test_without_a_deadline_no_ready_pipe_is_passed(tmp_path: Path) -> None:
    code = "import sys; print(sys.argv[1:], flush=True)"
    started = start_detached(helper(code), tmp_path / "h.log")
    assert started.proc.wait(timeout=30) == 0
    assert started.ready_line is None
    assert (tmp_path / "h.log").read_text().strip() == "[]"


def test_stopping_a_helper_waits_until_it_is_gone_and_says_when_it_stays() -> None:
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert stop_detached(polite.pid, lambda: polite.poll() is None, timeout=10)
    assert polite.returncode is not None

    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            " print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
        assert not stop_detached(stubborn.pid, lambda: stubborn.poll() is None, timeout=0.3)
    finally:
        stubborn.kill()
        stubborn.wait()
    assert stop_detached(stubborn.pid, lambda: False, timeout=1)  # already gone
