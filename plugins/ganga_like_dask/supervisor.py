"""Between a Dask worker and a subjob's program: ends the program's whole process tree
when the worker dies.

    python -I -S supervisor.py WORKER_PID STATUS_FD PROGRAM [ARG ...]

The worker starts it as the leader of a new session, in the work directory and with the
program's environment. It asks the kernel for SIGTERM when the worker dies (Linux), starts
the program in its process group (the one a kill by the worker signals), and waits for it.
A worker killed with SIGKILL (or with its whole cluster) can kill nothing: the death signal
reaches this process, which outlives the worker, and it sends SIGKILL to the group, so that
the program's children die too instead of running on, unseen, beside a second attempt of
the subjob.

Whether the program started is written to STATUS_FD (``started``, ``not-found``,
``not-executable`` or ``error: <why>``), then it is closed. This process exits as the
program did: with its exit code, or killed by the same signal.

A SIGTERM or SIGINT while the worker lives is the worker killing the group: the program got
it too and decides; this process waits for it. Run as a file with ``-S``: it imports
only the standard library, and starts in milliseconds.
"""

from __future__ import annotations

import os
import signal
import sys

# prctl(2): the signal a process gets when the thread that started it dies.
PR_SET_PDEATHSIG = 1
# The signals the worker's death is told by; and those a kill of the group sends.
DEATH_SIGNAL = signal.SIGTERM
HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Dispositions the program gets back: the interpreter ignores these, and ignored signals
# survive exec.
RESET = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, n))


def main(argv: list[str]) -> None:
    worker, status, program = int(argv[1]), int(argv[2]), argv[3:]

    def on_signal(signum: int, frame: object) -> None:
        if os.getppid() != worker:  # the worker is gone: so is all the program started
            os.killpg(0, signal.SIGKILL)

    for signum in HANDLED:
        signal.signal(signum, on_signal)
    _ask_for_death_signal()
    if os.getppid() != worker:  # the worker died before the request was in place
        os._exit(137)
    os.set_inheritable(status, False)
    try:
        pid = os.posix_spawnp(
            program[0], program, os.environ, setsigmask=(), setsigdef=RESET + HANDLED
        )
    except OSError as exc:
        _tell(status, _why(exc))
        os._exit(127)
    _tell(status, "started")
    _, code = os.waitpid(pid, 0)  # retried after a signal's handler (PEP 475)
    _exit_as(os.waitstatus_to_exitcode(code))


def _ask_for_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, int(DEATH_SIGNAL), 0, 0, 0)


def _why(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "not-found"
    if isinstance(exc, PermissionError):
        return "not-executable"
    return f"error: {exc.strerror or exc}"


def _tell(status: int, what: str) -> None:
    os.write(status, what.encode())
    os.close(status)


def _exit_as(code: int) -> None:
    if code < 0:  # killed by a signal: die of it too, without a core file of our own
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv)
