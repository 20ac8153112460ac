"""Mistakes and Ctrl-C in the real ``ganga`` shell: one line each, the prompt comes back,
and the jobs are not touched."""

from __future__ import annotations

import re

from . import test_shell
from .test_shell import Shell, strip

shell_env = test_shell.shell_env  # the real shell's environment, a fixture used by name


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_ctrl_c_in_wait_is_one_line_and_the_job_goes_on(shell_env: dict[str, str]) -> None:
    shell = Shell(shell_env)
    try:
        shell.run("j = Job(application=Executable(exe='sleep', args=['60']))")
        shell.run("j.submit()")
        shell.run("j.wait(until='running', timeout=60)")
        shell.child.sendline("j.wait()")
        shell.count += 1
        shell.expect(r"job 0")  # the wait is under way: its progress line is drawn
        shell.child.send("\x03")
        out = strip(shell.expect(shell.prompt(shell.count)))
        assert "Traceback" not in out, out
        assert _lines(out)[-1:] == [
            "KeyboardInterrupt: wait() for job 0 stopped; the job goes on (running)"
        ], out
        assert len([line for line in _lines(out) if "KeyboardInterrupt" in line]) == 1, out
        assert shell.run("j.status") == "Out[5]: 'running'"

        # Wrong status names: one line listing the valid ones.
        out = shell.run("j.wait(until='done')")
        assert _lines(out) == [
            "ERROR: unknown status 'done'; expected one of: new, "
            "submitting, submitted, running, completing, completed, "
            "failed, killed, completed_frozen, failed_frozen"
        ], out
        out = shell.run("j.force_status('done')")
        assert _lines(out) == ["ERROR: force_status accepts 'completed' or 'failed', not 'done'"], (
            out
        )

        # A list nested 10,000 deep: one schema error, no RecursionError.
        shell.run("deep = ['x']")
        shell.run("for _ in range(10000): deep = [deep]")
        out = shell.run("Executable(args=deep)")
        assert _lines(out) == [
            "ERROR: Executable.args: lists or dicts nested more than 32 deep are not accepted"
        ], out
        assert re.search(r"'running'", shell.run("j.status"))
        shell.run("j.kill()")
    finally:
        shell.exit()
