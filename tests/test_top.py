"""``ganga top`` driven by Textual's own pilot, in this process, over a real repository
whose job a second process (a ``ganga`` script) runs on Local: the list follows the job,
Enter opens its stats, o shows a subjob's output, r resubmits a failure group, x kills
those of a group that run again and k kills the job, each only after a yes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from ganga_like.commands.top import INSTALL_HINT
from ganga_like.commands.top_actions import grown
from ganga_like.commands.top_app import TopApp
from ganga_like.commands.top_screens import ConfirmScreen, JobScreen, PeekScreen
from ganga_like.repository.zeo import shared
from ganga_like.runtime.settings import Settings
from ganga_like.runtime.stats.data import FailureGroup

from .gated_script import GatedScript
from .screenshots import keep
from .test_cli import ganga
from .waiting import wait_for

# Subjobs 0 and 2 fail with exit code 3; 1 and 3 complete.
CODES = [3, 0, 3, 0]


@pytest.fixture
def gated(tmp_path: Path, env_for: dict[str, str]) -> Iterator[GatedScript]:
    script = GatedScript(tmp_path, env_for, CODES)
    try:
        yield script
    finally:
        script.end()


def top_app(gangadir: Path, interval: float = 0.2, job: int | None = None) -> TopApp:
    settings = Settings(gangadir=gangadir, repository_mode="shared", monitoring=False)
    return TopApp(settings, interval, 600.0, job)


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    """Let the app run until ``condition()`` holds; fail naming ``what`` after 60 s."""
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def cell(app: TopApp, job_id: int, column: str) -> str:
    table = app.query_one("#jobs", DataTable)
    return str(table.get_cell(str(job_id), column))


def shown(app: TopApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


def test_the_list_follows_a_job_another_process_runs(gated: GatedScript, gangadir: Path) -> None:
    async def scenario() -> None:
        app = top_app(gangadir)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: gated.job_id in {r.job_id for r in app.rows}, "the job")
            assert cell(app, gated.job_id, "ended") == "0/4"
            assert cell(app, gated.job_id, "name") == "gated"
            gated.open_gate(1)
            await until(pilot, lambda: cell(app, gated.job_id, "ended") == "1/4", "one ended")
            assert cell(app, gated.job_id, "per min") != "-"
            assert "1 active" in shown(app, "#title")
            await pilot.press("q")
        assert app.source.stop(30), "the reading thread ended"

    asyncio.run(scenario())


async def all_ended(pilot: Pilot[None], app: TopApp, gated: GatedScript) -> None:
    """Every gate opened; until the list shows the job failed (two subjobs exit with 3)."""
    await until(pilot, lambda: bool(app.rows), "the job")
    for index in range(len(CODES)):
        gated.open_gate(index)
    await until(pilot, lambda: app.rows[0].status == "failed", "the job failed")


def keep_screenshot(app: TopApp, tmp_path: Path, name: str) -> Path:
    """The screen as SVG, kept (:mod:`tests.screenshots`: the pictures of docs/top.md)."""
    shot = Path(app.save_screenshot(name, str(tmp_path)))
    assert shot.read_text().startswith("<svg")
    return keep(shot)


def message(app: TopApp) -> str:
    return str(app.query_one("#message", Static).render())


def pick(app: TopApp, key: str) -> None:
    picks = app.screen.query_one("#picks", DataTable)
    picks.move_cursor(row=picks.get_row_index(key))


def under_cursor(screen: JobScreen) -> str | None:
    picks = screen.query_one("#picks", DataTable)
    return picks.coordinate_to_cell_key(picks.cursor_coordinate).row_key.value


async def slowest_rows_keep_their_items(pilot: Pilot[None], app: TopApp, screen: JobScreen) -> None:
    """r on a slowest subjob says what r acts on, on the job's screen; when the slowest
    reorder (a refresh while the job runs), the cursor stays on its subjob and o shows it."""
    assert screen.stats is not None and len(screen.stats.slowest) >= 2
    slowest = screen.stats.slowest
    chosen = slowest[1].fqid
    pick(app, f"slow:{chosen}")
    await pilot.press("r")
    assert app.screen is screen
    assert shown(app, "#said") == (
        "r resubmits a failure group: move to a 'failed #N' row (this is a slowest subjob)"
    )
    screen.show(replace(screen.stats, slowest=slowest[1:] + slowest[:1]))  # now first
    assert under_cursor(screen) == f"slow:{chosen}"
    await pilot.press("o")
    assert isinstance(app.screen, PeekScreen) and app.screen.fqid == chosen
    await pilot.press("escape")


def test_a_job_opens_with_its_failure_groups_output_and_a_confirmed_resubmission(
    gated: GatedScript, gangadir: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        app = top_app(gangadir)
        async with app.run_test(size=(140, 30)) as pilot:
            await all_ended(pilot, app, gated)
            keep_screenshot(app, tmp_path, "top-list.svg")
            first_end = app.rows[0].ended
            assert first_end is not None
            await pilot.press("k")  # nothing to kill: said, not asked
            assert not isinstance(app.screen, ConfirmScreen)
            assert message(app) == (
                f"job {gated.job_id} (failed): none of its 4 (sub)job(s) is still to end; "
                "nothing to kill"
            )
            await pilot.press("enter")
            assert isinstance(app.screen, JobScreen)
            screen = app.screen
            await until(pilot, lambda: screen.stats is not None, "the job's stats")
            assert screen.stats is not None
            group = screen.stats.failures[0]
            assert group.fqids == (f"{gated.job_id}.0", f"{gated.job_id}.2")
            assert "completed 2  failed 2" in shown(app, "#summary")
            keep_screenshot(app, tmp_path, "top-job.svg")
            # The failure group's row: o shows its first subjob's output.
            await slowest_rows_keep_their_items(pilot, app, screen)
            pick(app, "group:3:exit code 3")
            await pilot.press("o")
            assert isinstance(app.screen, PeekScreen)
            await until(pilot, lambda: "says hello" in shown(app, "#output"), "the output")
            assert "subjob 0 says hello" in shown(app, "#output")
            await pilot.press("escape")
            # r asks first; n leaves the group as it is.
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmScreen)
            assert shown(app, "#question") == (
                f"resubmit the 2 subjob(s) of job {gated.job_id} in failure group 1 (exit code 3)?"
            )
            await pilot.press("n")
            assert app.query_one("#message", Static).render().plain == "nothing done"
            await pilot.press("r", "y")
            await until(
                pilot,
                lambda: str(app.query_one("#message", Static).render()).startswith(
                    f"resubmitted the 2 subjob(s) of failure group 1 of job {gated.job_id} "
                    "(exit code 3)"
                ),
                "the resubmission",
            )
            # Resubmitted, they run again (their gates are open) and fail again, later.
            await until(
                pilot,
                lambda: app.rows[0].status == "failed" and (app.rows[0].ended or 0) > first_end,
                "the job failed again",
            )
            assert app.rows[0].counts == {"completed": 2, "failed": 2}
            await pilot.press("q")
        assert app.source.stop(30), "the reading thread ended"

    asyncio.run(scenario())


def test_a_failure_group_running_again_is_killed_after_a_yes(
    gated: GatedScript, gangadir: Path
) -> None:
    async def scenario() -> None:
        app = top_app(gangadir)
        async with app.run_test(size=(140, 30)) as pilot:
            await all_ended(pilot, app, gated)
            await pilot.press("enter")
            screen = app.screen
            assert isinstance(screen, JobScreen)
            await until(pilot, lambda: screen.stats is not None, "the job's stats")
            # A group none of which runs: refused in one line, nothing done.
            pick(app, "group:3:exit code 3")
            await pilot.press("x")
            assert shown(app, "#question") == (
                f"kill those of the 2 subjob(s) of job {gated.job_id} in failure group 1 "
                "(exit code 3) that run again?"
            )
            await pilot.press("y")
            await until(pilot, lambda: "nothing to kill" in message(app), "the refusal")
            assert message(app) == (
                f"job {gated.job_id}: kill(): none of failure group 1 (exit code 3) runs again; "
                "nothing to kill"
            )
            # Their gates closed, the resubmitted subjobs run until killed.
            for index in (0, 2):
                (gated.gates / str(index)).unlink()
            await pilot.press("r", "y")
            await until(pilot, lambda: message(app).startswith("resubmitted"), "resubmitted")
            await until(pilot, lambda: app.rows[0].status == "running", "running again")
            await until(pilot, lambda: screen.stats is not None and not screen.stats.failures, "")
            pick(app, "again:0")
            await pilot.press("x")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            assert message(app) == "nothing done"
            assert app.rows[0].status == "running"
            await pilot.press("x", "y")
            await until(pilot, lambda: message(app).startswith("killed"), "the kill")
            assert message(app) == (
                f"killed those of the 2 subjob(s) of failure group 1 of job {gated.job_id} "
                "(exit code 3) that ran again"
            )
            await until(pilot, lambda: not app.rows[0].live, "the group killed")
            assert app.rows[0].counts == {"completed": 2, "killed": 2}
            await pilot.press("q")
        assert app.source.stop(30), "the reading thread ended"

    asyncio.run(scenario())


def test_a_job_that_ended_long_ago_opened_has_nothing_to_kill_and_is_not_asked_about(
    gated: GatedScript, gangadir: Path
) -> None:
    async def scenario() -> None:
        settings = Settings(gangadir=gangadir, repository_mode="shared", monitoring=False)
        app = TopApp(settings, 0.2, 0.001, gated.job_id)  # ended jobs leave the list at once
        async with app.run_test(size=(140, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, JobScreen)
            for index in range(len(CODES)):
                gated.open_gate(index)
            await until(
                pilot,
                lambda: screen.stats is not None and screen.stats.counts.get("failed") == 2,
                "the job's stats, every subjob ended",
            )
            await until(pilot, lambda: not app.rows, "the job gone from the list")
            await pilot.press("k")
            assert app.screen is screen
            assert shown(app, "#said") == (
                f"job {gated.job_id}: none of its 4 (sub)job(s) is still to end; nothing to kill"
            )
            await pilot.press("q")
        assert app.source.stop(30), "the reading thread ended"

    asyncio.run(scenario())


def test_a_kill_is_asked_first_and_done_on_yes(gated: GatedScript, gangadir: Path) -> None:
    async def scenario() -> None:
        app = top_app(gangadir)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: bool(app.rows), "the job")
            await pilot.press("k")
            assert isinstance(app.screen, ConfirmScreen)
            assert f"kill job {gated.job_id} (4 of 4 not ended)?" in shown(app, "#question")
            await pilot.press("escape")
            assert app.rows[0].live
            await pilot.press("k", "y")
            await until(pilot, lambda: app.rows[0].status == "killed", "the job killed")
            assert "killed" in str(app.query_one("#message", Static).render())
            await pilot.press("q")
        assert app.source.stop(30), "the reading thread ended"

    asyncio.run(scenario())


def test_ctrl_c_quits_like_q_from_the_list_a_job_and_a_question(
    gated: GatedScript, gangadir: Path
) -> None:
    async def quit_from(keys: tuple[str, ...], screen: type | None) -> None:
        app = top_app(gangadir)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: bool(app.rows), "the job")
            await pilot.press(*keys)
            assert isinstance(app.screen, screen) if screen else len(app.screen_stack) == 1
            await pilot.press("ctrl+c")
            await until(pilot, lambda: app.return_code is not None, "the app quitting")
        assert app.return_code == 0
        assert app.source.stop(30), "the reading thread ended"

    asyncio.run(quit_from((), None))  # the list
    asyncio.run(quit_from(("enter",), JobScreen))
    asyncio.run(quit_from(("k",), ConfirmScreen))


def test_bad_input_is_refused_in_one_line_before_the_screen_is_taken(
    env_for: dict[str, str],
) -> None:
    bad_option = ganga(["top", "--frobnicate"], env_for)
    assert bad_option.returncode == 2
    assert bad_option.stderr.splitlines() == [
        "ganga top: unrecognized arguments: --frobnicate; ganga top --help explains it"
    ]
    bad_interval = ganga(["top", "--interval", "0"], env_for)
    assert bad_interval.returncode == 2 and len(bad_interval.stderr.splitlines()) == 1
    assert "expected a finite number of seconds above 0, not '0'" in bad_interval.stderr
    endless = ganga(["top", "--interval", "inf"], env_for)
    assert endless.returncode == 2 and len(endless.stderr.splitlines()) == 1
    assert "expected a finite number of seconds above 0, not 'inf'" in endless.stderr
    unknown = ganga(["top", "41"], env_for)
    assert (unknown.returncode, unknown.stderr, unknown.stdout) == (3, "ganga: no job 41\n", "")
    subjob = ganga(["top", "4.1"], env_for)
    assert subjob.returncode == 2 and subjob.stderr == (
        "ganga: not a job id: '4.1'; use 12 (ganga top opens a job, not a subjob)\n"
    )
    piped = ganga(["top"], env_for)  # no terminal: stdin and stdout are pipes
    assert piped.returncode == 1 and piped.stderr.startswith("ganga: ganga top needs a terminal")
    assert len(piped.stderr.splitlines()) == 1


def test_without_textual_it_says_how_to_install_it(env_for: dict[str, str]) -> None:
    # Textual made unimportable in the child: what a default install without the extra has.
    blocked = (
        "import sys; sys.modules['textual'] = None; "
        "from ganga_like.cli import main; sys.exit(main(['top']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked], env=env_for, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr == f"ganga: {INSTALL_HINT}\n"


HOLD = """
import os, sys, time
from pathlib import Path
from ganga_like.repository.connection import Repository
repo = Repository(Path(sys.argv[1]))  # embedded: the file held by this process alone
Path(sys.argv[2]).touch()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
repo.close()
"""


def test_a_busy_repository_is_said_in_one_line_until_it_is_free(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(gangadir), str(held), str(release)], env=env_for
    )

    async def scenario() -> None:
        app = top_app(gangadir)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: app.problem is not None, "the problem said")
            assert app.problem is not None
            assert app.problem.startswith("repository busy: ")
            assert f"in use by PID {holder.pid}" in app.problem
            assert "\n" not in app.problem and app.problem.endswith("(trying again)")
            await pilot.press("k")  # keys are answered meanwhile: no job to kill
            assert app.query_one("#message", Static).render().plain == "no job to kill"
            release.touch()
            await until(pilot, lambda: app.snapshot is not None, "a read once it was free")
            assert app.problem is None and shown(app, "#problem") == ""
            await pilot.press("q")
        assert app.source.stop(30), "the reading thread ended"

    try:
        wait_for(lambda: held.exists() or holder.poll() is not None, 60, "the holder")
        assert holder.poll() is None
        asyncio.run(scenario())
    finally:
        release.touch()
        holder.wait(timeout=60)


def test_a_server_that_stops_answering_is_said_and_quitting_does_not_wait_for_it(
    gated: GatedScript, gangadir: Path
) -> None:
    server = shared.server_pid(gangadir / "repository")
    assert server is not None

    async def scenario() -> None:
        app = top_app(gangadir)
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: bool(app.rows), "the job")
            os.kill(server, signal.SIGSTOP)
            try:
                gated.open_gate(0)  # the script's commit waits too: something to read
                await until(pilot, lambda: "not answering" in shown(app, "#problem"), "said")
                assert shown(app, "#problem").startswith("repository not answering for ")
                await pilot.press("q")
            except BaseException:
                os.kill(server, signal.SIGCONT)
                raise
        # The screen is gone while a read still waits.
        assert not app.source.stop(0.5)
        os.kill(server, signal.SIGCONT)
        assert app.source.stop(60), "the reading thread ended once the server answered"

    asyncio.run(scenario())


def test_the_question_says_what_a_group_s_resubmission_gives_more_of() -> None:
    def group(cause: str) -> FailureGroup:
        return FailureGroup(None, cause.upper(), ("1.0",), cause=cause, number=1)

    assert grown(group("out_of_memory")) == " with twice the memory"
    assert grown(group("timeout")) == " with twice the walltime"
    assert grown(group("failed")) == ""


def test_live_jobs_nobody_monitors_are_said_to_wait(gated: GatedScript, gangadir: Path) -> None:
    async def scenario() -> None:
        app = top_app(gangadir)
        app.source.monitor_look = 0.1
        note = app.query_one  # looked up once the app runs
        async with app.run_test(size=(140, 30)) as pilot:
            await until(pilot, lambda: app.snapshot is not None and bool(app.rows), "the job")
            assert app.snapshot is not None and app.snapshot.monitored is True
            assert not note("#unmonitored", Static).display  # the script monitors it
            gated.process.kill()  # its subjobs go on waiting, followed by nobody
            gated.process.wait()
            await until(pilot, lambda: note("#unmonitored", Static).display, "the note")
            assert str(note("#unmonitored", Static).render()).startswith(
                "nobody monitors these jobs now"
            )
            await pilot.press("q")
        assert app.source.stop(30), "the reading thread ended"

    asyncio.run(scenario())
