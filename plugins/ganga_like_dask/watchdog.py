"""Beside a subjob's program on a Dask worker: ends the program's whole process group when
the worker dies.

    python -I -S watchdog.py WORKER_PID GROUP

The worker starts the program (in a process group of its own, GROUP) and then this, in a
session of its own, and ends it once the program has ended. It asks the kernel for SIGTERM
when the worker dies (Linux) and then sends SIGKILL to the group. A worker killed with
SIGKILL (or with its whole cluster) can kill nothing, and the program's own death signal
reaches only the program: its children would run on, unseen, beside a second attempt of
the subjob. Other signals, while the worker lives, are ignored. Run as a file with ``-S``:
it imports only the standard library, and starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

# prctl(2): the signal a process gets when the thread that started it dies.
PR_SET_PDEATHSIG = 1
DEATH_SIGNAL = signal.SIGTERM
HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main(argv: list[str]) -> None:
    worker, group = int(argv[1]), int(argv[2])

    def on_signal(signum: int, frame: object) -> None:
        if os.getppid() != worker:  # the worker is gone: so is all its program started
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
            os._exit(0)

    for signum in HANDLED:
        signal.signal(signum, on_signal)
    _ask_for_death_signal()
    on_signal(0, None)  # the worker died before the request was in place
    while True:
        signal.pause()


def _ask_for_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, int(DEATH_SIGNAL), 0, 0, 0)


if __name__ == "__main__":
    main(sys.argv)
