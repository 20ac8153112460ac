"""How the server says no, and what an action's request must hold.

Every refusal of the JSON routes (``/api/...``) is ``{"error": "one line"}`` with its
status: 400 a malformed request, 404 nothing there, 405 a wrong method, 409 an action
refused. A page that cannot be shown is a small HTML page saying why, with that status.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from ganga_like.errors import GangaError, JobError

__all__ = [
    "DEPENDENTS",
    "action_body",
    "error_json",
    "error_page",
    "http_error",
    "job_id",
    "job_ids",
    "server_error",
    "status_of",
]

# What a kill does with the jobs that wait for the one killed (as ``--dependents``).
DEPENDENTS = ("skip", "keep")
_JOB_ID = re.compile(r"[0-9]+", re.ASCII)
_FQID = re.compile(r"([0-9]+)(?:\.([0-9]+))?", re.ASCII)
_TITLES = {400: "bad request", 404: "not found", 405: "method not allowed", 409: "refused"}


def job_id(text: str) -> int:
    """A job's id from a path (``12``); ValueError (a 400) otherwise."""
    if _JOB_ID.fullmatch(text) is None:
        raise ValueError(f"not a job id: {text!r}; use a number such as 12")
    return int(text)


def job_ids(text: str) -> tuple[int, int | None]:
    """A (sub)job's id from a path (``12`` or ``12.3``); ValueError (a 400) otherwise."""
    found = _FQID.fullmatch(text)
    if found is None:
        raise ValueError(f"not a job id: {text!r}; use 12 or 12.3")
    return int(found[1]), int(found[2]) if found[2] is not None else None


def status_of(exc: Exception) -> int:
    """400 a malformed request, 404 no such job, 409 an action refused."""
    if isinstance(exc, ValueError):
        return 400
    if isinstance(exc, JobError) and str(exc).startswith("no job "):
        return 404
    return 409


def error_json(exc: GangaError | ValueError) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, status_code=status_of(exc))


def error_page(message: str, status: int, token: str) -> HTMLResponse:
    """A page saying why there is nothing to show, and the way back to the jobs."""
    title = _TITLES.get(status, "error")
    body = (
        '<!doctype html>\n<html lang="en">\n<head><meta charset="utf-8">'
        f"<title>ganga: {title}</title></head>\n"
        f'<body><h1>{title}</h1><p id="error">{html.escape(message)}</p>'
        f'<p><a href="/?token={token}">jobs</a></p></body>\n</html>\n'
    )
    return HTMLResponse(body, status_code=status)


def http_error(token: str) -> Any:
    """Starlette's handler of its own refusals (no such route, a wrong method): JSON
    under ``/api/``, a page elsewhere."""

    async def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if exc.status_code == 404:
            message = f"nothing at {path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed at {path}"
        else:
            message = str(exc.detail)
        if path.startswith("/api/"):
            return JSONResponse(
                {"error": message}, status_code=exc.status_code, headers=exc.headers
            )
        return error_page(message, exc.status_code, token)

    return handle


async def server_error(request: Request, exc: Exception) -> Response:
    """A failure of the server itself (500), said in one line; its traceback goes to the
    server's error output as before."""
    message = f"the server failed: {type(exc).__name__}: {exc}".splitlines()[0]
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=500)
    return error_page(message, 500, "")


def action_body(raw: bytes, allowed: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """The JSON object of an action's request, whatever its content type (the token in
    the header already keeps other sites' pages out): ``{"confirmed": true}`` and the
    keys of ``allowed`` (name -> the values it takes). ValueError (a 400) otherwise."""
    example = '{"confirmed": true}'
    try:
        body = json.loads(raw) if raw.strip() else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        shown = raw[:40].decode(errors="replace")
        raise ValueError(f"expected a JSON object as the body, such as {example}, not {shown!r}")
    for key, value in body.items():
        if key == "confirmed":
            continue
        if key not in allowed:
            known = ", ".join(repr(k) for k in ("confirmed", *allowed))
            raise ValueError(f"unknown key {key!r} in the body (known: {known}); nothing done")
        if value not in allowed[key]:
            expected = " or ".join(repr(choice) for choice in allowed[key])
            raise ValueError(f"{key!r}: expected {expected}, not {value!r}; nothing done")
    if body.get("confirmed") is not True:
        raise ValueError(f"not confirmed: nothing done (send {example})")
    return body
