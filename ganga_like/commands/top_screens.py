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
from ganga_like.runtime.stats.data import FailureGroup, duration

__all__ = ["ConfirmScreen", "Controls", "JobScreen", "PeekScreen"]

SHOWN_IDS = 8  # subjob ids shown in a failure group's row


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
    """

    def __init__(self, job_id: int) -> None:
        super().__init__()
        self.job_id = job_id
        self.stats: JobStats | None = None

    @property
    def top(self) -> Controls:
        return cast(Controls, self.app)

    def compose(self) -> ComposeResult:
        yield Static(f"job {self.job_id}: reading its stats…", id="summary", markup=False)
        yield DataTable(id="picks", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#picks", DataTable)
        table.add_columns("what", "subjob(s)", "detail")
        table.focus()

    def show(self, stats: JobStats) -> None:
        """New stats of the job: the summary and the rows again, the cursor kept."""
        self.stats = stats
        self.query_one("#summary", Static).update(Text("\n".join(stats_lines(stats))))
        table = self.query_one("#picks", DataTable)
        kept = table.cursor_row
        table.clear()
        for n, slow in enumerate(stats.slowest):
            table.add_row(
                "slowest", slow.fqid, f"{duration(slow.seconds)} {slow.status}", key=f"slow-{n}"
            )
        for n, group in enumerate(stats.failures):
            shown = ", ".join(group.fqids[:SHOWN_IDS])
            more = f" … {group.count - SHOWN_IDS} more" if group.count > SHOWN_IDS else ""
            table.add_row(
                f"failed #{group.number} ({group.count})",
                shown + more,
                group.reason,
                key=f"group-{n}",
            )
        # A resubmitted group leaves the failures while it runs again: kept here so that
        # x can still kill it.
        for n, group in enumerate(self.top.resubmitted(self.job_id)):
            table.add_row(
                f"resubmitted #{group.number} ({group.count})",
                ", ".join(group.fqids[:SHOWN_IDS]),
                f"{group.reason}; x kills those running again",
                key=f"again-{n}",
            )
        if table.row_count:
            table.move_cursor(row=min(kept, table.row_count - 1))

    def _picked(self) -> tuple[str, int] | None:
        """(kind, index) of the row under the cursor: ("slow", n) or ("group", n)."""
        table = self.query_one("#picks", DataTable)
        if self.stats is None or not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or ""
        kind, _, index = key.partition("-")
        return kind, int(index)

    def action_back(self) -> None:
        self.top.close_job()

    def action_peek(self) -> None:
        picked = self._picked()
        if picked is None or self.stats is None:
            self.top.say("no subjob to show: pick a slowest subjob or a failure group")
            return
        kind, index = picked
        if kind == "slow":
            fqid = self.stats.slowest[index].fqid
        elif kind == "again":
            fqid = self.top.resubmitted(self.job_id)[index].fqids[0]
        else:
            fqid = self.stats.failures[index].fqids[0]
        self.top.peek(fqid)

    def action_resubmit(self) -> None:
        picked = self._picked()
        if picked is None or picked[0] != "group" or self.stats is None:
            self.top.say("pick a failure group (a 'failed' row) to resubmit it")
            return
        self.top.resubmit_group(self.job_id, self.stats.failures[picked[1]])

    def _picked_group(self, doing: str) -> FailureGroup | None:
        """The failure group (or resubmitted group) under the cursor, or None, said."""
        picked = self._picked()
        if picked is not None and picked[0] == "group" and self.stats is not None:
            return self.stats.failures[picked[1]]
        if picked is not None and picked[0] == "again":
            return self.top.resubmitted(self.job_id)[picked[1]]
        self.top.say(f"pick a failure group (a 'failed' row) to {doing} it")
        return None

    def action_kill_group(self) -> None:
        group = self._picked_group("kill")
        if group is not None:
            self.top.kill_group(self.job_id, group)

    def action_kill(self) -> None:
        self.top.kill(self.job_id)
