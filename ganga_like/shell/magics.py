"""Magics of the ganga shell and notebooks: ``%jobs``, ``%monitor``, ``%ganga``."""

from __future__ import annotations

import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from ganga_like.config.sections import Monitor as MonitorSection
from ganga_like.config.store import store
from ganga_like.runtime.session import current_session
from ganga_like.shell.user_script import run_script

__all__ = ["GangaMagics"]


@magics_class
class GangaMagics(Magics):
    """The ganga magics."""

    @line_magic  # type: ignore[untyped-decorator]
    def jobs(self, line: str) -> None:
        """Show the jobs table, optionally only the jobs matching a query.

        Usage::

            %jobs                                   every job
            %jobs status=failed                     failed jobs
            %jobs name~scan*; time.submitted>2d-ago
            %jobs id=10..20; backend=Local

        The filter is the query language of ``jobs.query()`` (docs/query-language.md):
        conditions separated by ``;``, all of which must hold.
        """
        from IPython.display import display

        from ganga_like.gpi.jobs_registry import jobs

        display(jobs.query(line) if line.strip() else jobs)  # type: ignore[no-untyped-call]

    @line_magic  # type: ignore[untyped-decorator]
    def monitor(self, line: str) -> None:
        """Control the monitoring thread that keeps job statuses current.

        Usage::

            %monitor status     is it running, cycles done, poll interval, stale backends
            %monitor on         start it (same as config.Monitor.enabled = True)
            %monitor off        stop it; jobs keep running, statuses stop changing
            %monitor once       poll every backend once now, even when it is off
        """
        command = line.strip() or "status"
        if command == "on":
            store.set("Monitor", "enabled", True)
            print(_status_line())
        elif command == "off":
            store.set("Monitor", "enabled", False)
            print(_status_line())
        elif command == "status":
            print(_status_line())
        elif command == "once":
            session = current_session()
            result = session.monitor.run_once()
            session.sync()  # show the cell what this poll just committed
            print(
                f"monitor: polled {result.polled} active (sub)jobs, {result.changed} "
                "changed" + _stale_text(result.stale_backends)
            )
        else:
            raise UsageError(f"%monitor {command}: expected on, off, status or once")

    @line_magic  # type: ignore[untyped-decorator]
    def ganga(self, line: str) -> None:
        """Run a ganga script here, as ``ganga script.py args`` would.

        Usage::

            %ganga script.py [args ...]

        The script starts with the shell's names (the GPI and your variables) and
        ``sys.argv == [script.py, args...]``; its variables are then kept in the shell,
        like ``%run``. A GPI error prints one line; ``sys.exit(n)`` reports n.
        """
        argv = shlex.split(line)
        if not argv:
            raise UsageError("%ganga script.py [args ...]")
        shell: Any = self.shell
        status, names = run_script(argv[0], argv[1:], shell.user_ns)
        shell.user_ns.update({k: v for k, v in names.items() if not k.startswith("__")})
        if status:
            print(f"{argv[0]} exited with status {status}")


def _status_line() -> str:
    session = current_session()
    monitor = session.monitor
    intervals = session.config[MonitorSection]
    state = "running" if monitor.running else "stopped"
    if session.repo.read_only:
        state += " (read-only repository: nothing to monitor)"
    active = len(session.registry().active)
    return (
        f"monitor: {state}; {monitor.cycles} cycles, {monitor.cpu_seconds:.2f} s CPU; "
        f"polls every {intervals.min_interval:g}-{intervals.max_interval:g}"
        f" s; {active} active (sub)jobs" + _stale_text(monitor.stale_backends)
    )


def _stale_text(stale: dict[str, Any]) -> str:
    if not stale:
        return ""
    return "; unreachable: " + ", ".join(f"{name} ({reason})" for name, reason in stale.items())
