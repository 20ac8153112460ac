"""A real ``ganga web`` process for the tests: started, its URL read, stopped by Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

URL_PREFIX = "ganga web: http://"
CHROMIUM = Path("/usr/bin/chromium")
# Debian's Chromium, headless, talking to nothing but the server under test.
LAUNCH_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# How a subjob reaches each status from submitted, for masters built through the model.
STEPS = {
    "completed": ("running", "completed"),
    "failed": ("running", "failed"),
    "running": ("running",),
    "submitted": (),
    "killed": ("killed",),
}


def launch_chromium(driver: Any, profile: str) -> Any:
    """A Chromium context on a fresh profile (Playwright never downloads a browser)."""
    return driver.chromium.launch_persistent_context(
        profile,
        executable_path=str(CHROMIUM),
        headless=True,
        args=list(LAUNCH_ARGS),
        viewport={"width": 1100, "height": 900},
    )


def master_with_statuses(registry: Any, labels: list[str], name: str) -> Any:
    """A master added to ``registry`` whose subjobs are in ``labels``' statuses (keys of
    ``STEPS``), built through the model: running that many on Local would take minutes,
    and what is read back is the same. The caller commits."""
    from ganga_like.model.job import Job
    from ganga_like.model.status import Status

    master = Job(name=name)
    registry.add(master)
    master.change_status(Status.SUBMITTING, "built")
    subjobs = [Job.new_subjob(master, i) for i in range(len(labels))]
    for subjob in subjobs:
        subjob.backend = master.backend
    master.attach_subjobs(subjobs)
    for subjob, label in zip(subjobs, labels, strict=True):
        subjob.change_status(Status.SUBMITTED, "built")
        for step in STEPS[label]:
            subjob.change_status(Status.parse(step), "built")
    master.change_status(Status.SUBMITTED, "built")
    registry.reindex(master)
    return master


@dataclass
class WebServer:
    process: subprocess.Popen[str]
    base: str  # http://127.0.0.1:PORT
    token: str
    first_lines: list[str]

    @property
    def url(self) -> str:
        return f"{self.base}/?token={self.token}"

    def get(
        self, path: str, token: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """GET ``path`` with ``token`` (this server's unless given; "" for none) in the query."""
        given = self.token if token is None else token
        sep = "&" if "?" in path else "?"
        url = f"{self.base}{path}{sep}token={given}" if given else f"{self.base}{path}"
        return _request(urllib.request.Request(url, headers=headers or {}))

    def get_json(self, path: str) -> Any:
        status, body = self.get(path)
        assert status == 200, (status, body)
        return json.loads(body)

    def post(self, path: str, body: object, headers: dict[str, str]) -> tuple[int, bytes]:
        request = urllib.request.Request(
            f"{self.base}{path}", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        return _request(request)

    def stop(self) -> tuple[int, str, str]:
        """Ctrl-C (SIGINT), as a user stops it: its status and what it printed in all."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=60)
        return self.process.returncode, "\n".join([*self.first_lines, out]), err


def _request(request: urllib.request.Request) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def start_web(env: dict[str, str], *args: str) -> WebServer:
    """``ganga web ARGS`` started; returns once it printed its URL (it is listening then)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ganga_like.cli", "web", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    if not first.startswith(URL_PREFIX):
        process.kill()
        out, err = process.communicate(timeout=60)
        raise AssertionError(f"ganga web did not start: {first}{out}{err}")
    second = process.stdout.readline()
    address, _, token = first.strip().removeprefix("ganga web: ").partition("/?token=")
    return WebServer(process, address, token, [first.rstrip("\n"), second.rstrip("\n")])


@contextmanager
def running_web(env: dict[str, str], *args: str) -> Iterator[WebServer]:
    """A ``ganga web`` for the block; stopped after it, and its end checked clean."""
    web = start_web(env, *args)
    try:
        yield web
    finally:
        code, out, err = web.stop()
        assert code == 0, (code, out, err)
        assert out.splitlines()[-1] == "ganga web: stopped", out
        assert web.token not in err, "the token was written to stderr"
