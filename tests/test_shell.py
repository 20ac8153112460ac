"""The real ``ganga`` shell, driven through a pseudo-terminal as a user would drive it.

The terminal answers prompt-toolkit's cursor-position requests like a real one does, so the
bottom toolbar is drawn; output is compared with its colour codes removed.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

import ganga_like
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

ESC = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"
CPR_REQUEST = "\x1b[6n"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x08|\r")


# A script for ``%ganga``: rename_elsewhere(name) renames job 0 from another connection and
# commits, so that the cell's own change to that job conflicts.
RENAME_ELSEWHERE = (
    "import transaction\n"
    "from ganga_like.runtime.session import current_session\n"
    "def rename_elsewhere(name):\n"
    "    tm = transaction.TransactionManager()\n"
    "    conn = current_session().repo.db.open(transaction_manager=tm)\n"
    "    conn.root()['jobs'][0].name = name\n"
    "    tm.commit()\n"
    "    conn.close()\n"
)


def strip(text: str) -> str:
    return ANSI.sub("", text)


class Shell:
    """One ``ganga`` process in a 50x200 terminal."""

    def __init__(self, env: dict[str, str], args: tuple[str, ...] = ()) -> None:
        ganga = Path(sys.executable).with_name("ganga")
        argv = [str(ganga)] if ganga.exists() else [sys.executable, "-m", "ganga_like.cli"]
        self.started = time.monotonic()
        self.child = pexpect.spawn(
            argv[0], [*argv[1:], *args], env=env, encoding="utf-8", timeout=60, dimensions=(50, 200)
        )
        self.count = 1
        self.screen = ""  # everything shown so far, colours removed
        self.banner = strip(self.expect(self.prompt(1)))
        self.startup = time.monotonic() - self.started

    @staticmethod
    def prompt(n: int) -> str:
        return rf"ganga {ESC}\[{ESC}{n}{ESC}\]:"

    def expect(self, pattern: str, timeout: float = 60) -> str:
        """Everything up to ``pattern``, answering cursor-position requests meanwhile."""
        seen = ""
        while True:
            index = self.child.expect([pattern, re.escape(CPR_REQUEST)], timeout=timeout)
            seen += self.child.before
            if index == 0:
                self.screen += strip(seen)
                return seen
            self.child.send("\x1b[20;1R")

    def run(self, line: str, timeout: float = 60) -> str:
        """Type ``line``, wait for the next prompt; the cell's output, colours removed."""
        self.child.sendline(line)
        echo = f"ganga [{self.count}]: {line}"
        self.count += 1
        out = strip(self.expect(self.prompt(self.count), timeout))
        # prompt-toolkit redraws the input line; the output follows its last echo.
        return out.rsplit(echo, 1)[-1].strip("\n ")

    def toolbars(self, since: int = 0) -> list[str]:
        """The bottom toolbar each time it was drawn (after screen position ``since``)."""
        return re.findall(r"jobs: [^\n]*monitor: \w+", self.screen[since:])

    def complete(self, text: str) -> set[str]:
        """Type ``text`` (ending in ``.``) and TAB; the attribute names the completion menu
        offers. The line is cleared after.

        The menu is drawn on the rows below the input line. IPython 8.12 shows each entry
        whole (``j.name``), later versions only the part after the dot (``.name``); either
        way an entry is one whitespace-separated token of those rows.
        """
        self.child.send(text)
        self.child.send("\t")
        with contextlib.suppress(pexpect.TIMEOUT):
            self.expect("(?!x)x", timeout=1.0)  # collect whatever is drawn for a second
        drawn = strip(self.child.before).splitlines()
        self.child.send("\x15")  # Ctrl-U: clear the line (the menu closes with it)
        typed = next(i for i, line in enumerate(drawn) if line.rstrip().endswith(text))
        entry = re.compile(rf"(?:{re.escape(text[:-1])})?\.(\w+)")
        return {
            match.group(1)
            for line in drawn[typed + 1 :]
            for token in line.split()
            if (match := entry.fullmatch(token))
        }

    def exit(self) -> float:
        start = time.monotonic()
        self.child.sendline("exit")
        self.child.expect(pexpect.EOF)
        return time.monotonic() - start


@pytest.fixture
def shell_env(env_for: dict[str, str], tmp_path: Path, gangadir: Path) -> Iterator[dict[str, str]]:
    env = dict(env_for)
    env.update(IPYTHONDIR=str(tmp_path / "ipython"), TERM="xterm-256color", COLUMNS="200")
    env.pop("PROMPT_TOOLKIT_NO_CPR", None)
    # IPython draws a suggestion from the history after what is typed on the input line
    # (greyed, so a user tells it from the menu; the text read here has no colours). The
    # shell under test keeps every other IPython default.
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text(
        "c.TerminalInteractiveShell.autosuggestions_provider = None\n"
    )
    yield env
    runner_client.stop(runner_dir(gangadir))


def test_a_session_in_the_real_shell(shell_env: dict[str, str], tmp_path: Path) -> None:
    shell = Shell(shell_env)
    try:
        banner = shell.banner
        assert f"ganga_like {ganga_like.__version__}" in banner
        # At a terminal IPython colours its output (piped, or with NO_COLOR, it does not).
        assert shell.run("get_ipython().colors != 'NoColor'").endswith("True")
        assert f"gangadir {Path(shell_env['GANGA_DIR']).resolve()} (shared)" in banner
        assert "jobs: 0 · monitor on" in banner
        # The input line is coloured by IPython's lexer, its cell-magic lexers made on use.
        lexer = shell.run("type(get_ipython().pt_app.lexer).__name__")
        assert lexer.endswith("'LazyIPythonLexer'")
        # The garbage collector, paused while the shell started, collects again.
        assert shell.run("import gc; gc.isenabled()").endswith("True")

        shell.run(
            "j = Job(name='scan', application=Executable(exe='echo'), "
            "splitter=ArgSplitter(args=[[str(i)] for i in range(20)]))"
        )
        submitted = shell.run("j.submit()")
        assert "submitting job 0" in submitted and "20/20" in submitted
        assert "20 subjobs submitted" in submitted
        waited = shell.run("j.wait(timeout=60)")
        assert "job 0" in waited and "'completed'" in waited and "done:20" in waited

        table = shell.run("jobs")
        assert re.search(r"id\s+status\s+name\s+subjobs\s+application\s+backend", table)
        assert re.search(r"0\s+completed\s+scan\s+20 \(done:20\)\s+Executable\s+Local", table)

        tree = shell.run("j")
        assert "Job 0 'scan'  completed" in tree
        for line in (
            "application: Executable",
            "backend: Local",
            "splitter: ArgSplitter",
            "subjobs: 20 (done:20)",
        ):
            assert line in tree
        subjobs = shell.run("j.subjobs")
        assert "subjobs of job 0: 20" in subjobs and subjobs.count("completed") == 20

        assert "scan" in shell.run("%jobs status=completed; name~sc*")
        assert "jobs: 0" in shell.run("%jobs status=failed")

        # A GPI error is one line, and %tb still has the traceback.
        error = shell.run("j.nmae = 'x'")
        assert [line for line in error.splitlines() if "ERROR" in line] == [
            "ERROR: Job has no attribute 'nmae'; did you mean 'name'?"
        ], error
        assert "Traceback" not in error
        traceback = shell.run("%tb")
        assert "Traceback" in traceback and "SchemaError" in traceback
        assert "ERROR: Monitor.max_interval: expected a float (at least 0.001)" in shell.run(
            "config.Monitor.max_interval = -1"
        )

        # Tab completion shows public attributes and methods only.
        offered = shell.complete("j.")
        assert {"name", "status", "submit", "subjobs", "wait", "application"} <= offered
        assert not {n for n in offered if n.startswith("_")}
        assert "nmae" not in offered  # typed above, but not an attribute
        assert {"exe", "args", "env"} <= shell.complete("j.application.")
        help_text = shell.run("Job?")
        assert "application (application object, default Executable()): What to run" in help_text

        # A cell whose commit conflicts is rolled back with a one-line warning.
        helper = tmp_path / "helper.py"
        helper.write_text(RENAME_ELSEWHERE)
        assert "Error" not in shell.run(f"%ganga {helper}")
        warned = shell.run("j.name = 'mine'; rename_elsewhere('theirs')")
        assert "WARNING: this cell's changes conflicted" in warned
        assert "rolled back" in warned
        assert len([line for line in warned.splitlines() if "WARNING" in line]) == 1
        assert shell.run("j.name").endswith("'theirs'")

        # The toolbar counts jobs by status and shows the monitor. Its first drawing is
        # on the screen whole; later ones are drawn as differences, so they are read from
        # the toolbar object itself.
        assert shell.toolbars()[0] == "jobs: none  │ monitor: on"
        toolbar = "print(''.join(text for _, text in get_ipython().pt_app.bottom_toolbar()))"
        assert shell.run(toolbar).splitlines()[-1] == "jobs: 1 completed  │ monitor: on"
        assert "monitor: running" in shell.run("%monitor status")
        assert "monitor: stopped" in shell.run("%monitor off")
        time.sleep(1.1)  # the toolbar keeps what it counted for Shell.toolbar_interval
        assert shell.run(toolbar).splitlines()[-1] == "jobs: 1 completed  │ monitor: off"
        shell.run("%monitor on")
        assert "monitor: polled 0 active" in shell.run("%monitor once")
    finally:
        elapsed = shell.exit()
    assert elapsed < 10.0  # no hang on exit; loose so that a loaded machine cannot fail it


def test_exit_is_quick_with_jobs_running_and_they_go_on(shell_env: dict[str, str]) -> None:
    shell = Shell(shell_env)
    try:
        shell.run(
            "j = Job(application=Executable(exe='sleep'), "
            "splitter=ArgSplitter(args=[['20'], ['20']]))"
        )
        shell.run("j.submit()")
        assert "'running'" in shell.run("j.wait(until='running', timeout=30)")
    finally:
        elapsed = shell.exit()
    # The subjobs sleep 20 s: an exit that waited for them would take that long. The bound is
    # loose so that a loaded machine cannot fail it; bench_shell_startup.py measures the time.
    assert elapsed < 10.0
    assert shell.child.wait() == 0

    # Started again: the banner counts the job that kept running, which can be killed.
    again = Shell(shell_env)
    try:
        assert "jobs: 1 (1 running) · monitor on" in again.banner
        assert again.run("jobs(0).kill(); jobs(0).status").endswith("'killed'")
    finally:
        again.exit()


def test_script_then_interactive_and_options(shell_env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "make.py"
    script.write_text("import gc, sys\nmade = Job(name=sys.argv[1])\ncollecting = gc.isenabled()\n")
    shell = Shell(shell_env, ("--Shell.prompt=ganga", "--no-monitor", "-i", str(script), "first"))
    try:
        assert "jobs: 1 (1 new) · monitor off" in shell.banner
        assert shell.run("made.name, made.status").endswith("('first', 'new')")
        assert shell.run("collecting, gc.isenabled()").endswith("(True, True)")
        assert "monitor: stopped" in shell.run("%monitor status")
    finally:
        shell.exit()


def test_the_shell_fed_from_a_pipe_runs_its_cells_with_the_garbage_collector_on(
    shell_env: dict[str, str],
) -> None:
    # No prompt is drawn without a terminal: the collector paused for the start-up must be
    # back all the same.
    ganga = Path(sys.executable).with_name("ganga")
    argv = [str(ganga)] if ganga.exists() else [sys.executable, "-m", "ganga_like.cli"]
    ran = subprocess.run(
        argv,
        input="import gc\nprint('collecting:', gc.isenabled())\n",
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert "collecting: True" in ran.stdout


# An SGR sequence that sets a colour (foreground or background, any palette): what must
# not reach output that is not for a terminal. prompt-toolkit's cursor movements and
# bold/reverse attributes are not colours.
COLOUR_CODE = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;\d+)*m")

# Cells whose output IPython or ganga colours at a terminal: a traceback, ``?`` help, a
# job's tree, a job table, a one-line GPI error.
COLOURED_CELLS = "1/0\nJob?\nj = Job(name='plain')\nj\njobs\nj.nmae = 'x'\n"


def test_the_shell_fed_from_a_pipe_writes_no_escape_codes(shell_env: dict[str, str]) -> None:
    ganga = Path(sys.executable).with_name("ganga")
    argv = [str(ganga)] if ganga.exists() else [sys.executable, "-m", "ganga_like.cli"]
    ran = subprocess.run(
        argv,
        input=COLOURED_CELLS,
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    for shown in ("ZeroDivisionError", "Init signature: Job(", "Job 0 'plain'  new", "jobs: 1"):
        assert shown in ran.stdout, ran.stdout
    assert "ERROR: Job has no attribute 'nmae'; did you mean 'name'?" in ran.stdout + ran.stderr
    assert "\x1b[" not in ran.stdout and "\x1b[" not in ran.stderr


def test_no_color_makes_the_shell_at_a_terminal_plain(shell_env: dict[str, str]) -> None:
    shell = Shell({**shell_env, "NO_COLOR": "1"})
    try:
        assert shell.run("get_ipython().colors").endswith("'NoColor'")
        shown = ""
        for line in COLOURED_CELLS.splitlines():
            shell.child.sendline(line)
            shell.count += 1
            shown += shell.expect(shell.prompt(shell.count))
        assert "ZeroDivisionError" in strip(shown) and "Job 0 'plain'  new" in strip(shown)
        assert not COLOUR_CODE.findall(shown), COLOUR_CODE.findall(shown)[:5]
    finally:
        shell.exit()


def test_stats_show_as_a_compact_table_in_the_shell(shell_env: dict[str, str]) -> None:
    shell = Shell(shell_env)
    try:
        shell.run(
            "j = Job(application=Executable(exe='/bin/sh'), "
            "splitter=ArgSplitter(args=[['-c', 'exit 0'], ['-c', 'exit 4'], ['-c', 'exit 4']]))"
        )
        shell.run("j.submit()")
        assert "'failed'" in shell.run("j.wait(timeout=60)")
        shown = shell.run("j.stats()")
        lines = [line.strip() for line in shown.splitlines() if line.strip()]
        assert lines[0] == "Out[4]:"
        assert lines[1] == "stats of job 0: 3 subjobs"
        assert lines[2].split() == ["status", "completed", "1", "failed", "2"]
        assert "failed #1 2: exit code 4: 0.1, 0.2" in [" ".join(line.split()) for line in lines]
        assert shell.run("j.stats().to_dict()['counts']").endswith("{'completed': 1, 'failed': 2}")
        assert shell.run("job_stats(3)") == (
            "ERROR: job_stats(): expected a job, a slice or a list of jobs, not the int 3"
        )
    finally:
        shell.exit()
