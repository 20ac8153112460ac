"""In the real `ganga` shell, killing a job that others wait for asks what becomes of them."""

from __future__ import annotations

from pathlib import Path

from .test_shell import Shell, shell_env  # noqa: F401 (the fixture)


def test_the_shell_asks_what_becomes_of_the_waiting_jobs_when_their_upstream_is_killed(
    shell_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    shell = Shell(shell_env)
    try:
        shell.run(
            "a = Job(application=Executable(exe='sh', args=['-c', "
            f"'while ! test -e {gate}; do sleep 0.1; done']))"
        )
        shell.run("b = Job(after=a); c = Job(after=b); a.submit(); b.submit(); c.submit()")
        assert shell.run("print(b.status, c.status)") == "waiting waiting"

        # Declined (Enter): nothing is killed.
        shell.child.sendline("a.kill()")
        shell.expect(r"\[s/k/C\]")
        shell.child.sendline("")
        shell.count += 1
        out = shell.expect(shell.prompt(shell.count))
        assert "cancelled; nothing done" in out
        assert shell.run("print(a.status in ('submitted', 'running'), b.status)") == "True waiting"

        # Skip: the waiting chain is skipped, naming the kill.
        shell.child.sendline("a.kill()")
        shell.expect(r"job\(s\) \d+ wait for it")
        shell.expect(r"\[s/k/C\]")
        shell.child.sendline("s")
        shell.count += 1
        shell.expect(shell.prompt(shell.count))
        assert shell.run("print(a.status, b.status, c.status)") == "killed skipped skipped"
        assert shell.run("print(c.history[-1].cause)").endswith("was killed")
        assert "skipped: it waited for" in shell.run("why(c)")
    finally:
        shell.exit()
