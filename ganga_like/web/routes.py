"""The server's routes: two pages, their scripts, and the JSON they read.

    GET  /                      the jobs page          GET /job/ID      a job's page
    GET  /static/NAME           the pages' scripts, style and plotly.js
    GET  /api/jobs              the jobs table (ganga jobs --json's rows)
    GET  /api/jobs/ID           a job's row and stats (j.stats())
    GET  /api/jobs/ID/grid      every subjob's status, one byte each
    GET  /api/detail/FQID       a (sub)job's status, exit code and cause
    GET  /api/output/FQID       the last lines of its stdout and stderr
    GET  /api/events            Server-Sent Events: "change" after every commit
    POST /api/kill/FQID         {"confirmed": true} and the token in the header
    POST /api/resubmit/FQID     the same

Every route is behind the token (``access.TokenGate``), which wraps the whole app.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ganga_like.errors import GangaError, JobError
from ganga_like.web import job_data
from ganga_like.web.access import TokenGate
from ganga_like.web.reader import Reader, StatsCache

__all__ = ["KEEP_ALIVE", "POLL", "STATIC", "build_app"]

# How often the event stream looks for a new commit, and how long it stays silent at most.
POLL = 0.25
KEEP_ALIVE = 15.0
# The files the pages use, by name: nothing else of the package is served.
STATIC = {
    "web.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "jobs.js": "text/javascript; charset=utf-8",
    "job.js": "text/javascript; charset=utf-8",
    "grid.js": "text/javascript; charset=utf-8",
}
_FQID = re.compile(r"([0-9]+)(?:\.([0-9]+))?", re.ASCII)


def _static(name: str) -> Response:
    if name == "plotly.min.js":
        from plotly.offline import get_plotlyjs

        return Response(get_plotlyjs(), media_type="text/javascript; charset=utf-8")
    kind = STATIC.get(name)
    if kind is None:
        return JSONResponse({"error": f"no file {name!r}"}, status_code=404)
    data = resources.files("ganga_like.web").joinpath("static", name).read_bytes()
    return Response(data, media_type=kind)


def _fqid(text: str) -> tuple[int, int | None]:
    found = _FQID.fullmatch(text)
    if found is None:
        raise ValueError(f"not a job id: {text!r}; use 12 or 12.3")
    return int(found[1]), int(found[2]) if found[2] is not None else None


def _error(exc: Exception) -> JSONResponse:
    """One line saying why: 400 a malformed request, 404 no such job, 409 refused."""
    if isinstance(exc, ValueError):
        status = 400
    elif isinstance(exc, JobError) and str(exc).startswith("no job "):
        status = 404
    else:
        status = 409
    return JSONResponse({"error": str(exc)}, status_code=status)


class _Routes:
    """The handlers, sharing the reader and the stats kept between requests."""

    def __init__(self, reader: Reader, token: str, stopping: Callable[[], bool]) -> None:
        self.reader = reader
        self.token = token
        self.stopping = stopping
        self.stats = StatsCache()

    async def page(self, request: Request) -> Response:
        """A page, its scripts and style named with the token (URL-safe: no escaping)."""
        name = "job.html" if "job_id" in request.path_params else "jobs.html"
        html = resources.files("ganga_like.web").joinpath("static", name).read_text()
        return HTMLResponse(html.replace("__TOKEN__", self.token))

    async def static(self, request: Request) -> Response:
        return _static(request.path_params["name"])

    async def read(self, read: Callable[..., Any], *args: Any) -> Response:
        try:
            return JSONResponse(await self.reader.run(read, *args))
        except (GangaError, ValueError) as exc:
            return _error(exc)

    async def jobs(self, request: Request) -> Response:
        return await self.read(job_data.jobs_table)

    async def job(self, request: Request) -> Response:
        job_id: int = request.path_params["job_id"]
        commit = self.reader.last_commit()
        kept = self.stats.fresh(job_id, commit)
        if kept is not None:
            summary, current = kept
            return JSONResponse(summary if current else {**summary, "stale": True})
        started = time.monotonic()
        try:
            summary = await self.reader.run(job_data.job_summary, job_id)
        except GangaError as exc:
            return _error(exc)
        self.stats.keep(job_id, commit, time.monotonic() - started, summary)
        return JSONResponse(summary)

    async def grid(self, request: Request) -> Response:
        return await self.read(job_data.subjob_grid, request.path_params["job_id"])

    async def detail(self, request: Request) -> Response:
        return await self.read_of(request, job_data.subjob_detail)

    async def output(self, request: Request) -> Response:
        return await self.read_of(request, job_data.subjob_output)

    async def read_of(self, request: Request, read: Callable[..., Any]) -> Response:
        """``read`` of the (sub)job the path's FQID names."""
        try:
            job_id, sub = _fqid(request.path_params["fqid"])
        except ValueError as exc:
            return _error(exc)
        return await self.read(read, job_id, sub)

    async def kill(self, request: Request) -> Response:
        return await self.act(request, job_data.kill)

    async def resubmit(self, request: Request) -> Response:
        return await self.act(request, job_data.resubmit)

    async def act(self, request: Request, action: Callable[..., str]) -> Response:
        """Kill or resubmit, once the page's confirmation was given."""
        try:
            job_id, sub = _fqid(request.path_params["fqid"])
            if request.headers.get("content-type", "").split(";")[0] != "application/json":
                raise ValueError('expected a JSON body: {"confirmed": true}')
            body = await request.json()
            if not isinstance(body, dict) or body.get("confirmed") is not True:
                raise ValueError('not confirmed: nothing done (send {"confirmed": true})')
            said = await self.reader.act(action, job_id, sub)
        except (GangaError, ValueError) as exc:
            return _error(exc)
        return JSONResponse({"done": said})

    async def events(self, request: Request) -> Response:
        return StreamingResponse(
            self.changes(), media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

    async def changes(self) -> AsyncIterator[str]:
        """A "change" event at once and after every commit; a comment now and then so
        that a page learns early of a server gone. Ends when the server stops."""
        last = b""
        quiet_since = time.monotonic()
        while not self.stopping():
            commit = self.reader.last_commit()
            if commit != last:
                last = commit
                quiet_since = time.monotonic()
                yield f"event: change\ndata: {commit.hex()}\n\n"
            elif time.monotonic() - quiet_since > KEEP_ALIVE:
                quiet_since = time.monotonic()
                yield ": still here\n\n"
            await asyncio.sleep(POLL)


def build_app(
    reader: Reader, token: str, hosts: frozenset[str], stopping: Callable[[], bool]
) -> TokenGate:
    """The application, every route behind the token; ``hosts``: the Host headers that
    name this server (``127.0.0.1:PORT``, ``localhost:PORT``)."""
    routes = _Routes(reader, token, stopping)
    app = Starlette(
        routes=[
            Route("/", routes.page),
            Route("/job/{job_id:int}", routes.page),
            Route("/static/{name}", routes.static),
            Route("/api/jobs", routes.jobs),
            Route("/api/jobs/{job_id:int}", routes.job),
            Route("/api/jobs/{job_id:int}/grid", routes.grid),
            Route("/api/detail/{fqid}", routes.detail),
            Route("/api/output/{fqid}", routes.output),
            Route("/api/events", routes.events),
            Route("/api/kill/{fqid}", routes.kill, methods=["POST"]),
            Route("/api/resubmit/{fqid}", routes.resubmit, methods=["POST"]),
        ]
    )
    return TokenGate(app, token, hosts)
