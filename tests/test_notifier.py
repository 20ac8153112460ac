"""The Notifier postprocessor against a real SMTP server (aiosmtpd) started by the test."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from ganga_like import ArgSplitter, Executable, Job, Notifier, SchemaError
from ganga_like.config.store import store
from ganga_like.errors import GangaError
from ganga_like.runtime.session import Session, close_session, current_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client
from ganga_like_std.notifier_settings import Notifier as NotifierSection

from .test_sessions import ganga
from .waiting import wait_until


class Collector:
    """Keeps every message the server accepts."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"

    def subjects(self) -> list[str]:
        return [str(m["Subject"]) for m in self.messages]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def smtp() -> Iterator[tuple[Collector, int]]:
    collector = Collector()
    port = free_port()
    controller = Controller(collector, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield collector, port
    finally:
        controller.stop()


def open_at(gangadir: Path, port: int) -> Session:
    return open_session(
        Settings(
            gangadir=gangadir,
            repository_mode="embedded",
        ),
        store.snapshot().replaced(
            {
                LocalSection: {"max_concurrent": 2, "idle_exit": 5.0},
                NotifierSection: {
                    "host": "127.0.0.1",
                    "port": port,
                    "sender": "ganga@test.example",
                    "timeout": 5.0,
                },
            }
        ),
    )


@pytest.fixture
def mailing(gangadir: Path, smtp: tuple[Collector, int]) -> Iterator[Collector]:
    open_at(gangadir, smtp[1])
    try:
        yield smtp[0]
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))


def program(tmp_path: Path) -> str:
    """Exits with its argument as status."""
    path = tmp_path / "prog.sh"
    path.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        echo "arg $1"
        exit "$1"
    """)
    )
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("analysis", "analysis"),
        # A mail header holds no line break: the name is put on one line.
        ("first line\nsecond\r\tthird", "first line second third"),
    ],
)
def test_a_completed_job_mails_its_id_name_and_status(
    mailing: Collector, tmp_path: Path, name: str, shown: str
) -> None:
    j = Job(
        name=name,
        application=Executable(exe=program(tmp_path), args=["0"]),
        postprocessors=[Notifier(address="me@example.org")],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert wait_until(lambda: len(mailing.messages) == 1, timeout=60)
    msg = mailing.messages[0]
    assert msg["Subject"] == f"ganga job {j.id} ({shown}) completed"
    assert msg["To"] == "me@example.org" and msg["From"] == "ganga@test.example"


def test_a_failed_split_job_mails_once_unless_verbose_then_each_failed_subjob_too(
    mailing: Collector, tmp_path: Path
) -> None:
    quiet = Job(
        application=Executable(exe=program(tmp_path)),
        splitter=ArgSplitter(args=[["0"], ["3"], ["0"]]),
        postprocessors=[Notifier(address="me@example.org")],
    )
    quiet.submit()
    assert quiet.wait(timeout=60) == "failed"
    assert wait_until(lambda: len(mailing.messages) == 1, timeout=60)
    assert mailing.subjects() == [f"ganga job {quiet.id} failed"]
    verbose = Job(
        application=Executable(exe=program(tmp_path)),
        splitter=ArgSplitter(args=[["0"], ["4"], ["5"]]),
        postprocessors=[Notifier(address="me@example.org", verbose=True)],
    )
    verbose.submit()
    assert verbose.wait(timeout=60) == "failed"
    assert wait_until(lambda: len(mailing.messages) == 4, timeout=60)
    assert sorted(mailing.subjects()[1:]) == [
        f"ganga job {verbose.id} failed",
        f"ganga job {verbose.id}.1 failed",
        f"ganga job {verbose.id}.2 failed",
    ]
    for _ in range(3):
        current_session().monitor.run_once()
    assert len(mailing.messages) == 4


def test_no_mail_is_sent_twice_after_the_monitor_restarts(
    gangadir: Path, smtp: tuple[Collector, int], tmp_path: Path
) -> None:
    collector, port = smtp
    open_at(gangadir, port)
    try:
        j = Job(
            application=Executable(exe=program(tmp_path), args=["0"]),
            postprocessors=[Notifier(address="me@example.org")],
        )
        j.submit()
        assert j.wait(timeout=60) == "completed"
        assert wait_until(lambda: len(collector.messages) == 1, timeout=60)
        job_id = j.id
    finally:
        close_session()
    open_at(gangadir, port)
    try:
        for _ in range(3):
            current_session().monitor.run_once()
        assert len(collector.messages) == 1
        assert [m["Subject"] for m in collector.messages] == [f"ganga job {job_id} completed"]
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))


def test_a_server_that_is_down_leaves_one_event_log_line_and_the_job_as_it_is(
    gangadir: Path, tmp_path: Path
) -> None:
    open_at(gangadir, free_port())  # nothing listens there
    try:
        j = Job(
            application=Executable(exe=program(tmp_path), args=["0"]),
            postprocessors=[Notifier(address="me@example.org")],
        )
        j.submit()
        assert j.wait(timeout=60) == "completed"

        def noted() -> list[str]:
            current_session().sync()
            return [e.cause for e in j.history if "not sent" in e.cause]

        assert wait_until(lambda: bool(noted()), timeout=60)
        for _ in range(3):
            current_session().monitor.run_once()
        (line,) = noted()
        assert line.startswith("notification to me@example.org not sent: ")
        assert "\n" not in line
        assert j.status == "completed"
        # The monitor goes on: the next job completes as usual.
        k = Job(application=Executable(exe=program(tmp_path), args=["0"]))
        k.submit()
        assert k.wait(timeout=60) == "completed"
    finally:
        close_session()
        with contextlib.suppress(Exception):
            runner_client.stop(runner_dir(gangadir))


def test_an_address_that_is_not_an_email_address_is_refused_with_one_line(
    mailing: Collector, tmp_path: Path
) -> None:
    n = Notifier(address="me@example.org")
    for bad in ["me", "me@", "a@b, c@d", "Me <me@example.org>"]:
        with pytest.raises(SchemaError) as caught:
            n.address = bad
        assert "\n" not in str(caught.value) and "e-mail address" in str(caught.value)
    assert n.address == "me@example.org"
    j = Job(application=Executable(exe=program(tmp_path), args=["0"]), postprocessors=[Notifier()])
    with pytest.raises(GangaError) as refused:
        j.submit()
    assert "address" in str(refused.value) and "\n" not in str(refused.value)
    assert j.status == "new"


SUBMIT_AND_EXIT = """\
import sys
from ganga_like import Executable, Job, Notifier
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from pathlib import Path
open_session(Settings(gangadir=Path(sys.argv[1]), monitoring=False))
j = Job(application=Executable(exe=sys.argv[2], args=["0"]),
        postprocessors=[Notifier(address="me@example.org")])
j.submit()
print(j.id, flush=True)
close_session()
"""


def test_the_monitor_daemon_notifies_after_every_shell_has_exited(
    gangadir: Path, env_for: dict[str, str], smtp: tuple[Collector, int], tmp_path: Path
) -> None:
    collector, port = smtp
    config = Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"c.Notifier.host = '127.0.0.1'\nc.Notifier.port = {port}\n")
    env = dict(env_for)
    env.pop("GANGA_REPOSITORY_MODE", None)
    child = subprocess.run(
        [sys.executable, "-c", SUBMIT_AND_EXIT, str(gangadir), program(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    job_id = int(child.stdout.split()[-1])
    assert collector.messages == []  # nobody monitored: nothing sent yet
    started = ganga(["monitor", "start"], env)
    assert started.returncode == 0, started.stderr
    try:
        assert wait_until(lambda: len(collector.messages) == 1, timeout=90)
        assert collector.subjects() == [f"ganga job {job_id} completed"]
    finally:
        ganga(["monitor", "stop"], env)
        with contextlib.suppress(Exception):
            runner_client.stop(runner_dir(gangadir))
