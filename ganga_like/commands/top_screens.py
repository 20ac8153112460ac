"""The screens ``ganga top`` opens over its list of jobs: one job's stats, a subjob's
output, and the yes/no question asked before a kill or a resubmission."""

from __future__ import annotations

from typing import ClassVar, Protocol, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Static

from ganga_like.commands.top_text import stats_lines
from ganga_like.runtime.stats import JobStats
from ganga_like.runtime.stats.data import FailureGroup, SlowRun, duration

__all__ = ["ConfirmScreen", "Controls", "JobScreen", "PeekScreen"]

SHOWN_IDS = 8  # subjob ids shown in a failure group's row
Row = tuple[str, str, str]  # what, subjob(s), detail


class ConfirmScreen(ModalScreen[bool]):
    """A question answered with y (yes) or n / Escape (no)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "no", show=False),
    ]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 80%; height: auto; border: thick $warning; padding: 1 2; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.question, style="bold"), id="question")
            yield Static("y: yes   n or Esc: no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PeekScreen(ModalScreen[None]):
    """A subjob's output tail; Escape or q goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,o", "close", "back"),
    ]
    DEFAULT_CSS = """
    PeekScreen > Vertical { border: round $accent; height: 100%; }
    PeekScreen Static { height: auto; }
    """

    def __init__(self, fqid: str) -> None:
        super().__init__()
        self.fqid = fqid

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"output of {self.fqid}: reading…", id="output", markup=False)
        yield Footer()

    def show(self, text: str) -> None:
        self.query_one("#output", Static).update(Text(text))

    def action_close(self) -> None:
        self.dismiss(None)


class Controls(Protocol):
    """What the job screen asks of the application."""

    def close_job(self) -> None: ...
    def say(self, line: str) -> None: ...
    def peek(self, fqid: str) -> None: ...
    def kill(self, job_id: int) -> None: ...
    def resubmit_group(self, job_id: int, group: FailureGroup) -> None: ...
    def kill_group(self, job_id: int, group: FailureGroup) -> None: ...
    def resubmitted(self, job_id: int) -> list[FailureGroup]: ...


class JobScreen(Screen[None]):
    """One job's stats: counts, time left, run times, resources; then its slowest
    subjobs, its failure groups and the groups resubmitted from here, as rows to pick
    (o: output, r: resubmit a group, x: kill those of a group that run again)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "back"),
        Binding("o", "peek", "output"),
        Binding("r", "resubmit", "resubmit group"),
        Binding("x", "kill_group", "kill group"),
        Binding("k", "kill", "kill job"),
        Binding("q", "app.quit", "quit"),
    ]
    DEFAULT_CSS = """
    JobScreen #summary { height: auto; padding: 0 1; }
    JobScreen #picks { height: 1fr; }
    JobScreen #said { height: auto; }
    """

    def __init__(self, job_id: int) -> None:
        super().__init__()
        self.job_id = job_id
        self.stats: JobStats | None = None
        # What each row showed, by its key: what a key pressed on that row acts on.
        self.shown: dict[str, SlowRun | FailureGroup] = {}

    @property
    def top(self) -> Controls:
        return cast(Controls, self.app)

    def compose(self) -> ComposeResult:
        yield Static(f"job {self.job_id}: reading its stats…", id="summary", markup=False)
        yield DataTable(id="picks", cursor_type="row", zebra_stripes=True)
        # What a key did or why it did nothing: this screen hides the list's own line.
        yield Static("", id="said", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#picks", DataTable)
        table.add_columns("what", "subjob(s)", "detail")
        table.focus()

    def show(self, stats: JobStats) -> None:
        """New stats of the job: the summary and the rows again, the cursor kept on the
        item it was on (the slowest reorder while the job runs), else on its row."""
        self.stats = stats
        self.query_one("#summary", Static).update(Text("\n".join(stats_lines(stats))))
        table = self.query_one("#picks", DataTable)
        kept, kept_key = table.cursor_row, self._cursor_key()
        table.clear()
        self.shown = {}
        for slow in stats.slowest:
            detail = f"{duration(slow.seconds)} {slow.status}"
            self._add(table, f"slow:{slow.fqid}", slow, ("slowest", slow.fqid, detail))
        for group in stats.failures:
            shown = ", ".join(group.fqids[:SHOWN_IDS])
            more = f" … {group.count - SHOWN_IDS} more" if group.count > SHOWN_IDS else ""
            cells = (f"failed #{group.number} ({group.count})", shown + more, group.reason)
            # Named by what it is (its numbers shift as groups come and go).
            self._add(table, f"group:{group.exit_code}:{group.reason}", group, cells)
        # A resubmitted group leaves the failures while it runs again: kept here so that
        # x can still kill it.
        for n, group in enumerate(self.top.resubmitted(self.job_id)):
            cells = (
                f"resubmitted #{group.number} ({group.count})",
                ", ".join(group.fqids[:SHOWN_IDS]),
                f"{group.reason}; x kills those running again",
            )
            self._add(table, f"again:{n}", group, cells)
        if kept_key in self.shown:
            table.move_cursor(row=table.get_row_index(kept_key))
        elif table.row_count:
            table.move_cursor(row=min(kept, table.row_count - 1))

    def say(self, line: str) -> None:
        if self.is_mounted:
            self.query_one("#said", Static).update(Text(line))

    def _add(
        self, table: DataTable[str], key: str, item: SlowRun | FailureGroup, cells: Row
    ) -> None:
        if key not in self.shown:  # two groups alike would be one row's key twice
            self.shown[key] = item
            table.add_row(*cells, key=key)

    def _cursor_key(self) -> str | None:
        table = self.query_one("#picks", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def _picked(self) -> tuple[str, SlowRun | FailureGroup] | None:
        """(kind, item) of the row under the cursor, as it was shown: ("slow", a
        SlowRun), ("group", a FailureGroup) or ("again", a resubmitted FailureGroup)."""
        key = self._cursor_key()
        if key is None or key not in self.shown:
            return None
        return key.partition(":")[0], self.shown[key]

    def action_back(self) -> None:
        self.top.close_job()

    def action_peek(self) -> None:
        picked = self._picked()
        if picked is None:
            self.top.say("no subjob to show: pick a slowest subjob or a failure group")
            return
        item = picked[1]
        self.top.peek(item.fqid if isinstance(item, SlowRun) else item.fqids[0])

    def _refuse_group_key(self, key: str, doing: str, kind: str | None) -> None:
        """Say what the key acts on, and what the cursor is on instead."""
        if self.stats is not None and not self.stats.failures and kind is None:
            self.top.say(f"{key} {doing}s a failure group: job {self.job_id} has none")
            return
        on = {"slow": "a slowest subjob", "again": "a resubmitted group"}.get(kind or "", "no row")
        self.top.say(f"{key} {doing}s a failure group: move to a 'failed #N' row (this is {on})")

    def action_resubmit(self) -> None:
        picked = self._picked()
        if picked is None or picked[0] != "group" or isinstance(picked[1], SlowRun):
            self._refuse_group_key("r", "resubmit", picked[0] if picked else None)
            return
        self.top.resubmit_group(self.job_id, picked[1])

    def _picked_group(self, doing: str) -> FailureGroup | None:
        """The failure group (or resubmitted group) under the cursor, or None, said."""
        picked = self._picked()
        if picked is not None and isinstance(picked[1], FailureGroup):
            return picked[1]
        self._refuse_group_key("x", doing, picked[0] if picked else None)
        return None

    def action_kill_group(self) -> None:
        group = self._picked_group("kill")
        if group is not None:
            self.top.kill_group(self.job_id, group)

    def action_kill(self) -> None:
        self.top.kill(self.job_id)
