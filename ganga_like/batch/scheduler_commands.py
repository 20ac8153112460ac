"""Running a batch system's client commands: one argument list, never a shell, a timeout,
and failures as :class:`CommandError` saying whether a retry may help."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Callable, Sequence

__all__ = ["CommandError", "command_failure", "one_line", "run_command"]


class CommandError(RuntimeError):
    """A scheduler command failed; ``transient`` says whether a later retry may succeed."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        command: Sequence[str] = (),
        returncode: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient
        self.command = tuple(command)
        self.returncode = returncode

    def as_submit_failure(self, program: str) -> str:
        """What a failed submission by ``program`` says: a permanent failure of a command
        that ran is the scheduler's refusal of the request, said plainly (sending it again
        would be refused the same way)."""
        refused = not self.transient and self.returncode is not None
        return f"{program} refused it: {self.message}" if refused else f"{program}: {self.message}"

    def __str__(self) -> str:
        kind = "transient" if self.transient else "permanent"
        where = f"{self.command[0]}: " if self.command else ""
        return f"{where}{self.message} ({kind})"


def run_command(
    args: Sequence[str],
    *,
    timeout: float,
    input_text: str | None = None,
    counts: Counter[str] | None = None,
    error: type[CommandError] = CommandError,
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (``input_text`` on stdin), counted in ``counts`` by program name.

    A timeout is transient (the scheduler may answer later); a missing program is not.
    A non-zero exit is returned, not raised: what it means depends on the command."""
    if counts is not None:
        counts[args[0]] += 1
    try:
        return subprocess.run(
            list(args),
            input=input_text,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise error(
            f"{args[0]} timed out after {timeout:g}s", transient=True, command=args
        ) from None
    except FileNotFoundError:
        raise error(f"{args[0]} not found on PATH", transient=False, command=args) from None


def one_line(text: str, program: str) -> str:
    """A command's message on one line: its lines joined by "; ", each without the
    ``<program>: error:`` its tool puts in front (the caller names the program), repeats
    left out."""
    lines: dict[str, None] = {}
    for line in text.splitlines():
        line = line.strip()
        for prefix in (f"{program}: error:", f"{program}:"):
            if line.startswith(prefix):
                line = line[len(prefix) :].strip()
                break
        if line:
            lines[line] = None
    return "; ".join(lines)


def command_failure(
    args: Sequence[str],
    result: subprocess.CompletedProcess[str],
    is_transient: Callable[[str], bool],
    error: type[CommandError] = CommandError,
) -> CommandError:
    """The error for a command that exited non-zero: its own message (stderr, else stdout),
    transient as ``is_transient`` reads that message."""
    message = one_line(result.stderr, args[0]) or one_line(result.stdout, args[0])
    if not message:
        message = f"exited with status {result.returncode} and no message"
    return error(
        message, transient=is_transient(message), command=args, returncode=result.returncode
    )
