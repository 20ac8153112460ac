"""``ganga top``: a live full-screen view of the repository's active jobs (Textual).

The list shows each live job, and those that ended lately, with its progress, how many
(sub)jobs end per minute and the time left; Enter opens a job (its stats: counts, slowest
subjobs, failure groups, resources), o shows a subjob's output, k kills a job, r
resubmits a failure group and x kills those of a group that run again, each after a
yes/no question; q quits. Everything it reads
and does goes through :class:`ganga_like.commands.top_source.TopSource`, on a thread of
its own, so keys are answered while the repository is slow or away; the screen says so
in one line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Footer, Static

from ganga_like.commands.top_actions import grown, kill_group, kill_job, resubmit_group
from ganga_like.commands.top_screens import ConfirmScreen, JobScreen, PeekScreen
from ganga_like.commands.top_source import Snapshot, TopSource, output_tail
from ganga_like.commands.top_text import JOB_COLUMNS, job_cells
from ganga_like.runtime.session import Session
from ganga_like.runtime.settings import Settings
from ganga_like.runtime.stats.board import LIVE, BoardRow
from ganga_like.runtime.stats.data import FailureGroup

__all__ = ["TopApp"]

# Said while jobs are live and nobody monitors them: what is shown does not move then.
UNMONITORED = (
    "nobody monitors these jobs now: statuses move once a session or the monitor daemon "
    "follows them (ganga monitor start)"
)
# Lines of a subjob's output shown.
PEEK_LINES = 40
# A read that has not come back after this many refresh intervals (and at least this many
# seconds) is said to be waiting.
STALE_INTERVALS, STALE_SECONDS = 3, 5.0


class Fresh(Message):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class Problem(Message):
    def __init__(self, line: str | None) -> None:
        super().__init__()
        self.line = line


class Done(Message):
    """An action's line; ``peek``: the output of that fqid."""

    def __init__(self, line: str, peek: str | None = None) -> None:
        super().__init__()
        self.line = line
        self.peek = peek


class JobsTable(DataTable[str | Text]):
    """The list of jobs; Enter (shown in the help line) opens the one under the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "open job")]


class TopApp(App[None]):
    TITLE = "ganga top"
    # Every key is in the help line; the command palette would be one more to learn.
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "kill_selected", "kill job"),
        Binding("q", "quit", "quit"),
        # As in top and less: Ctrl-C leaves at once, from any screen, question or not
        # (Textual's own answer is a hint to press Ctrl-Q instead).
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]
    CSS = """
    #title { height: 1; background: $primary-background; }
    #problem { height: auto; color: $error; text-style: bold; }
    #unmonitored { height: auto; color: $warning; display: none; }
    #jobs { height: 1fr; }
    #message { height: auto; }
    """

    def __init__(self, settings: Settings, interval: float, recent: float, job: int | None) -> None:
        super().__init__()
        self.gangadir = str(settings.gangadir)
        self.source = TopSource(settings, interval, recent, self._fresh, self._problem)
        self.rows: list[BoardRow] = []
        self.snapshot: Snapshot | None = None
        self.problem: str | None = None
        self.first_job = job
        self.job_screen: JobScreen | None = None
        self.peek_screen: PeekScreen | None = None
        # Per job, the failure groups resubmitted from here (appended on the reading thread).
        self.resubmitted_groups: dict[int, list[FailureGroup]] = {}

    # -- called from the reading thread: handed over as messages (thread-safe) -----------

    def _fresh(self, snapshot: Snapshot) -> None:
        self.post_message(Fresh(snapshot))

    def _problem(self, line: str | None) -> None:
        self.post_message(Problem(line))

    def _done(self, line: str, peek: str | None = None) -> None:
        self.post_message(Done(line, peek))

    # -- the screen ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(f"ganga top  reading…  {self.gangadir}", id="title", markup=False)
        yield Static("", id="problem", markup=False)
        yield Static(UNMONITORED, id="unmonitored", markup=False)
        # The bar keeps its colours on the cursor's row too.
        yield JobsTable(
            id="jobs",
            cursor_type="row",
            zebra_stripes=True,
            cursor_foreground_priority="renderable",
        )
        yield Static("", id="message", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#jobs", DataTable)
        for column in JOB_COLUMNS:
            table.add_column(column, key=column)
        table.focus()
        self.set_interval(1.0, self._check_stale)
        self.source.start()
        if self.first_job is not None:
            self.open_job(self.first_job)

    def on_unmount(self) -> None:
        self.source.request_stop()  # the caller waits for it, a bounded time

    def on_fresh(self, message: Fresh) -> None:
        snapshot = message.snapshot
        self.snapshot = snapshot
        self.rows = snapshot.rows
        self._show_rows(snapshot)
        live = sum(row.live for row in snapshot.rows)
        stamp = time.strftime("%H:%M:%S", time.localtime(snapshot.taken_at))
        self.query_one("#title", Static).update(
            f"ganga top  {live} active, {len(snapshot.rows) - live} ended lately, "
            f"{snapshot.jobs_total} jobs  read at {stamp} in {snapshot.seconds * 1000:.0f} ms"
            f"  {self.gangadir}"
        )
        screen = self.job_screen
        waiting = snapshot.monitored is False and live > 0
        self.query_one("#unmonitored", Static).display = waiting
        stats = snapshot.stats
        if screen is not None and stats is not None and snapshot.stats_of == screen.job_id:
            screen.show(stats)

    def _show_rows(self, snapshot: Snapshot) -> None:
        """The rows again, the cursor kept on the job it was on."""
        table = self.query_one("#jobs", DataTable)
        chosen = self.selected_job()
        table.clear()
        for row in snapshot.rows:
            table.add_row(*job_cells(row, snapshot.taken_at), key=str(row.job_id))
        if chosen is not None and str(chosen) in table.rows:
            table.move_cursor(row=table.get_row_index(str(chosen)))

    def on_problem(self, message: Problem) -> None:
        self.problem = message.line
        self._show_problem(message.line or "")

    def _show_problem(self, line: str) -> None:
        """The problem line, taking no room while there is none."""
        problem = self.query_one("#problem", Static)
        problem.update(line)
        problem.display = bool(line)

    def on_done(self, message: Done) -> None:
        if message.peek is not None:
            if self.peek_screen is not None and self.peek_screen.fqid == message.peek:
                self.peek_screen.show(message.line)
            return
        self.say(message.line)

    def _check_stale(self) -> None:
        """Say so when a read has not come back for a while (the server restarting)."""
        last = self.snapshot.taken_at if self.snapshot is not None else None
        waited = time.time() - last if last is not None else 0.0
        limit = max(STALE_SECONDS, STALE_INTERVALS * self.source.interval)
        if last is not None and waited > limit and self.problem is None:
            self._show_problem(
                f"repository not answering for {waited:.0f} s: showing what was read at "
                f"{time.strftime('%H:%M:%S', time.localtime(last))}"
            )
        elif self.problem is None:
            self._show_problem("")

    def say(self, line: str) -> None:
        """Under the list, and under the open job (which hides the list) too."""
        self.query_one("#message", Static).update(Text(line))
        if self.job_screen is not None:
            self.job_screen.say(line)

    # -- keys ----------------------------------------------------------------------------

    def selected_job(self) -> int | None:
        table = self.query_one("#jobs", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return int(key) if key is not None else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "jobs" and event.row_key.value is not None:
            self.open_job(int(event.row_key.value))

    def action_kill_selected(self) -> None:
        chosen = self.selected_job()
        if chosen is None:
            self.say("no job to kill")
            return
        self.kill(chosen)

    # -- what the job screen asks for (top_screens.Controls) -----------------------------

    def open_job(self, job_id: int) -> None:
        self.job_screen = JobScreen(job_id)
        self.source.open_job = job_id
        self.source.wake()
        self.push_screen(self.job_screen)

    def close_job(self) -> None:
        self.source.open_job = None
        self.job_screen = None
        self.pop_screen()

    def peek(self, fqid: str) -> None:
        self.peek_screen = PeekScreen(fqid)
        self.push_screen(self.peek_screen, lambda _none: self._peek_closed())
        self.source.act(
            lambda session: output_tail(session, fqid, PEEK_LINES),
            lambda text: self._done(text, peek=fqid),
        )

    def _peek_closed(self) -> None:
        self.peek_screen = None

    def kill(self, job_id: int) -> None:
        row = next((r for r in self.rows if r.job_id == job_id), None)
        # Not listed (it ended long ago): the open job's stats tell as much.
        open_job = self.job_screen
        stats = open_job.stats if open_job is not None and open_job.job_id == job_id else None
        counts = row.counts if row is not None else stats.counts if stats is not None else None
        if counts is not None and not any(n for label, n in counts.items() if label in LIVE):
            status = f" ({row.status})" if row is not None else ""
            self.say(
                f"job {job_id}{status}: none of its {sum(counts.values())} (sub)job(s) is "
                "still to end; nothing to kill"
            )
            return
        what = f" ({row.remaining} of {row.total} not ended)" if row is not None else ""
        self.ask(
            f"kill job {job_id}{what}?",
            lambda: self.source.act(lambda session: kill_job(session, job_id), self._done),
        )

    def resubmit_group(self, job_id: int, group: FailureGroup) -> None:
        def resubmit(session: Session) -> str:
            line = resubmit_group(session, job_id, group)
            self.resubmitted_groups.setdefault(job_id, []).append(group)
            return line

        self.ask(
            f"resubmit the {group.count} subjob(s) of job {job_id} in failure group "
            f"{group.number} ({group.reason}){grown(group)}?",
            lambda: self.source.act(resubmit, self._done),
        )

    def kill_group(self, job_id: int, group: FailureGroup) -> None:
        self.ask(
            f"kill those of the {group.count} subjob(s) of job {job_id} in failure group "
            f"{group.number} ({group.reason}) that run again?",
            lambda: self.source.act(lambda session: kill_group(session, job_id, group), self._done),
        )

    def resubmitted(self, job_id: int) -> list[FailureGroup]:
        return list(self.resubmitted_groups.get(job_id, ()))

    def ask(self, question: str, then: Callable[[], None]) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.say(f"{question.rstrip('?')}: under way…")
                then()
            else:
                self.say("nothing done")

        self.push_screen(ConfirmScreen(question), answered)
