"""Where ``ganga top`` gets what it shows: a thread of its own that holds the session and
does every read and action, so that the screen keeps answering keys while a read waits
for the repository (a server that is restarting makes reads wait up to 30 s).

Each pass starts a new transaction (seeing other processes' commits), reads the board
(:mod:`ganga_like.runtime.stats.board`: no subjob loaded) and, for the one job open on
the screen, its stats (one pass over its subjobs, so at most every few seconds for a
large master), then hands them to the screen. Actions (kill, resubmit) are queued to the
same thread: the session is used by one thread only.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganga_like.errors import GangaError, RepositoryBusyError
from ganga_like.model.job import Job
from ganga_like.runtime.monitoring import daemon
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like.runtime.stats import JobStats, job_stats
from ganga_like.runtime.stats.board import BoardRow, board_rows

__all__ = ["Action", "Snapshot", "TopSource", "output_tail", "read_board"]

Action = Callable[[Session], str]
# A job's stats are read again after at least this many times what the last read took.
STATS_SPACING = 5.0
# Seconds between looks at whether anyone monitors the jobs (holds the monitor lease).
MONITOR_LOOK = 10.0


@dataclass(frozen=True)
class Snapshot:
    """What one pass read: the board, the open job's stats, and what the pass cost."""

    taken_at: float
    rows: list[BoardRow]
    seconds: float  # the board's read, the new transaction included
    stats: JobStats | None = None
    stats_of: int | None = None
    jobs_total: int = 0
    monitored: bool | None = None  # whether a session or the daemon monitors; None: unknown


class TopSource:
    """The reading thread. ``on_snapshot``, ``on_problem`` and ``on_done`` are called from
    it (the screen hands them over to its own thread)."""

    def __init__(
        self,
        settings: Settings,
        interval: float,
        recent: float,
        on_snapshot: Callable[[Snapshot], None],
        on_problem: Callable[[str | None], None],
    ) -> None:
        self.settings = settings
        self.interval = interval
        self.recent = recent
        self.on_snapshot = on_snapshot
        self.on_problem = on_problem
        self.open_job: int | None = None
        self._actions: queue.Queue[tuple[Action, Callable[[str], None]] | None] = queue.Queue()
        self._stop = threading.Event()
        self._shown: set[int] = set()
        self._stats_due = 0.0
        self._stats_for: int | None = None
        self.monitor_look = MONITOR_LOOK
        self._monitored: bool | None = None
        self._monitor_due = 0.0
        self._thread = threading.Thread(target=self._run, name="ganga-top-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to close the session and end, without waiting for it."""
        self._stop.set()
        self._actions.put(None)

    def stop(self, timeout: float) -> bool:
        """Ask the thread to end; whether it did within ``timeout`` (or never started)."""
        self.request_stop()
        if self._thread.ident is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def act(self, action: Action, on_done: Callable[[str], None]) -> None:
        """Run ``action`` on the session at the thread's next turn; ``on_done`` gets the
        line it returned, or the error's."""
        self._actions.put((action, on_done))

    def wake(self) -> None:
        """Read again now (the open job changed)."""
        self._stats_due = 0.0
        self._actions.put((lambda _s: "", lambda _line: None))

    # -- the thread ------------------------------------------------------------------

    def _run(self) -> None:
        session = self._open()
        if session is None:
            return
        try:
            while not self._stop.is_set():
                self._pass(session)
                self._wait_and_act(session)
        finally:
            close_session()

    def _open(self) -> Session | None:
        """The session, retried until it opens or the thread is stopped."""
        while not self._stop.is_set():
            try:
                session = open_session(self.settings)
            except RepositoryBusyError as exc:
                self.on_problem(f"repository busy: {_first_line(exc)} (trying again)")
            except GangaError as exc:
                self.on_problem(f"repository not readable: {_first_line(exc)} (trying again)")
            else:
                self.on_problem(None)
                return session
            self._stop.wait(max(self.interval, 2.0))
        return None

    def _pass(self, session: Session) -> None:
        start = time.monotonic()
        try:
            now = time.time()
            rows, jobs_total = read_board(session, now, self.recent, self._shown)
            seconds = time.monotonic() - start
            stats, stats_of = self._stats(session.registry())
        except Exception as exc:  # whatever a read raised (a server gone): said, retried
            self.on_problem(f"repository not readable: {_first_line(exc)} (trying again)")
            return
        self._shown = {row.job_id for row in rows}
        self.on_problem(None)
        monitored = self._look_at_monitor()
        self.on_snapshot(Snapshot(now, rows, seconds, stats, stats_of, jobs_total, monitored))

    def _look_at_monitor(self) -> bool | None:
        """Whether someone holds the monitor lease (statuses move only then), looked at
        every ``monitor_look`` seconds."""
        if time.monotonic() >= self._monitor_due:
            self._monitor_due = time.monotonic() + self.monitor_look
            try:
                found = daemon.status(Path(self.settings.gangadir), self.settings.repository_url)
                self._monitored = found.lease is not None
            except Exception:  # the lease cannot be read: not known, nothing said
                self._monitored = None
        return self._monitored

    def _stats(self, registry: Any) -> tuple[JobStats | None, int | None]:
        """The open job's stats, read again only once they are due."""
        wanted = self.open_job
        if wanted is None:
            return None, None
        if wanted == self._stats_for and time.monotonic() < self._stats_due:
            return None, wanted  # the screen keeps the ones it has
        job = registry.get(wanted)
        if not isinstance(job, Job):
            return None, None
        start = time.monotonic()
        stats = job_stats([job], f"job {job.fqid}")
        took = time.monotonic() - start
        self._stats_for = wanted
        self._stats_due = time.monotonic() + max(self.interval, STATS_SPACING * took)
        return stats, wanted

    def _wait_and_act(self, session: Session) -> None:
        """Wait for the next pass, running the actions that come meanwhile."""
        deadline = time.monotonic() + self.interval
        while not self._stop.is_set():
            try:
                item = self._actions.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if item is None:
                return
            action, on_done = item
            try:
                session.repo.abort()
                line = action(session)
            except Exception as exc:  # refused (a GangaError) or failed: said in one line
                line = _first_line(exc)
            on_done(line)
            return  # read again at once: the action changed what is shown


def read_board(
    session: Session, now: float, recent: float, shown: set[int]
) -> tuple[list[BoardRow], int]:
    """One refresh's read: the board's rows and how many jobs the repository holds."""
    # A round trip to the server first: every commit made before it is seen (a server
    # that stopped answering is noticed here, not hidden by the cache).
    session.repo.catch_up()
    session.repo.abort()  # a new transaction: other processes' commits
    registry = session.registry()
    return board_rows(registry, now, recent, shown), len(registry.jobs)


def output_tail(session: Session, fqid: str, lines: int) -> str:
    """The last ``lines`` lines of a job's or subjob's stdout (and stderr, if any), or
    a line saying why there are none."""
    head, _, tail = fqid.partition(".")
    job = session.registry().lookup(int(head), int(tail) if tail else None)
    if not isinstance(job, Job):
        return f"no job {fqid}"
    output = session.submit_context().paths(job).output
    parts = []
    for stream in ("stdout", "stderr"):
        text = _tail(output / stream, lines)
        if text:
            parts.append(f"--- last {len(text)} line(s) of {stream} of {fqid}\n" + "\n".join(text))
    return "\n".join(parts) or f"{fqid} has no output yet ({output})"


def _tail(path: Path, lines: int) -> list[str] | None:
    """The last lines of a file, reading at most its last 64 KiB."""
    try:
        with path.open("rb") as stream:
            stream.seek(0, 2)
            size = stream.tell()
            stream.seek(max(0, size - 65536))
            data = stream.read()
    except OSError:
        return None
    return data.decode(errors="replace").splitlines()[-lines:]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
