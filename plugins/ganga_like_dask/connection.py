"""Clients of Dask schedulers, one per address per process, and the session's LocalCluster.

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
    "local_cluster_address",
    "own_cluster_address",
]


class DaskUnreachable(BackendError):
    """The Dask scheduler cannot be reached (transient: it may come back)."""

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(f"cannot reach the Dask scheduler at {address}: {detail}", transient=True)


_lock = threading.Lock()
_clients: dict[str, Any] = {}
_cluster: Any = None
_exit_registered = False


def local_cluster_address(n_workers: int, threads_per_worker: int) -> str:
    """The address of this process's LocalCluster, started on first use and kept for the
    rest of the process (the jobs it runs end with it)."""
    global _cluster, _exit_registered
    with _lock:
        if _cluster is None or _cluster.status.name in ("closing", "closed", "failed"):
            from distributed import LocalCluster

            if not _exit_registered:
                atexit.register(_close_all)
                _exit_registered = True
            _cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                processes=True,
                dashboard_address=None,
            )
        address: str = _cluster.scheduler_address
        return address


def _close_all() -> None:
    """At exit: close clients, then the LocalCluster, without the warnings ``distributed``
    logs about workers leaving with results still held (by design: see scheduler_side)."""
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    if _cluster is not None:
        from ganga_like_dask import task

        # The subjobs still running on it end with it, not as orphans of its workers.
        with contextlib.suppress(Exception), _cluster.get_client() as own:
            own.run(task.kill_all)
    for client in clients:
        with contextlib.suppress(Exception):
            client.close(timeout=2)
    if _cluster is not None:
        with contextlib.suppress(Exception):
            _cluster.close(timeout=5)


def own_cluster_address() -> str:
    """The address of this process's LocalCluster, "" when it has none."""
    cluster = _cluster
    return str(cluster.scheduler_address) if cluster is not None else ""


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def client_for(address: str, timeout: float) -> Any:
    """A connected client of ``address`` (cached); DaskUnreachable when it does not answer."""
    with _lock:
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
        client = _connect(address, timeout)
        _clients[address] = client
        return client


def _connect(address: str, timeout: float) -> Any:
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
                address, timeout=timeout, set_as_default=False
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
