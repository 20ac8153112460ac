"""``j.report("run.html")``: one self-contained HTML file with a job's plots and tables,
written from a real Local run; opened by a real headless Chromium where one is installed,
which takes the picture of it (kept: :mod:`tests.screenshots`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, JobError, SchemaError, jobs
from ganga_like.runtime.session import Session

from .screenshots import keep
from .test_stats import RUNS, hungry_job

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# A tag that would fetch something: <script src=...> or <link href=...> to a server.
FETCHING = re.compile(
    r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.I
)


def test_the_report_of_a_split_job_holds_its_plots_and_numbers_and_fetches_nothing(
    session: Session, tmp_path: Path
) -> None:
    j = hungry_job(RUNS)
    j.submit()
    assert j.wait(timeout=120) == "failed"
    written = j.report(tmp_path / "run.html")
    assert written == str(tmp_path / "run.html")
    text = Path(written).read_text()
    assert not FETCHING.search(text)
    assert not list(tmp_path.glob(".*.part"))  # written aside, then renamed
    assert text.count('class="plotly-graph-div"') == 4
    assert f"stats of job {j.id}: 5 subjobs" in text
    assert "completed 2  failed 3" in text
    assert '"type":"heatmap"' in text and f"{j.id}.2 failed" in text
    # The failure groups' table: count, exit code, cause, the subjobs.
    assert (
        f'<td class="n">2</td><td class="n">3</td><td>exit code 3</td><td>{j.id}.2, {j.id}.3</td>'
        in text
    )
    # What each run used, largest peak memory first.
    first = text.split("<th>cpu</th></tr>")[-1]
    assert re.match(
        rf"<tr><td>{j.id}\.0</td><td class=\"n\">-</td><td class=\"n\">1[5-9]\d\.\d MiB", first
    )
    # A slice and all jobs: the same file, of their jobs.
    failed = j.subjobs.select(status="failed").report(str(tmp_path / "failed.html"))
    assert "completed" not in Path(failed).read_text().split("<h2>")[1]
    assert "stats of jobs" in Path(jobs.report(tmp_path / "all.html")).read_text()


def test_bad_report_paths_are_refused_in_one_line_and_nothing_is_written(
    session: Session, tmp_path: Path
) -> None:
    j = Job()
    tmp_path = tmp_path / "reports"
    tmp_path.mkdir()
    with pytest.raises(SchemaError) as given:
        j.report(3)
    assert (
        str(given.value)
        == "j.report(): path expected a file name such as 'run.html', not the int 3"
    )
    with pytest.raises(SchemaError, match=r"is a directory; give a file name such as"):
        j.report(tmp_path)
    with pytest.raises(
        SchemaError, match=r"^j.report\(\): no directory .*/nowhere to write run.html in$"
    ):
        j.report(tmp_path / "nowhere" / "run.html")
    with pytest.raises(SchemaError) as empty:
        j.report("")
    assert str(empty.value) == "j.report(): path is empty; give a file name such as 'run.html'"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="no /proc (not Linux)")
def test_a_report_its_directory_takes_no_file_in_is_refused_naming_the_path_given(
    session: Session,
) -> None:
    # /proc takes no new file, even from root: what the report writes first cannot be made.
    with pytest.raises(JobError) as refused:
        Job().report("/proc/version")
    assert str(refused.value) == (
        "j.report(): cannot write /proc/version: /proc took no new file "
        "(No such file or directory); nothing written"
    )


def headless_chromium(page: Path, profile: Path, *asked: str) -> str:
    """Chromium opening ``page`` with no network (any fetch would fail), given time to
    run its scripts; its standard output."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=10000",
            *asked,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no chromium (apt-get install chromium)")
def test_the_report_draws_its_plots_in_a_headless_browser_with_no_network(
    session: Session, tmp_path: Path
) -> None:
    # Five subjobs; two exit with 3, one with 7: two failure groups.
    j = Job(
        name="report me",
        application=Executable(exe=sys.executable),
        splitter=ArgSplitter(
            args=[["-c", f"import sys; sys.exit({code})"] for code in (0, 0, 3, 3, 7)]
        ),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    report = Path(j.report(tmp_path / "report.html"))
    dom = headless_chromium(report, tmp_path / "profile", "--dump-dom")
    # Plotly drew each figure: its SVG root is in the page.
    assert dom.count('class="main-svg"') >= 4
    assert f"stats of job {j.id}: 5 subjobs" in dom and "exit code 3" in dom
    # The picture of the report (docs/seeing-jobs.md shows it).
    shot = tmp_path / "report.png"
    headless_chromium(
        report, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1100,1900"
    )
    assert shot.read_bytes().startswith(b"\x89PNG")
    keep(shot)


def test_outside_a_notebook_the_dashboard_says_what_to_use_in_one_line(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    j = Job()
    assert j.dashboard() is None
    line = capsys.readouterr().out
    assert line.startswith("j.dashboard(): live plots need a Jupyter notebook")
    assert "j.report('run.html') writes the plots to a file" in line and line.count("\n") == 1
    with pytest.raises(SchemaError) as given:
        j.dashboard(interval=0)
    assert str(given.value) == (
        "j.dashboard(): interval expected a number of seconds above 0, not the int 0"
    )
