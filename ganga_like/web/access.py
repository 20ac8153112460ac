"""Who may use the server: whoever holds the token of the URL it printed.

Login nodes are shared: any user of the machine can connect to a port on the loopback
interface. So every request, pages, data, static files and unknown paths alike, must
carry the token (``secrets.token_urlsafe``): in the ``token`` query parameter (what the
printed URL has; the pages add it to what they fetch), or in the ``X-Ganga-Token``
header. A request that changes something (POST) must carry it in the header: a form of
another site can neither send that header nor learn the token. The token is compared in
constant time and never logged (the server writes no access log).

The Host header must name the loopback address the server listens on, so that a page of
another site whose name is made to resolve to 127.0.0.1 (DNS rebinding) is refused too.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

__all__ = ["HEADER", "SAFE_METHODS", "TokenGate", "new_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEADER = "x-ganga-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
# Sent with every answer: nothing is cached or framed, no address leaks in a Referer,
# and the pages run only the server's own scripts.
SECURITY_HEADERS = (
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
)


def new_token() -> str:
    """A fresh secret for one server's life: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


class TokenGate:
    """ASGI middleware: refuses (403) every request without the right token or Host."""

    def __init__(self, app: ASGIApp, token: str, hosts: frozenset[str]) -> None:
        self.app = app
        self._token = token.encode()
        self._hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # the lifespan messages
            return
        if not self.allowed(scope):
            await _refuse(send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_secured)

    def allowed(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or ())
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host not in self._hosts:
            return False
        given = headers.get(HEADER.encode())
        if given is None and scope.get("method") in SAFE_METHODS:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            values = query.get("token", [])
            given = values[0].encode("latin-1") if len(values) == 1 else None
        return given is not None and hmac.compare_digest(given, self._token)


async def _refuse(send: Send) -> None:
    body = b"forbidden: this server answers only with the token of the URL it printed\n"
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
