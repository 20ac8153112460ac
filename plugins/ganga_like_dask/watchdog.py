"""Beside a Dask worker: ends the process groups of the programs it runs when it dies.

    python -I -S watchdog.py MARK

A worker starts one of these on first use (:func:`ganga_like_dask.task.run`) and tells it on
its stdin, a line each, ``+GROUP`` when a program starts (in a process group of its own,
GROUP) and ``-GROUP`` once it has reaped it. When the worker dies, however (SIGKILL, or with
its whole cluster), the kernel closes its end of the pipe: this then sends SIGKILL to every
group still registered, and exits. A worker killed with SIGKILL can kill nothing, and its
programs, in groups of their own, would otherwise run on, unseen, beside a second attempt of
their subjobs. A program the worker started but had not yet told of when it died is found by
the variable ``GANGA_DASK_WORKER=MARK`` the worker puts in every program's environment, which
its children inherit. Signals are ignored: the end of the pipe is what ends it. One per worker, not
per program: starting an interpreter costs many times what a short program does. Run as a
file with ``-S``: it imports only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The variable that marks the programs of one worker (and their children).
MARK_VARIABLE = "GANGA_DASK_WORKER"
# Passes over /proc for marked processes: one more while the last found any (a process
# found may have started another meanwhile).
MARKED_PASSES = 5


def main(argv: list[str]) -> None:
    for signum in IGNORED:
        signal.signal(signum, signal.SIG_IGN)
    groups: set[int] = set()
    pending = b""
    # Read to the end: what the worker wrote before it died is still in the pipe, so a
    # worker that dies before this has even started still has its programs ended.
    while chunk := os.read(0, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError):
                group = int(line[1:])
                if line.startswith(b"+"):
                    groups.add(group)
                else:
                    groups.discard(group)
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    mark = f"{MARK_VARIABLE}={argv[1]}".encode() if len(argv) > 1 else None
    for _ in range(MARKED_PASSES if mark else 0):
        found = _marked(mark)  # type: ignore[arg-type]
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not found:
            break


def _marked(mark: bytes) -> list[int]:
    """The processes whose environment holds ``mark`` (none where there is no /proc)."""
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    environ = handle.read()
            except OSError:
                continue  # gone, or not ours
            if mark in environ.split(b"\0"):
                found.append(int(name))
    return found


if __name__ == "__main__":
    main(sys.argv)
