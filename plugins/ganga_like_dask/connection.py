"""Clients of Dask schedulers, one per address per process.

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

__all__ = [
    "DaskUnreachable",
    "call",
    "client_for",
    "forget",
    "quiet_distributed",
    "trust",
]


class DaskUnreachable(BackendError):
    """The Dask scheduler cannot be reached (transient: it may come back)."""

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(f"cannot reach the Dask scheduler at {address}: {detail}", transient=True)


_lock = threading.Lock()
_clients: dict[str, Any] = {}
# The TLS credentials of the schedulers that need them (the gangadir's own cluster).
_securities: dict[str, Any] = {}
_exit_registered = False


def trust(address: str, security: Any) -> None:
    """Connect to ``address`` with ``security`` (a ``distributed`` Security) from now on."""
    with _lock:
        _securities[address] = security


def _close_all() -> None:
    """At exit: close the clients, without the warnings ``distributed`` logs about a
    connection that ends (the schedulers and their jobs go on without this process)."""
    quiet_distributed()
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        with contextlib.suppress(Exception):
            client.close(timeout=2)


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


def client_for(address: str, timeout: float) -> Any:
    """A connected client of ``address`` (cached); DaskUnreachable when it does not answer."""
    global _exit_registered
    with _lock:
        if not _exit_registered:
            quiet_distributed()
            atexit.register(_close_all)
            _exit_registered = True
        client = _clients.get(address)
        if client is not None:
            status = client.status
            if status == "running":
                return client
            if status == "connecting":  # reconnecting to a scheduler that went away
                raise DaskUnreachable(address, "the connection was lost; reconnecting")
            _clients.pop(address, None)
            with contextlib.suppress(Exception):
                client.close(timeout=1)
        client = _connect(address, timeout, _securities.get(address))
        _clients[address] = client
        return client


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


def forget(address: str) -> None:
    """Drop the client of ``address`` (after a call that failed on it)."""
    with _lock:
        client = _clients.pop(address, None)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close(timeout=1)


def call(address: str, timeout: float, what: Callable[[Any], Any]) -> Any:
    """``what(client)`` with the client of ``address``; a failed or late call is a
    DaskUnreachable (and the client is dropped, to be made again next time)."""
    client = client_for(address, timeout)
    try:
        return what(client)
    except TimeoutError as exc:
        # A late answer: the client stays (a new one would have to connect again).
        raise DaskUnreachable(address, f"no answer within {timeout:g} s") from exc
    except OSError as exc:
        forget(address)
        raise DaskUnreachable(address, _short(exc)) from None
    except Exception as exc:
        from distributed.comm.core import CommClosedError

        if isinstance(exc, CommClosedError):
            forget(address)
            raise DaskUnreachable(address, _short(exc)) from None
        raise


def on_scheduler(client: Any, timeout: float, function: Callable[..., Any], *args: Any) -> Any:
    """``function(dask_scheduler, *args)`` in the scheduler, within ``timeout`` seconds."""
    return client.sync(client._run_on_scheduler, function, *args, callback_timeout=timeout)
