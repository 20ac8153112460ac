"""The server's routes: two pages, their scripts, and the JSON they read.

    GET  /                      the jobs page          GET /job/ID      a job's page
    GET  /static/NAME           the pages' scripts, style and plotly.js
    GET  /api/jobs              the jobs table (ganga jobs --json's rows)
    GET  /api/jobs/ID           a job's row and stats (j.stats())
    GET  /api/jobs/ID/grid      every subjob's status, one byte each
    GET  /api/detail/FQID       a (sub)job's status, exit code and cause
    GET  /api/output/FQID       the last lines of its stdout and stderr
    GET  /api/events            Server-Sent Events: "change" after every commit
    POST /api/kill/FQID         {"confirmed": true} (and "dependents": "skip" or "keep")
                                with the token in the header
    POST /api/resubmit/FQID     {"confirmed": true} with the token in the header

Every route is behind the token (``access.TokenGate``), which wraps the whole app.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ganga_like.errors import GangaError
from ganga_like.web import job_data
from ganga_like.web.access import TokenGate
from ganga_like.web.answers import (
    DEPENDENTS,
    action_body,
    error_json,
    error_page,
    http_error,
    job_id,
    job_ids,
    server_error,
    status_of,
)
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
# What each action's body may hold besides "confirmed", and what it takes.
KILL_KEYS = {"dependents": DEPENDENTS}


def _static(name: str) -> Response:
    if name == "plotly.min.js":
        from plotly.offline import get_plotlyjs

        return Response(get_plotlyjs(), media_type="text/javascript; charset=utf-8")
    kind = STATIC.get(name)
    if kind is None:
        return JSONResponse({"error": f"no file {name!r}"}, status_code=404)
    data = resources.files("ganga_like.web").joinpath("static", name).read_bytes()
    return Response(data, media_type=kind)


class _Routes:
    """The handlers, sharing the reader and the stats kept between requests."""

    def __init__(self, reader: Reader, token: str, stopping: Callable[[], bool]) -> None:
        self.reader = reader
        self.token = token
        self.stopping = stopping
        self.stats = StatsCache()

    async def page(self, request: Request) -> Response:
        """A page, its scripts and style named with the token (URL-safe: no escaping);
        a job's page only for a job there is."""
        name = "jobs.html"
        if "job_id" in request.path_params:
            name = "job.html"
            try:
                await self.reader.run(job_data.check, job_id(request.path_params["job_id"]))
            except (GangaError, ValueError) as exc:
                return error_page(str(exc), status_of(exc), self.token)
        html = resources.files("ganga_like.web").joinpath("static", name).read_text()
        return HTMLResponse(html.replace("__TOKEN__", self.token))

    async def static(self, request: Request) -> Response:
        return _static(request.path_params["name"])

    async def read(self, read: Callable[..., Any], *args: Any) -> Response:
        try:
            return JSONResponse(await self.reader.run(read, *args))
        except (GangaError, ValueError) as exc:
            return error_json(exc)

    async def jobs(self, request: Request) -> Response:
        return await self.read(job_data.jobs_table)

    async def job(self, request: Request) -> Response:
        try:
            number = job_id(request.path_params["job_id"])
        except ValueError as exc:
            return error_json(exc)
        commit = self.reader.last_commit()
        kept = self.stats.fresh(number, commit)
        if kept is not None:
            summary, current = kept
            return JSONResponse(summary if current else {**summary, "stale": True})
        started = time.monotonic()
        try:
            summary = await self.reader.run(job_data.job_summary, number)
        except GangaError as exc:
            return error_json(exc)
        self.stats.keep(number, commit, time.monotonic() - started, summary)
        return JSONResponse(summary)

    async def grid(self, request: Request) -> Response:
        try:
            number = job_id(request.path_params["job_id"])
        except ValueError as exc:
            return error_json(exc)
        return await self.read(job_data.subjob_grid, number)

    async def detail(self, request: Request) -> Response:
        return await self.read_of(request, job_data.subjob_detail)

    async def output(self, request: Request) -> Response:
        return await self.read_of(request, job_data.subjob_output)

    async def read_of(self, request: Request, read: Callable[..., Any]) -> Response:
        """``read`` of the (sub)job the path's FQID names."""
        try:
            number, sub = job_ids(request.path_params["fqid"])
        except ValueError as exc:
            return error_json(exc)
        return await self.read(read, number, sub)

    async def kill(self, request: Request) -> Response:
        return await self.act(request, job_data.kill, KILL_KEYS)

    async def resubmit(self, request: Request) -> Response:
        return await self.act(request, job_data.resubmit, {})

    async def act(
        self, request: Request, action: Callable[..., str], keys: Mapping[str, tuple[str, ...]]
    ) -> Response:
        """Kill or resubmit, once the page's confirmation was given: the (sub)job is
        looked for first (404), then the body read (400), then the action tried (409)."""
        try:
            number, sub = job_ids(request.path_params["fqid"])
            await self.reader.run(job_data.check, number, sub)
            body = action_body(await request.body(), keys)
            options = {key: body[key] for key in keys if key in body}
            said = await self.reader.act(action, number, sub, options)
        except (GangaError, ValueError) as exc:
            return error_json(exc)
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
            Route("/job/{job_id}", routes.page),
            Route("/static/{name}", routes.static),
            Route("/api/jobs", routes.jobs),
            Route("/api/jobs/{job_id}", routes.job),
            Route("/api/jobs/{job_id}/grid", routes.grid),
            Route("/api/detail/{fqid}", routes.detail),
            Route("/api/output/{fqid}", routes.output),
            Route("/api/events", routes.events),
            Route("/api/kill/{fqid}", routes.kill, methods=["POST"]),
            Route("/api/resubmit/{fqid}", routes.resubmit, methods=["POST"]),
        ],
        exception_handlers={HTTPException: http_error(token), Exception: server_error},
    )
    return TokenGate(app, token, hosts)
