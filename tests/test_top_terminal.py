"""``ganga top`` as a user runs it: a real process in a pseudo-terminal (pexpect), its
screen read through a terminal emulator (pyte), while a second process runs the job it
shows. Keys only, no mouse; the terminal is resized; Ctrl-C or q leaves it as it was."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte

from ganga_like.repository.zeo import shared

from .gated_script import GatedScript

ROWS, COLS = 30, 130


class Terminal:
    """A pty running ``command`` and the screen it drew."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        # The size is the pty's alone: COLUMNS and LINES would fix it (Textual reads them).
        env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        self.child = pexpect.spawn(
            "/bin/sh", ["-c", command], env=env, dimensions=(ROWS, COLS), timeout=60
        )

    def pump(self) -> None:
        """Feed the emulator what the program wrote so far."""
        while True:
            try:
                data = self.child.read_nonblocking(65536, timeout=0.05)
            except (pexpect.TIMEOUT, pexpect.EOF):
                return
            self.raw += data
            self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def until(self, condition: Callable[[str], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            if condition(self.text()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}; the screen:\n{self.text()}\n"
                    f"the last output: {bytes(self.raw[-3000:])!r}"
                )

    def resize(self, rows: int, cols: int) -> None:
        self.child.setwinsize(rows, cols)
        self.screen.resize(rows, cols)

    def row_of(self, job_id: int) -> str:
        """The list's line of job ``job_id`` (its id, then its name)."""
        return next(
            (line for line in self.screen.display if line.split()[:2] == [str(job_id), "gated"]),
            "",
        )


def test_ganga_top_in_a_terminal_follows_a_job_answers_keys_and_restores_the_terminal(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    gated = GatedScript(tmp_path, env_for, [0, 0, 3, 0])
    try:
        top = f"{sys.executable} -m ganga_like.cli top --interval 0.3"
        term = Terminal(f'stty sane; {top}; echo "EXIT=$?"; stty -a', env_for)
        job = gated.job_id
        term.until(lambda _t: " 0/4 " in term.row_of(job), "the job, none ended")
        footer = term.screen.display[-1]  # the help line
        assert "open job" in footer and "k kill job" in footer and "q quit" in footer
        gated.open_gate(0)
        term.until(lambda _t: " 1/4 " in term.row_of(job), "one subjob ended")
        gated.open_gate(2)
        term.until(lambda _t: " 2/4 " in term.row_of(job), "two ended")
        # Smaller, then larger again: redrawn to each size.
        term.resize(20, 100)
        term.until(lambda t: " 2/4 " in term.row_of(job) and len(t.splitlines()[0]) == 100, "100")
        term.resize(ROWS, COLS)
        term.until(lambda _t: " 2/4 " in term.row_of(job), "redrawn at full size")
        # Enter opens the job: its counts and its failure group; Escape goes back.
        term.child.send("\r")
        term.until(lambda t: f"job {job}: 4 subjobs" in t, "the job's stats")
        term.until(lambda t: "exit code 3" in t, "the failure group")
        term.child.send("\x1b")
        term.until(lambda _t: " 2/4 " in term.row_of(job), "the list again")
        # k asks first; n declines, and the job goes on.
        term.child.send("k")
        term.until(lambda t: f"kill job {job} (2 of 4 not ended)?" in t, "the question")
        term.child.send("n")
        term.until(lambda t: "nothing done" in t, "declined")
        term.child.send("\x03")  # Ctrl-C quits as q does (q: the next test)
        term.child.expect(rb"EXIT=(\d+)")
        assert term.child.match.group(1) == b"0"
        leaving = bytes(term.raw) + term.child.before
        term.child.expect(pexpect.EOF)
        settings = term.child.before.decode()
        # The terminal as it was: the main screen back, the cursor shown, line editing on.
        assert leaving.rfind(b"\x1b[?1049l") > leaving.rfind(b"\x1b[?1049h")
        assert leaving.rfind(b"\x1b[?25h") > leaving.rfind(b"\x1b[?25l")
        assert "-icanon" not in settings.split() and "icanon" in settings.split()
        assert "-echo" not in settings.split() and "echo" in settings.split()
        term.child.close()
        assert term.child.exitstatus == 0
    finally:
        gated.end()


def test_quitting_while_the_repository_server_does_not_answer_leaves_within_seconds(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    gated = GatedScript(tmp_path, env_for, [0])
    server = shared.server_pid(gated.gangadir / "repository")
    assert server is not None
    try:
        top = f"{sys.executable} -m ganga_like.cli top --interval 0.3"
        term = Terminal(f'{top}; echo "EXIT=$?"', env_for)
        term.until(lambda _t: " 0/1 " in term.row_of(gated.job_id), "the job")
        os.kill(server, signal.SIGSTOP)
        term.until(lambda t: "repository not answering for" in t, "the line saying so")
        term.child.send("q")
        asked = time.monotonic()
        term.child.expect(rb"EXIT=(\d+)", timeout=60)
        took = time.monotonic() - asked
        assert term.child.match.group(1) == b"0"
        assert b"ganga: the repository did not answer within 5 s" in term.child.before
        assert took < 30, f"quitting took {took:.1f} s"  # 5 s for the read, then out
    finally:
        os.kill(server, signal.SIGCONT)
        gated.end()
