"""``ganga web``'s HTTP layer: the token guards every route, the server listens on the
loopback interface only, stops cleanly on Ctrl-C, and refuses bad options, a taken port
and a busy repository in one line each."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.routing import Route
from starlette.testclient import TestClient

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.model.status_column import CODES
from ganga_like.repository.connection import Repository
from ganga_like.runtime.session import Session
from ganga_like.runtime.settings import Settings
from ganga_like.web.access import HEADER, new_token
from ganga_like.web.grid_bytes import UNKNOWN_CODE, grid_codes
from ganga_like.web.reader import Reader
from ganga_like.web.routes import STATIC, build_app

from .test_cli import ganga
from .waiting import wait_for
from .web_server import running_web

TOKEN = new_token()
HOST = "testserver"  # what Starlette's test client sends as the Host
# The repository is shared between this session and the `ganga web` process.
SESSION_SETTINGS = {"repository_mode": "shared"}


@pytest.fixture
def client(gangadir: Path) -> Iterator[TestClient]:
    """The app on a real (embedded) repository, its event stream ending at once."""
    reader = Reader(Settings(gangadir=gangadir, repository_mode="embedded", monitoring=False))
    try:
        app = build_app(reader, TOKEN, frozenset({HOST}), stopping=lambda: True)
        with TestClient(app) as test_client:
            yield test_client
    finally:
        reader.close()


def _paths(client: TestClient) -> list[tuple[str, str]]:
    """Every route of the app with its parameters filled in, and an unknown path."""
    app = client.app.app  # type: ignore[attr-defined]  # behind the TokenGate
    filled = {"{job_id}": "0", "{fqid}": "0.1", "{name}": "common.js"}
    found = []
    for route in app.routes:
        assert isinstance(route, Route)
        path = route.path
        for name, value in filled.items():
            path = path.replace(name, value)
        assert "{" not in path, route.path
        for method in sorted(route.methods or {"GET"}):
            if method != "HEAD":
                found.append((method, path))
    return [*found, ("GET", "/no/such/page"), ("GET", "/static/plotly.min.js")]


def test_every_route_refuses_a_request_without_the_right_token(client: TestClient) -> None:
    paths = _paths(client)
    assert ("POST", "/api/kill/0.1") in paths and ("GET", "/api/events") in paths
    wrong = new_token()
    for method, path in paths:
        for params, headers in (
            ({}, {}),
            ({"token": wrong}, {}),
            ({"token": TOKEN[:-1]}, {}),
            ({}, {HEADER: wrong}),
            ({"token": [TOKEN, TOKEN]}, {}),
        ):
            answer = client.request(method, path, params=params, headers=headers)
            assert answer.status_code == 403, (method, path, params, headers)
            assert TOKEN not in answer.text
        # The right token, but from another Host (a rebound DNS name): refused too.
        answer = client.request(
            method, path, params={"token": TOKEN}, headers={"host": "evil.test"}
        )
        assert answer.status_code == 403, (method, path)
        right = client.request(method, path, headers={HEADER: TOKEN})
        assert right.status_code != 403, (method, path, right.text)
        assert right.headers["cache-control"] == "no-store"
        assert right.headers["referrer-policy"] == "no-referrer"


def test_a_change_needs_the_token_in_the_header_and_a_confirmation(client: TestClient) -> None:
    # The token in the address (what a link or a plain form of another site could carry)
    # does not allow a change.
    in_query = client.post("/api/kill/0", params={"token": TOKEN}, json={"confirmed": True})
    assert in_query.status_code == 403
    by_get = client.get("/api/kill/0", params={"token": TOKEN})
    assert by_get.status_code == 405
    missing = client.post("/api/kill/0", headers={HEADER: TOKEN}, json={"confirmed": True})
    assert (missing.status_code, missing.json()) == (404, {"error": "no job 0"})
    bad = client.post("/api/kill/x", headers={HEADER: TOKEN}, json={"confirmed": True})
    assert bad.status_code == 400 and bad.json()["error"].startswith("not a job id: 'x'")


def test_the_pages_and_their_files_are_served_with_the_token(client: TestClient) -> None:
    page = client.get("/", params={"token": TOKEN})
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    # The page names its scripts with the token, so that they load; nothing else of
    # the package is served.
    assert f"/static/jobs.js?token={TOKEN}" in page.text
    for name in STATIC:
        assert client.get(f"/static/{name}", params={"token": TOKEN}).status_code == 200
    assert client.get("/static/__init__.py", params={"token": TOKEN}).status_code == 404
    plotly = client.get("/static/plotly.min.js", params={"token": TOKEN})
    assert plotly.status_code == 200 and len(plotly.content) > 1_000_000
    assert client.get("/api/jobs", params={"token": TOKEN}).json() == []


@given(st.lists(st.sampled_from([*CODES, "no-such-status"]), max_size=300))
def test_the_grid_codes_are_each_status_in_its_place(labels: list[str]) -> None:
    codes = grid_codes(labels)
    assert len(codes) == len(labels)
    for label, code in zip(labels, codes, strict=True):
        assert code == (CODES.index(label) if label in CODES else UNKNOWN_CODE)


def test_ganga_web_listens_on_loopback_only_and_stops_on_ctrl_c(env_for: dict[str, str]) -> None:
    with running_web(env_for) as web:
        assert re.fullmatch(r"http://127\.0\.0\.1:[0-9]+", web.base)
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", web.token)
        port = int(web.base.rpartition(":")[2])
        listening = [
            c.laddr
            for c in psutil.Process(web.process.pid).net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", port)]
        assert web.get("/", token="")[0] == 403
        assert web.get("/api/jobs", token=new_token())[0] == 403
        assert web.get("/api/jobs") == (200, b"[]")
        assert web.get_json("/api/jobs") == []
        status, _ = web.post(
            "/api/kill/0", {"confirmed": True}, {"Content-Type": "application/json"}
        )
        assert status == 403
    # running_web checked: status 0, "ganga web: stopped", no token on stderr.


def test_ganga_web_refuses_bad_options_and_a_taken_port_in_one_line(
    env_for: dict[str, str],
) -> None:
    for args, expected in (
        (["--port", "x"], "expected a port number, not 'x'"),
        (["--port", "70000"], "expected a port from 0 to 65535, not 70000"),
        (["--host", "0.0.0.0"], "unrecognized arguments: --host"),
    ):
        bad = ganga(["web", *args], env_for)
        assert bad.returncode == 2, bad
        assert len(bad.stderr.splitlines()) == 1 and expected in bad.stderr, bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = ganga(["web", "--port", str(port)], env_for)
    assert busy.returncode == 1 and busy.stdout == ""
    assert busy.stderr == (
        f"ganga: port {port} of 127.0.0.1 is in use; give another --port, or none for a free one\n"
    )


def test_ganga_web_says_in_one_line_when_the_repository_is_busy(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    with Repository(gangadir, "embedded"):  # held alone by this process
        busy = ganga(["web"], env_for)
    assert busy.returncode == 1 and busy.stdout == ""
    assert len(busy.stderr.splitlines()) == 1 and "in use by PID" in busy.stderr, busy.stderr


def test_ganga_web_without_its_libraries_says_how_to_install_them(
    env_for: dict[str, str],
) -> None:
    code = (
        "import sys; sys.modules['uvicorn'] = None\n"
        "from ganga_like.cli import main\n"
        "sys.exit(main(['web']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], env=env_for, capture_output=True, text=True, timeout=60
    )
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == (
        "ganga: ganga web needs Starlette and uvicorn, which are not installed: "
        "pip install 'ganga_like[web]'\n"
    )
    assert json.dumps(run.stderr)  # one line, printable


def test_resubmit_and_kill_through_a_real_server_with_the_token_in_the_header(
    session: Session, env_for: dict[str, str]
) -> None:
    j = Job(
        application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(args=[["-c", "exit 0"], ["-c", "exit 3"]]),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    with running_web(env_for) as web:
        header = {"Content-Type": "application/json", HEADER: web.token}
        unconfirmed = web.post(f"/api/resubmit/{j.id}", {}, header)
        assert unconfirmed[0] == 400 and submissions(j, 1) == 1
        done = web.post(f"/api/resubmit/{j.id}", {"confirmed": True}, header)
        assert (done[0], json.loads(done[1])) == (200, {"done": f"job {j.id} resubmitted"})
        # Seen here at a status read after the server's commit (the session refreshes).
        wait_for(lambda: j.status and submissions(j, 1) == 2, 60, "the resubmission seen")
        assert submissions(j, 0) == 1
        assert j.wait(timeout=120) == "failed"
        # Killing what has ended is refused, in one line, with nothing changed.
        status, body = web.post(f"/api/kill/{j.id}.0", {"confirmed": True}, header)
        assert status == 409 and j.subjobs[0].status == "completed"
        assert len(json.loads(body)["error"].splitlines()) == 1


def submissions(j: Job, index: int) -> int:
    """How many times subjob ``index`` was handed to its backend, from its event log."""
    return sum(1 for entry in j.subjobs[index].history if entry.new == "submitted")
