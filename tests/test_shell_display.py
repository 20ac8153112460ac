"""The shell's displays, progress reports and toolbar counts, on a real repository."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, Job, config, jobs
from ganga_like.gpi.progress import set_progress_factory
from ganga_like.gpi.proxy import unwrap
from ganga_like.runtime.session import Session
from ganga_like.shell import display
from ganga_like.shell.toolbar import Toolbar, count_jobs

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Recorder:
    """A progress factory that remembers every display it was asked for."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, bool | None, float]] = []
        self.updates: list[tuple[str, int, int | None, dict[str, int]]] = []

    def __call__(self, title: str, *, show: bool | None, delay: float) -> Any:
        self.opened.append((title, show, delay))
        recorder = self

        class Bar:
            def update(
                self,
                done: int,
                total: int | None,
                detail: str = "",
                counts: Mapping[str, int] | None = None,
            ) -> None:
                recorder.updates.append((title, done, total, dict(counts or {})))

            def close(self, summary: str = "") -> None:
                pass

        return Bar()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    previous = set_progress_factory(rec)
    yield rec
    set_progress_factory(previous)


def split_job(n: int, name: str = "scan") -> Any:
    return Job(
        name=name,
        application=Executable(exe="echo"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
    )


def test_submit_wait_and_bulk_actions_report_progress(session: Session, recorder: Recorder) -> None:
    j = split_job(5)
    j.submit()
    assert recorder.opened[0] == ("submitting job 0", None, 0.0)
    assert recorder.updates[-1][1:3] == (5, 5)
    assert j.wait(timeout=60) == "completed"
    waits = [u for u in recorder.updates if u[0] == "job 0"]
    assert waits[-1] == ("job 0", 5, 5, {"completed": 5})
    Job(name="a")
    Job(name="b")
    errors = jobs.select(name="[ab]").remove()
    assert errors == []
    assert ("removing 2 jobs", None, 0.5) in recorder.opened
    assert [u[1:3] for u in recorder.updates if u[0] == "removing 2 jobs"] == [(1, 2), (2, 2)]


def test_tables_follow_the_configured_columns_rows_and_colours(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a terminal (pytest captures stdout, and piped output gets no colours).
    monkeypatch.setattr(display, "_terminal_colours", display._colours)
    j = split_job(10)
    j.submit()
    j.wait(timeout=60)
    Job(name="fresh")
    text = display.slice_text(jobs)
    assert "\x1b[" in text  # coloured
    plain = ANSI.sub("", text)
    assert re.search(r"0\s+completed\s+scan\s+10 \(done:10\)\s+Executable\s+Local", plain)
    assert re.search(r"1\s+new\s+fresh\s+Executable\s+Local", plain)

    config.Display.columns = ["fqid", "status"]
    config.Display.colours = False
    text = display.slice_text(jobs)
    assert "\x1b[" not in text and "application" not in text and "scan" not in text

    config.Display.max_rows = 4
    sub = display.slice_text(j.subjobs)
    assert "subjobs of job 0: 10" in sub
    assert re.findall(r"0\.\d+", sub) == ["0.0", "0.1", "0.8", "0.9"]
    assert "… 6 more" in sub

    html = display.slice_html(j.subjobs)
    assert html.count("<tr>") == 1 + 4 + 1  # header, four rows, the "more" row
    assert "… 6 more …" in html


def test_job_tree_and_html_show_its_parts(session: Session) -> None:
    j = split_job(3, name="tree")
    j.comment = "checked"
    impl = unwrap(j)
    for obj in (impl, impl.application, impl.splitter):
        obj._p_deactivate()  # as after another transaction: ghosts, their state unloaded
    assert impl._p_status == "ghost"
    text = ANSI.sub("", display.job_text(j))
    assert text.splitlines()[0] == "Job 0 'tree'  new"
    for line in (
        "application: Executable",
        "exe: 'echo'",
        "backend: Local",
        "splitter: ArgSplitter",
        "args: [['0'], ['1'], ['2']]",
        "comment: 'checked'",
    ):
        assert line in text
    html = display.job_html(j)
    assert "<b>Job 0</b> &#x27;tree&#x27;" in html and "ArgSplitter" in html


def test_toolbar_counts_come_from_the_index_and_active_masters(session: Session) -> None:
    running = Job(
        name="slow",
        application=Executable(exe="sleep"),
        splitter=ArgSplitter(args=[["20"], ["20"]]),
    )
    running.submit()
    running.wait(until="running", timeout=30)
    Job(name="fresh")
    counts = count_jobs(session.registry())
    assert counts.jobs == {"running": 1, "new": 1}
    assert sum(counts.subjobs.values()) == 2 and set(counts.subjobs) <= {"submitted", "running"}
    text = "".join(part for _, part in Toolbar()())
    assert text.startswith(" jobs: 1 new, 1 running  │ subjobs: ")
    assert text.endswith("│ monitor: on")
    running.kill()


def test_an_odd_name_keeps_one_row_per_job_in_the_shell_table(session: Session) -> None:
    Job(name="first line\nsecond line")
    Job(name="y" * 5000)
    Job(name="plain")
    lines = [line for line in ANSI.sub("", display.slice_text(jobs)).splitlines() if line.strip()]
    rows = [line for line in lines if re.match(r"\s*\d+\s", line)]
    assert len(rows) == 3, lines
    assert "first line⏎second line" in rows[0] and "yyyy…" in rows[1] and "plain" in rows[2]
    assert max(len(line) for line in lines) <= 120
    html = display.slice_html(jobs)
    assert "y" * 5000 not in html and "second line" in html


_LINE_STARTS = ["", "!", "  !", "%%bash", "%%html", "%%HTML", "%%js", "%%javascript", "%%perl"]
_LINE_STARTS += ["%%ruby", "%%latex", "%%timeit", "%", "%%", "  %%html", "#"]


@settings(max_examples=60, deadline=None)
@given(
    start=st.sampled_from(_LINE_STARTS),
    body=st.text(
        alphabet=st.sampled_from(list("ab x=(){}[]'\"#\\\n\t.,:;%!$<>/*-+0129")), max_size=60
    ),
)
def test_the_shells_input_lexer_colours_every_line_as_ipythons_own(start: str, body: str) -> None:
    # The ganga shell builds the lexers of cell magics only when one is typed; what it
    # colours must not change.
    from IPython.terminal.ptutils import IPythonPTLexer
    from prompt_toolkit.document import Document

    from ganga_like.shell.input_lexer import LazyIPythonLexer

    document = Document(start + body)
    ours = LazyIPythonLexer().lex_document(document)
    ipythons = IPythonPTLexer().lex_document(document)  # type: ignore[no-untyped-call]
    for line in range(len(document.lines)):
        assert ours(line) == ipythons(line)
