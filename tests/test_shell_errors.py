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
            "failed, killed, completed_frozen, failed_frozen, waiting, skipped"
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


def test_actions_given_odd_arguments_answer_in_one_line_and_lose_no_job(
    shell_env: dict[str, str],
) -> None:
    shell = Shell(shell_env)
    try:
        shell.run("for i in range(12): Job(name=f'j{i}')")
        assert shell.run("jobs.remove(10)") == "Out[2]: []"
        assert shell.run("jobs.ids()") == "Out[3]: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]"
        for typed, line in (
            (
                "jobs.remove(True)",
                "ERROR: jobs.remove(): expected job ids or jobs, not the bool True; "
                "options are keywords, e.g. keep_going=True",
            ),
            (
                "jobs(0).submit(True)",
                "ERROR: Job.submit() takes its options as keywords, "
                "submit(keep_going=..., dry_run=...); not by position the bool True",
            ),
            (
                "jobs.select(nosuch=1)",
                "ERROR: jobs.select() has no option 'nosuch' (options: "
                "status, name, backend, application)",
            ),
            (
                "jobs(0).application = None",
                "ERROR: Job.application cannot be None: a job needs one, e.g. Executable()",
            ),
        ):
            assert _lines(shell.run(typed)) == [line], typed
        out = shell.run("jobs.query('status=complete')")
        assert _lines(out)[0] == "ERROR: unknown status 'complete'; did you mean 'completed'?"
        assert "Traceback" not in out
        shell.run("import copy")
        assert shell.run("copy.copy(jobs(0)).id").endswith(": 12")
        assert shell.run("len(jobs)").endswith(": 12")
    finally:
        shell.exit()


def test_lookups_given_odd_values_answer_in_one_line_in_the_shell(
    shell_env: dict[str, str],
) -> None:
    shell = Shell(shell_env)
    try:
        shell.run("j = Job(name='kept')")
        shell.run(
            "Unshowable = type('Unshowable', (), {'__repr__': "
            "lambda self: (_ for _ in ()).throw(RuntimeError('no repr'))})"
        )
        unshowable = "a Unshowable object whose repr() raises RuntimeError"
        for typed, line in (
            (
                "jobs(Unshowable())",
                f"ERROR: jobs(): expected a job id (3, (3, 1) or '3.1'), not {unshowable}",
            ),
            (
                "jobs(1.5)",
                "ERROR: jobs(): expected a job id (3, (3, 1) or '3.1'), not the float 1.5",
            ),
            (
                "jobs['a':'b']",
                "ERROR: jobs: a position is a whole number or a slice of them (e.g. [0], [-1], "
                "[2:5]), not the slice slice('a', 'b', None); (job id) looks a job up by its id",
            ),
            (
                "templates(None)",
                "ERROR: templates(): expected a template id (0, 1, ...), not the NoneType None",
            ),
            (
                "jobs.select(name=Unshowable())",
                f"ERROR: jobs.select(): name expected a string, not {unshowable}",
            ),
            (
                "j.wait(timeout=object())",
                "ERROR: wait(): timeout expected a number of seconds, 0 or more (or None: no "
                "limit), not the object <object object at",
            ),
            (
                "j.force_status(Unshowable())",
                f"ERROR: force_status accepts 'completed' or 'failed', not {unshowable}",
            ),
        ):
            lines = _lines(shell.run(typed))
            assert len(lines) == 1 and lines[0].startswith(line), (typed, lines)
        out = shell.run("import pickle; pickle.dumps(jobs)")
        assert _lines(out) == [
            "ERROR: jobs cannot be pickled: jobs live in the repository; pickle their ids "
            "(.ids()) and look each up again (jobs(id)), or write their descriptions with "
            "export(..., 'file.txt') and load() them"
        ], out
        assert shell.run("jobs.select(name='kept').ids()").endswith(": [0]")
        assert shell.run("j.status").endswith(": 'new'")
    finally:
        shell.exit()
