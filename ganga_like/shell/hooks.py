"""IPython hooks: one transaction per cell, and GPI errors as one line.

A cell begins a transaction (so it sees everything the monitor committed meanwhile) and
commits it when it ends. GPI actions (submit, kill, ...) still commit on their own, in
retried transactions, because a cell cannot be replayed. When the cell's commit conflicts
with another writer, the cell's own attribute changes are rolled back and a one-line
warning says so: the repository stays consistent and the user knows what was lost.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from transaction.interfaces import TransientError
from ZODB.POSException import ConflictError, ReadOnlyError

from ganga_like.errors import GangaError
from ganga_like.runtime.session import current_session, existing_session
from ganga_like.shell.terminal import colours_on

__all__ = ["CellTransactions", "show_gpi_error"]


class CellTransactions:
    """``pre_run_cell`` / ``post_run_cell`` callbacks around every cell."""

    def __init__(self, ip: Any) -> None:
        self.ip = ip
        self.rolled_back = 0  # for tests and %monitor status

    def register(self) -> None:
        self.ip.events.register("pre_run_cell", self.pre_run_cell)
        self.ip.events.register("post_run_cell", self.post_run_cell)

    def unregister(self) -> None:
        for name, callback in (
            ("pre_run_cell", self.pre_run_cell),
            ("post_run_cell", self.post_run_cell),
        ):
            with contextlib.suppress(ValueError):
                self.ip.events.unregister(name, callback)

    def pre_run_cell(self, info: Any = None) -> None:
        try:
            session = current_session()
        except GangaError:
            return  # the cell's first GPI use will report why the repository is unusable
        session.autocommit = False
        # A new transaction: the monitor's latest commits become visible to the cell.
        session.repo.connection().transaction_manager.begin()

    def post_run_cell(self, result: Any = None) -> None:
        session = existing_session()
        if session is None or session.autocommit:
            return  # no session, or one the cell itself (re)opened: nothing of ours pending
        tm = session.repo.connection().transaction_manager
        try:
            tm.commit()
        except ConflictError as exc:
            tm.abort()
            self.rolled_back += 1
            _warn(
                "this cell's changes conflicted with another change to the same jobs and "
                f"were rolled back ({_reason(exc)}); run it again"
            )
        except TransientError:  # the shared server went away in the middle of the commit
            tm.abort()
            self.rolled_back += 1
            _warn(
                "this cell's changes could not be saved (the repository server could not "
                "be reached) and were rolled back; run it again"
            )
        except ReadOnlyError:
            tm.abort()
            self.rolled_back += 1
            _warn("the repository is read-only: this cell's changes were discarded")
        except Exception as exc:  # never leave a half-committed cell behind
            tm.abort()
            self.rolled_back += 1
            _warn(
                f"this cell's changes could not be saved and were rolled back: "
                f"{type(exc).__name__}: {exc}"
            )


def _reason(exc: ConflictError) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) < 120 else text[:117] + "..."


def _warn(message: str) -> None:
    yellow, reset = ("\033[33m", "\033[0m") if colours_on(sys.stderr) else ("", "")
    print(f"{yellow}WARNING: {message}{reset}", file=sys.stderr)


def show_gpi_error(
    ip: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: int | None = None
) -> list[str]:
    """IPython custom exception handler: ``ERROR: message``, no traceback (for Ctrl-C:
    ``KeyboardInterrupt`` and what was stopped).

    ``sys.last_*`` are set as IPython does for other errors, so ``%tb`` still shows the
    full traceback, and ``%debug`` can still inspect it.
    """
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):  # pragma: no cover - Python 3.12+
        sys.last_exc = value
    # In a kernel the notebook renders the escape codes; in a terminal only when stdout is
    # one (not when piped) and NO_COLOR is not set.
    colour = getattr(ip, "colors", "NoColor") != "NoColor" and (
        colours_on(sys.stdout) or not _is_terminal(ip)
    )
    red, reset = ("\033[31m", "\033[0m") if colour else ("", "")
    if isinstance(value, KeyboardInterrupt):
        # Ctrl-C: the cell stopped where it was, which its message says if it knows.
        line = f"{red}KeyboardInterrupt{': ' if str(value) else ''}{value}{reset}"
    else:
        line = f"{red}ERROR: {value}{reset}"
    # _showtraceback is what IPython and ipykernel override to present an error: in a
    # terminal it prints the line, in a kernel it sends an error message to the notebook.
    ip._showtraceback(etype, value, [line])
    return [line]


def _is_terminal(ip: Any) -> bool:
    return getattr(ip, "pt_app", None) is not None or type(ip).__name__.startswith("Terminal")
