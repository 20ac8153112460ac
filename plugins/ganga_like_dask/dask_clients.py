"""Clients of Dask schedulers, one per address per session (:class:`DaskConnections`).

``distributed`` is imported here, on first use, never when ``ganga_like`` is imported.
Every call has a deadline: a scheduler that does not answer (gone, stopped, cut off) raises
a transient BackendError, so its jobs stay as they are and are found again when it answers.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from ganga_like.errors import BackendError

__all__ = ["DaskConnections", "DaskUnreachable", "on_scheduler", "quiet_distributed"]


class DaskUnreachable(BackendError):
    """The Dask scheduler cannot be reached (transient: it may come back)."""

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(f"cannot reach the Dask scheduler at {address}: {detail}", transient=True)


class DaskConnections:
    """The clients of Dask schedulers of one session, one per address, and the TLS
    credentials of the schedulers that need them (the gangadir's own cluster); the
    session's one is ``ctx.kept(DaskConnections)``. Closed with the session, and at exit
    at the latest."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._securities: dict[str, Any] = {}
        self._closing_at_exit = False
        # Per address: keys whose outcome is written, to release with the next call.
        self._releases: dict[str, list[str]] = {}

    def trust(self, address: str, security: Any) -> None:
        """Connect to ``address`` with ``security`` (a ``distributed`` Security) from now
        on."""
        with self._lock:
            self._securities[address] = security

    def release_later(self, address: str, keys: list[str]) -> None:
        """Have ``keys`` released at ``address`` with the next poll's call (or when this
        session closes)."""
        with self._lock:
            self._releases.setdefault(address, []).extend(keys)

    def releases_due(self, address: str) -> list[str]:
        """The keys to release at ``address`` with the call about to be made (taken:
        given back with ``release_later`` if the call fails)."""
        with self._lock:
            return self._releases.pop(address, [])

    def close(self) -> None:
        """Close the clients, without the warnings ``distributed`` logs about a connection
        that ends (the schedulers and their jobs go on without this session); the keys
        still to release are released first, where the scheduler answers at once."""
        with self._lock:
            clients = dict(self._clients)
            self._clients.clear()
            releases, self._releases = self._releases, {}
        if clients:
            quiet_distributed()
        for address, keys in releases.items():
            if address in clients:
                from ganga_like_dask import scheduler_side

                with contextlib.suppress(Exception):
                    on_scheduler(clients[address], 2.0, scheduler_side.release, keys)
        for client in clients.values():
            with contextlib.suppress(Exception):
                client.close(timeout=2)

    def client_for(self, address: str, timeout: float) -> Any:
        """A connected client of ``address`` (kept); DaskUnreachable when it does not
        answer."""
        with self._lock:
            if not self._closing_at_exit:
                quiet_distributed()
                atexit.register(self.close)
                self._closing_at_exit = True
            client = self._clients.get(address)
            if client is not None:
                status = client.status
                if status == "running":
                    return client
                if status == "connecting":  # reconnecting to a scheduler that went away
                    raise DaskUnreachable(address, "the connection was lost; reconnecting")
                self._clients.pop(address, None)
                with contextlib.suppress(Exception):
                    client.close(timeout=1)
            client = _connect(address, timeout, self._securities.get(address))
            self._clients[address] = client
            return client

    def forget(self, address: str) -> None:
        """Drop the client of ``address`` (after a call that failed on it)."""
        with self._lock:
            client = self._clients.pop(address, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close(timeout=1)

    def call(self, address: str, timeout: float, what: Callable[[Any], Any]) -> Any:
        """``what(client)`` with the client of ``address``; a failed or late call is a
        DaskUnreachable (and the client is dropped, to be made again next time)."""
        client = self.client_for(address, timeout)
        try:
            return what(client)
        except TimeoutError as exc:
            # A late answer: the client stays (a new one would have to connect again).
            raise DaskUnreachable(address, f"no answer within {timeout:g} s") from exc
        except OSError as exc:
            self.forget(address)
            raise DaskUnreachable(address, _short(exc)) from None
        except Exception as exc:
            from distributed.comm.core import CommClosedError

            if isinstance(exc, CommClosedError):
                self.forget(address)
                raise DaskUnreachable(address, _short(exc)) from None
            raise


def quiet_distributed() -> None:
    """Keep ``distributed``'s own log lines (reconnection attempts, tracebacks of closed
    connections) off this process's stderr: a scheduler that went away is said once, in
    one line, by the monitor. On import, distributed gives several loggers a stderr
    handler of their own (``distributed``, ``distributed.client``, ``tornado``...): each
    such handler is replaced by nothing."""
    import logging

    import distributed  # noqa: F401  (configures its logging on import: undone here)

    for name, logger in list(logging.root.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger):
            continue
        if name.split(".")[0] not in ("distributed", "tornado", "bokeh"):
            continue
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _connect(address: str, timeout: float, security: Any) -> Any:
    """A new client of ``address``, made in a helper thread so that the wait is bounded:
    a scheduler that accepts the connection but does not answer (stopped) would otherwise
    hold the caller past any timeout. An abandoned client is closed when it connects."""
    from distributed import Client

    made: list[Any] = []
    failed: list[BaseException] = []
    handover = threading.Lock()
    abandoned = False

    def connect() -> None:
        try:
            client = Client(  # type: ignore[no-untyped-call]
                address, timeout=timeout, set_as_default=False, security=security
            )
        except Exception as exc:
            failed.append(exc)
            return
        with handover:
            made.append(client)
            keep = not abandoned
        if not keep:
            with contextlib.suppress(Exception):
                client.close(timeout=1)  # type: ignore[no-untyped-call]

    thread = threading.Thread(target=connect, name="ganga_like-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    with handover:
        if made:
            return made[0]
        abandoned = True
    detail = _short(failed[0]) if failed else f"no answer within {timeout:g} s"
    raise DaskUnreachable(address, detail)


def on_scheduler(client: Any, timeout: float, function: Callable[..., Any], *args: Any) -> Any:
    """``function(dask_scheduler, *args)`` in the scheduler, within ``timeout`` seconds."""
    return client.sync(client._run_on_scheduler, function, *args, callback_timeout=timeout)
