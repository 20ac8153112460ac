"""Running the server: a socket on the loopback interface, the token, uvicorn, and a
clean end on Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import sys
from typing import TextIO

import uvicorn

from ganga_like.errors import GangaError
from ganga_like.runtime.settings import Settings
from ganga_like.web.access import new_token
from ganga_like.web.reader import Reader
from ganga_like.web.routes import build_app

__all__ = ["HOST", "bind", "serve"]

HOST = "127.0.0.1"
# How long open pages (their event streams) are given to close when the server stops.
CLOSE_WAIT = 2


class WebError(GangaError):
    """The server could not start (its port is taken)."""


def bind(port: int) -> socket.socket:
    """A listening socket on the loopback interface (``port`` 0: a free one).

    SO_REUSEADDR lets a server stopped a moment ago start again on its port, which the
    connections it closed (open pages) keep in TIME-WAIT for a minute; Linux still
    refuses a port another socket listens on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise WebError(
                f"port {port} of {HOST} is in use; give another --port, or none for a free one"
            ) from None
        raise WebError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


def serve(settings: Settings, port: int, out: TextIO = sys.stdout) -> None:
    """Serve the repository of ``settings`` until Ctrl-C; prints the URL (with the token)
    once the server answers, and ``ganga web: stopped`` at the end."""
    sock = bind(port)
    try:
        reader = Reader(settings)
    except BaseException:
        sock.close()
        raise
    try:
        bound = sock.getsockname()[1]
        token = new_token()
        hosts = frozenset({f"{HOST}:{bound}", f"localhost:{bound}"})
        server: uvicorn.Server | None = None

        def stopping() -> bool:
            return server is not None and server.should_exit

        app = build_app(reader, token, hosts, stopping)
        config = uvicorn.Config(
            app,
            access_log=False,  # an access log would hold the token of every URL
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=CLOSE_WAIT,
        )
        server = uvicorn.Server(config)
        # Requests cut short by the stop (a page's stats being read) are no error.
        logging.getLogger("uvicorn.error").addFilter(lambda _record: not stopping())
        print(f"ganga web: http://{HOST}:{bound}/?token={token}", file=out, flush=True)
        print("  (keep this address to yourself; Ctrl-C stops the server)", file=out, flush=True)
        # uvicorn stops first, then raises again the Ctrl-C (SIGINT) it caught.
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
        closed = reader.close()
    print("ganga web: stopped", file=out, flush=True)
    if not closed:
        # A read still runs in the reader thread, which the interpreter would wait for
        # at exit; it changes nothing, the repository's server keeps every commit.
        sys.stderr.flush()
        os._exit(0)
