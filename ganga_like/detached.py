"""Starting a detached helper process and waiting for the line it writes once it is ready.

The repository server, the monitor daemon and the Local runner are started the same way:
with this interpreter and our import path (they unpickle or run our own code), in a new
session (a Ctrl-C in the shell that started them must not reach them), with ``/`` as
working directory (they must not keep any directory busy), their output appended to a log
file, and, for the first two, a pipe on which they write one line saying whether they are
ready or why not.  The line is read here with a deadline, so that a helper that hangs or
dies at start-up is an error with a reason, never a wait forever.

Low level on purpose: this imports nothing from ganga_like but ``errors``, so every layer
(and the Local runner's client, which runs in the session process) may use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from ganga_like.errors import GangaError

__all__ = [
    "Detached",
    "HelperNotReady",
    "flock_within",
    "import_path",
    "reap_when_it_exits",
    "send_ready_line",
    "start_detached",
    "stop_detached",
]

# The option through which a helper is told the descriptor of its ready pipe.
READY_FD_OPTION = "--ready-fd"


class HelperNotReady(GangaError):
    """A helper exited, or stayed silent past its deadline, before saying it was ready."""

    def __init__(self, reason: str, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.proc = proc  # still running when it timed out: the caller decides its fate


@dataclass(frozen=True)
class Detached:
    """A helper just started: its process, and its ready line when one was waited for."""

    proc: subprocess.Popen[bytes]
    ready_line: str | None


def flock_within(fd: int, kind: int, timeout: float) -> bool:
    """Take the ``flock`` of ``kind`` on ``fd``, trying for ``timeout`` seconds: False when
    another process held it all that time (a helper starting or leaving holds such a lock
    briefly, so a short wait is normal and a long one is worth a message)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def start_detached(
    argv: Sequence[str],
    log_path: Path,
    *,
    ready_timeout: float | None = None,
    pass_fds: Sequence[int] = (),
    first_on_path: Path | None = None,
    blocked_signals: Collection[signal.Signals] = (),
) -> Detached:
    """Start ``argv`` detached, its stdout and stderr appended to ``log_path``.

    With ``ready_timeout``, a pipe is passed as ``--ready-fd N`` (added to ``argv``) and the
    first line the helper writes on it is waited for, at most that many seconds; what the
    helper wrote before closing the pipe counts as its line.  Raises ``HelperNotReady``
    when it exits or times out without one.  ``first_on_path`` goes first on the child's
    ``PYTHONPATH`` (default: the directory holding ganga_like).  ``blocked_signals`` are
    blocked in the child from its first instruction on (the mask survives exec), so that a
    signal sent before it has installed its handlers cannot kill it.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(import_path(first_on_path))
    read_fd = write_fd = -1
    command = list(argv)
    fds = list(pass_fds)
    if ready_timeout is not None:
        read_fd, write_fd = os.pipe()
        command += [READY_FD_OPTION, str(write_fd)]
        fds.append(write_fd)
    try:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked_signals)
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                cwd="/",
                env=env,
                pass_fds=tuple(fds),
                close_fds=True,
                start_new_session=True,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            os.close(log_fd)
    except BaseException:
        if read_fd >= 0:
            os.close(read_fd)
        raise
    finally:
        if write_fd >= 0:
            os.close(write_fd)  # the child's copy is the only writer left
    if ready_timeout is None:
        return Detached(proc, None)
    try:
        return Detached(proc, _read_ready_line(read_fd, proc, ready_timeout))
    finally:
        os.close(read_fd)


def reap_when_it_exits(proc: subprocess.Popen[bytes]) -> None:
    """Collect ``proc``'s exit status as soon as it exits, so that a helper this process
    started never lingers as a zombie: a daemon thread waits for it, and nothing needs
    to keep the process object (a module's list of them would be state shared by every
    session of the process)."""
    waiter = threading.Thread(target=proc.wait, name=f"ganga_like-reap-{proc.pid}", daemon=True)
    waiter.start()


def _read_ready_line(fd: int, proc: subprocess.Popen[bytes], timeout: float) -> str:
    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HelperNotReady(f"it did not say it was ready within {timeout:g} s", proc)
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            if proc.poll() is not None:
                raise HelperNotReady(_exited(proc), proc)
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            partial = data.decode(errors="replace").strip()
            if partial:
                return partial
            raise HelperNotReady(_exited(proc), proc)
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace")


def send_ready_line(fd: int, line: str) -> None:
    """In a helper: write its one line on the ready pipe ``fd`` (-1: none was given) and
    close it. A session that stopped waiting has closed its end: that is no error here."""
    if fd < 0:
        return
    with contextlib.suppress(OSError):
        os.write(fd, (" ".join(line.split()) + "\n").encode())
        os.close(fd)


def _exited(proc: subprocess.Popen[bytes]) -> str:
    code = proc.poll()
    return "it exited at start" + ("" if code is None else f" (exit code {code})")


def import_path(first: Path | None = None) -> list[str]:
    """``sys.path`` made absolute, with ``first`` (default: the directory holding
    ganga_like) in front: a child started with it as PYTHONPATH imports the same code, and
    so resolves the same classes."""
    root = first if first is not None else Path(__file__).resolve().parent.parent
    paths = [str(root)]
    for entry in sys.path:
        absolute = os.path.abspath(entry or os.curdir)
        if absolute not in paths:
            paths.append(absolute)
    return paths


def stop_detached(
    pid: int, still_running: Callable[[], bool], timeout: float, poll: float = 0.02
) -> bool:
    """Ask the helper ``pid`` to exit (SIGTERM: it finishes what it is doing) and wait until
    ``still_running()`` says it is gone; False if it was still there after ``timeout``
    seconds. A helper already gone counts as stopped."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while still_running():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True
