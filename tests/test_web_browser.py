"""``ganga web`` in a real headless Chromium (Debian's ``chromium``, driven by Playwright;
scripts/install-chromium.sh installs it): the pages load with the token and are refused
without it, show real jobs run on Local, draw the subjob grid in the statuses' colours,
name the subjob under the pointer, follow a job another process changes, and kill only
after the confirmation (asking what becomes of the jobs that wait for it). Screenshots
are kept in the test's directory (and in ``$GANGA_SCREENSHOTS`` when set:
:mod:`tests.screenshots`)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.runtime.plots.figures import STATUS_COLOURS
from ganga_like.runtime.session import Session

from .screenshots import keep
from .test_cli import ganga
from .waiting import wait_for
from .web_server import CHROMIUM, WebServer, launch_chromium, master_with_statuses, running_web

if not CHROMIUM.exists():
    pytest.skip(
        f"no {CHROMIUM}: bash scripts/install-chromium.sh installs Debian's chromium (as root)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

# The repository is shared between this session and the `ganga web` process.
SESSION_SETTINGS = {"repository_mode": "shared"}
WAIT = 120.0


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium with a fresh profile; Playwright never downloads a browser."""
    profile = tempfile.mkdtemp(prefix="ganga-web-chromium-")
    try:
        with sync_api.sync_playwright() as driver:
            context = launch_chromium(driver, profile)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    opened = browser.new_page()
    try:
        yield opened
    finally:
        opened.close()


def until(page: Any, script: str, what: str, timeout: float = WAIT) -> Any:
    """The value of ``script`` in the page once it is truthy (polled from here: the
    pages' policy forbids the string evaluation of Playwright's own waiting)."""
    deadline = time.monotonic() + timeout
    while True:
        value = page.evaluate(script)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def keep_screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    return keep(shot)


def rgb(hex_colour: str) -> list[int]:
    value = int(hex_colour[1:], 16)
    return [(value >> 16) & 255, (value >> 8) & 255, value & 255, 255]


def cell_centre(page: Any, index: int) -> tuple[int, int]:
    """Where on the canvas the cell of subjob ``index`` is drawn (its centre)."""
    size, columns = page.evaluate("[grid.size, grid.columns]")
    inner = size - 1 if size >= 5 else size
    return (index % columns) * size + inner // 2, (index // columns) * size + inner // 2


def pixel(page: Any, index: int) -> list[int]:
    x, y = cell_centre(page, index)
    found: list[int] = page.evaluate(
        f"Array.from(grid.canvas.getContext('2d').getImageData({x}, {y}, 1, 1).data)"
    )
    return found


def hover(page: Any, index: int) -> None:
    x, y = cell_centre(page, index)
    # The cell into the viewport first (the pointer moves over what is shown).
    page.evaluate(
        f"window.scrollTo(0, grid.canvas.getBoundingClientRect().top + window.scrollY + {y} - 200)"
    )
    box = page.locator("#grid").bounding_box()
    page.mouse.move(box["x"] + x + 0.5, box["y"] + y + 0.5)


def gated_job(marker: Path, codes: list[int | None]) -> Job:
    """A job on Local: a subjob per code, exiting with it (and printing its place), or
    (None) waiting for ``marker``."""
    wait = f"while [ ! -e {marker} ]; do sleep 0.05; done"
    args = [
        ["-c", wait if code is None else f"echo hello {index}; exit {code}"]
        for index, code in enumerate(codes)
    ]
    return Job(application=Executable(exe="/bin/sh"), splitter=ArgSplitter(args=args))


def test_the_jobs_page_loads_with_the_token_and_is_refused_without_it(
    session: Session, env_for: dict[str, str], page: Any, tmp_path: Path
) -> None:
    j = Job(
        name="three",
        application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(args=[["-c", "exit 0"], ["-c", "exit 0"], ["-c", "exit 3"]]),
    )
    j.submit()
    assert j.wait(timeout=WAIT) == "failed"
    with running_web(env_for) as web:
        refused = page.goto(f"{web.base}/")
        assert refused.status == 403 and "forbidden" in page.content()
        assert page.goto(f"{web.base}/?token={web.token[::-1]}").status == 403
        loaded = page.goto(web.url)
        assert loaded.status == 200
        row = f"#jobs tr[data-fqid='{j.id}']"
        until(page, f'!!document.querySelector("{row}")', "the job's row")
        cells = page.locator(f"{row} td").all_inner_texts()
        assert cells[:4] == [str(j.id), "failed", "three", "3 (done:2 fail:1)"]
        assert "Executable" in cells and "Local" in cells
        keep_screenshot(page, tmp_path, "web-jobs.png")
        page.click(f"{row} a")
        until(page, "document.getElementById('facts').rows.length > 3", "the job's facts")
        assert page.url.startswith(f"{web.base}/job/{j.id}?token={web.token}")


def test_the_grid_shows_each_status_in_its_colour_and_follows_another_process(
    session: Session, env_for: dict[str, str], page: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "go"
    j = gated_job(marker, [0, 3, None, 0, 7])
    j.submit()
    try:
        wait_for(
            lambda: j.subjobs.stats().counts == {"completed": 2, "failed": 2, "running": 1},
            WAIT,
            "four subjobs ended and one running",
        )
        with running_web(env_for) as web:
            page.goto(f"{web.base}/job/{j.id}?token={web.token}")
            until(page, "grid.data && grid.data.count === 5", "the grid of 5 cells")
            # The facts above the grid drawn: the grid stays where the pointer is put.
            until(page, "document.getElementById('facts').rows.length > 3", "the job's facts")
            for index, status in enumerate(["completed", "failed", "running", "completed"]):
                assert pixel(page, index) == rgb(STATUS_COLOURS[status]), (index, status)
            assert pixel(page, 4) == rgb(STATUS_COLOURS["failed"])
            hover(page, 1)
            tip = until(
                page, "document.getElementById('tip').innerText.includes('exit code')", "hover"
            )
            assert tip
            text = page.inner_text("#tip")
            assert text.splitlines() == [f"{j.id}.1  failed", "exit code 3"]
            x, y = cell_centre(page, 0)
            page.locator("#grid").click(position={"x": x, "y": y})
            until(page, "document.getElementById('peek').innerText.includes('hello 0')", "peek")
            # Another process kills the running subjob: the page follows.
            killed = ganga(["kill", f"{j.id}.2", "--yes"], env_for)
            assert killed.returncode == 0, killed.stderr
            colour = rgb(STATUS_COLOURS["killed"])
            until(
                page,
                f"(() => {{ const [x, y] = [{cell_centre(page, 2)[0]}, {cell_centre(page, 2)[1]}];"
                " const d = grid.canvas.getContext('2d').getImageData(x, y, 1, 1).data;"
                f" return [d[0], d[1], d[2]].join() === '{','.join(map(str, colour[:3]))}'; }})()",
                "the killed subjob's cell in the killed colour",
            )
            until(
                page,
                "document.getElementById('facts').innerText.includes('killed 1')",
                "the counts with the kill",
            )
            keep_screenshot(page, tmp_path, "web-job.png")
    finally:
        marker.touch()


def test_kill_happens_only_after_the_confirmation(
    session: Session, env_for: dict[str, str], page: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "go"
    j = gated_job(marker, [None, None])
    j.submit()
    try:
        wait_for(lambda: j.subjobs.stats().counts == {"running": 2}, WAIT, "both running")
        with running_web(env_for) as web:
            posts: list[str] = []
            page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
            page.goto(f"{web.base}/job/{j.id}?token={web.token}")
            until(page, "document.getElementById('facts').rows.length > 3", "the job's facts")
            page.click("#kill")
            assert page.locator("#confirm").is_visible()
            assert page.inner_text("#confirm-text") == f"Kill job {j.id} and its 2 subjobs?"
            page.click("#confirm-no")
            assert page.inner_text("#message") == "Kill cancelled; nothing done"
            assert not page.locator("#confirm").is_visible()
            _settled(web, j)
            assert posts == [] and j.status == "running"
            page.click("#kill")
            page.click("#confirm-yes")
            until(
                page,
                f"document.getElementById('message').innerText === 'job {j.id} killed'",
                "kill",
            )
            assert posts == [f"{web.base}/api/kill/{j.id}"]
            wait_for(lambda: j.status == "killed", WAIT, "the job killed")
    finally:
        marker.touch()


def _settled(web: WebServer, j: Job) -> None:
    """What the server says of the job now (a round trip through its one reader thread,
    after every request the page sent before)."""
    assert web.get_json(f"/api/detail/{j.id}")["status"] == "running"


def test_the_grid_of_ten_thousand_subjobs_is_one_canvas(
    session: Session, env_for: dict[str, str], page: Any, tmp_path: Path
) -> None:
    labels = ["completed", "failed", "running", "submitted", "killed"]
    master_id = _master_with_statuses(session, [labels[i % 7 % 5] for i in range(10_000)])
    with running_web(env_for) as web:
        page.goto(f"{web.base}/job/{master_id}?token={web.token}")
        until(page, "grid.data && grid.data.count === 10000", "the grid of 10,000 cells")
        until(page, "document.getElementById('facts').rows.length > 3", "the job's facts")
        assert page.locator("#grid-box canvas").count() == 1
        size, columns, rows = page.evaluate("[grid.size, grid.columns, grid.rows]")
        assert columns * rows >= 10_000 > columns * (rows - 1)
        assert page.evaluate("[grid.canvas.width, grid.canvas.height]") == [
            columns * size,
            rows * size,
        ]
        for index in (0, 1, 2, 3, 4, 5, 6, 4_999, 9_998, 9_999):
            assert pixel(page, index) == rgb(STATUS_COLOURS[labels[index % 7 % 5]]), index
        hover(page, 9_999)
        until(
            page,
            f"document.getElementById('tip').innerText.startsWith('{master_id}.9999  ')",
            "the last cell's name",
        )
        keep_screenshot(page, tmp_path, "web-grid-10000.png")


def _master_with_statuses(session: Session, labels: list[str]) -> int:
    made: list[int] = []

    def build() -> None:
        made[:] = [master_with_statuses(session.registry(), labels, "ten thousand").id]

    session.repo.in_transaction(build, what="building a master")
    return made[0]


def test_a_kill_of_a_job_others_wait_for_asks_what_becomes_of_them(
    session: Session, env_for: dict[str, str], page: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "go"
    first = gated_job(marker, [None])
    first.submit()
    second = Job(application=Executable(exe="/bin/true"), after=first)
    second.submit()
    try:
        wait_for(lambda: first.subjobs.stats().counts == {"running": 1}, WAIT, "it running")
        with running_web(env_for) as web:
            page.goto(f"{web.base}/job/{first.id}?token={web.token}")
            until(page, "document.getElementById('facts').rows.length > 3", "the job's facts")
            page.click("#kill")
            assert page.locator("#confirm-dependents").is_visible()
            assert page.inner_text("#confirm-dependents legend") == (
                f"job(s) {second.id} wait for it:"
            )
            page.check("#confirm-dependents input[value=keep]")
            page.click("#confirm-yes")
            until(
                page,
                f"document.getElementById('message').innerText === 'job {first.id} killed'",
                "kill",
            )
            wait_for(lambda: first.status == "killed", WAIT, "the job killed")
            assert second.status == "waiting"  # kept waiting for a resubmission
            page.click("#resubmit")
            assert not page.locator("#confirm-dependents").is_visible()
            page.click("#confirm-no")
    finally:
        marker.touch()
