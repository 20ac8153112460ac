"""What ``ganga web`` answers besides its pages and data: an action's body read as JSON
whatever its content type, and refused (400, naming the key) when it holds what the
action does not take; an unknown job 404 before the body is read; every error of the
JSON routes ``{"error": ...}`` and of the pages a small HTML page; a kill of a job others
wait for saying what becomes of them; and a port free again right after a stop."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ganga_like import Executable, Job
from ganga_like.repository.connection import Repository
from ganga_like.runtime.session import Session
from ganga_like.runtime.settings import Settings
from ganga_like.web.access import HEADER, new_token
from ganga_like.web.reader import Reader
from ganga_like.web.routes import build_app

from .test_cli import ganga
from .waiting import wait_for
from .web_server import master_with_statuses, running_web, start_web

TOKEN = new_token()
HOST = "testserver"  # what Starlette's test client sends as the Host
# The repository is shared between this session and the `ganga web` process.
SESSION_SETTINGS = {"repository_mode": "shared"}
# What curl -d sends, and what a script may well send: no JSON content type.
FORM = {HEADER: TOKEN, "content-type": "application/x-www-form-urlencoded"}


@pytest.fixture
def client(gangadir: Path) -> Iterator[TestClient]:
    """The app on a real (embedded) repository holding job 0, of a completed and a
    failed subjob; its event stream ends at once."""
    repo = Repository(gangadir, "embedded")
    try:
        repo.in_transaction(
            lambda: master_with_statuses(repo.registry(), ["completed", "failed"], "built")
        )
    finally:
        repo.close()
    reader = Reader(Settings(gangadir=gangadir, repository_mode="embedded", monitoring=False))
    try:
        app = build_app(reader, TOKEN, frozenset({HOST}), stopping=lambda: True)
        with TestClient(app) as test_client:
            yield test_client
    finally:
        reader.close()


def test_an_action_reads_its_json_body_whatever_its_content_type(client: TestClient) -> None:
    for headers in (FORM, {HEADER: TOKEN}, {HEADER: TOKEN, "content-type": "text/plain"}):
        # Read and confirmed: the kill is tried, and refused as the subjob has ended.
        answer = client.post("/api/kill/0.0", headers=headers, content=b'{"confirmed": true}')
        assert answer.status_code == 409, (headers, answer.text)
        assert "not confirmed" not in answer.json()["error"]
    for body in (b"confirmed=true", b"", b"[true]", b'"yes"'):
        answer = client.post("/api/kill/0.0", headers=FORM, content=body)
        assert answer.status_code == 400, body
        assert answer.json()["error"].startswith("expected a JSON object as the body, such as")
    for body in (b"{}", b'{"confirmed": "yes"}', b'{"confirmed": false}'):
        answer = client.post("/api/kill/0.0", headers=FORM, content=body)
        assert answer.status_code == 400, body
        assert answer.json()["error"] == 'not confirmed: nothing done (send {"confirmed": true})'


def test_an_unknown_job_is_404_whatever_the_body(client: TestClient) -> None:
    for body in (b'{"confirmed": true}', b"confirmed=true", b"", b'{"group": 1}'):
        for action in ("kill", "resubmit"):
            answer = client.post(f"/api/{action}/99", headers=FORM, content=body)
            assert (answer.status_code, answer.json()) == (404, {"error": "no job 99"}), body
        answer = client.post("/api/kill/0.7", headers=FORM, content=body)
        assert (answer.status_code, answer.json()) == (404, {"error": "no job 0.7"})


def test_an_action_refuses_a_key_it_does_not_take_naming_it(client: TestClient) -> None:
    for action, body, expected in (
        (
            "resubmit",
            {"confirmed": True, "group": 1},
            "unknown key 'group' in the body (known: 'confirmed'); nothing done",
        ),
        (
            "kill",
            {"confirmed": True, "group": 1},
            "unknown key 'group' in the body (known: 'confirmed', 'dependents'); nothing done",
        ),
        (
            "resubmit",
            {"confirmed": True, "dependents": "skip"},
            "unknown key 'dependents' in the body (known: 'confirmed'); nothing done",
        ),
        (
            "kill",
            {"confirmed": True, "dependents": "drop"},
            "'dependents': expected 'skip' or 'keep', not 'drop'; nothing done",
        ),
    ):
        answer = client.post(f"/api/{action}/0", headers=FORM, content=json.dumps(body))
        assert (answer.status_code, answer.json()) == (400, {"error": expected})
    # Nothing was done: the failed subjob was not handed over again.
    detail = client.get("/api/detail/0.1", headers={HEADER: TOKEN}).json()
    assert detail["status"] == "failed"


def test_every_error_of_the_json_routes_is_json_and_of_the_pages_html(
    client: TestClient,
) -> None:
    for method, path, status, error in (
        ("GET", "/api/jobs/-1", 400, "not a job id: '-1'; use a number such as 12"),
        ("GET", "/api/jobs/x", 400, "not a job id: 'x'; use a number such as 12"),
        ("GET", "/api/jobs/0.1/grid", 400, "not a job id: '0.1'; use a number such as 12"),
        ("GET", "/api/jobs/99", 404, "no job 99"),
        ("GET", "/api/jobs/99/grid", 404, "no job 99"),
        ("GET", "/api/detail/x", 400, "not a job id: 'x'; use 12 or 12.3"),
        ("GET", "/api/output/0.9", 404, "no job 0.9"),
        ("GET", "/api/no/such/route", 404, "nothing at /api/no/such/route"),
        ("GET", "/api/kill/0", 405, "GET is not allowed at /api/kill/0"),
        ("POST", "/api/jobs", 405, "POST is not allowed at /api/jobs"),
    ):
        answer = client.request(method, path, headers={HEADER: TOKEN})
        assert answer.status_code == status, (path, answer.text)
        assert answer.headers["content-type"] == "application/json", path
        assert answer.json() == {"error": error}, path
    for path, status, error in (
        ("/job/99", 404, "no job 99"),
        ("/job/x", 400, "not a job id: &#x27;x&#x27;; use a number such as 12"),
        ("/job/-1", 400, "not a job id: &#x27;-1&#x27;; use a number such as 12"),
        ("/no/such/page", 404, "nothing at /no/such/page"),
    ):
        answer = client.get(path, params={"token": TOKEN})
        assert answer.status_code == status, (path, answer.text)
        assert answer.headers["content-type"].startswith("text/html"), path
        assert f'<p id="error">{error}</p>' in answer.text, answer.text
        assert f'href="/?token={TOKEN}"' in answer.text  # the way back to the jobs
    shown = client.get("/job/0", params={"token": TOKEN})
    assert shown.status_code == 200 and "/static/job.js" in shown.text


def test_a_kill_of_a_job_others_wait_for_says_what_becomes_of_them(
    session: Session, env_for: dict[str, str], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"  # never made: the first job runs until killed
    first = Job(
        application=Executable(exe="/bin/sh", args=["-c", f"while ! test -e {gate}; do :; done"])
    )
    first.submit()
    second = Job(application=Executable(exe="/bin/true"), after=first)
    second.submit()
    assert second.status == "waiting"
    with running_web(env_for) as web:
        header = {HEADER: web.token}
        assert web.get_json(f"/api/jobs/{first.id}")["dependents"] == [second.id]
        assert web.get_json(f"/api/jobs/{second.id}")["dependents"] == []
        status, body = web.post(f"/api/kill/{first.id}", {"confirmed": True}, header)
        assert status == 409
        assert json.loads(body)["error"] == (
            f"job {first.id}: job(s) {second.id} wait for it; say what becomes of them: "
            'choose "skip" or "keep" (the body\'s "dependents")'
        )
        assert first.status in ("submitted", "running")
        done = web.post(f"/api/kill/{first.id}", {"confirmed": True, "dependents": "skip"}, header)
        assert (done[0], json.loads(done[1])) == (200, {"done": f"job {first.id} killed"})
        wait_for(lambda: second.status == "skipped", 60, "the waiting job skipped")
        assert first.status == "killed"


def _port_of(base: str) -> int:
    return int(base.rpartition(":")[2])


def test_ganga_web_starts_again_on_its_port_right_after_a_stop_with_a_page_open(
    env_for: dict[str, str],
) -> None:
    first = start_web(env_for)
    port = _port_of(first.base)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as page:
        stream = f"/api/events?token={first.token}"
        page.sendall(f"GET {stream} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        seen = b""
        while b"event: change" not in seen:  # the stream is open
            more = page.recv(4096)
            assert more, seen
            seen += more
        code, out, _err = first.stop()
        assert code == 0 and out.splitlines()[-1] == "ganga web: stopped", out
        while page.recv(4096):  # read to the end, as a browser does: the server closed
            pass  # the connection first, which leaves its port in TIME-WAIT
    with running_web(env_for, "--port", str(port)) as again:
        assert _port_of(again.base) == port
        assert again.get_json("/api/jobs") == []


def test_ganga_web_refuses_a_port_another_process_listens_on_in_one_line(
    env_for: dict[str, str],
) -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server's own
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = ganga(["web", "--port", str(port)], env_for)
    assert (busy.returncode, busy.stdout) == (1, "")
    assert busy.stderr == (
        f"ganga: port {port} of 127.0.0.1 is in use; give another --port, or none for a free one\n"
    )
