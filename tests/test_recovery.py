"""Submissions interrupted by a crash (kill -9) are recovered at the next start."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ganga_like import jobs
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local import runner_client
from ganga_like_local.backend import JOURNAL, runner_dir

SUBMITTER = textwrap.dedent("""
    import sys
    from ganga_like import *
    j = Job(application=Executable(exe="sleep"),
            splitter=ArgSplitter(args=[["0.2"] for _ in range(int(sys.argv[1]))]))
    print("created", flush=True)
    j.submit()
    print("submitted", flush=True)
    import time
    time.sleep(60)
""")


def test_kill_9_during_submit_leaves_new_or_fully_recorded(
        gangadir: Path, env_for: dict[str, str]) -> None:
    rng = random.Random(7)
    outcomes = []
    try:
        for attempt in range(4):
            child = subprocess.Popen([sys.executable, "-c", SUBMITTER, "1500"], env=env_for,
                                     stdout=subprocess.PIPE, text=True)
            assert child.stdout is not None and child.stdout.readline().strip() == "created"
            time.sleep(rng.uniform(0.0, 0.6))
            child.send_signal(signal.SIGKILL)
            child.wait()
            session = open_session(Settings(gangadir=gangadir, local_max_concurrent=2))
            try:
                j = jobs[-1]
                status = j.status
                if status == "new":
                    assert j.subjobs == []
                    outcomes.append("rolled back")
                    # nothing of this job may run unrecorded: the runner was told to cancel
                    journal = session.repo.workspace / str(j.id) / JOURNAL
                    _settle()
                    if journal.exists():
                        events, _ = runner_client.read_events(journal, 0)
                        finished = {e.key for e in events if e.event != "started"}
                        started = {e.key for e in events if e.event == "started"}
                        assert started <= finished
                else:
                    assert len(j.subjobs) == 1500
                    assert all(s.status != "submitting" for s in j.subjobs)
                    outcomes.append("recorded")
                    j.kill()
            finally:
                close_session()
                del attempt
    finally:
        runner_client.stop(runner_dir(gangadir))
    print(outcomes)
    assert len(outcomes) == 4  # each attempt ended in one of the two consistent states


def _settle() -> None:
    time.sleep(1.0)
