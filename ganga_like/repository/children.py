"""Starting helper processes (the repository server, the monitor daemon) and waiting for
the one line each writes when it is ready."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["import_path", "read_ready_line"]


def read_ready_line(fd: int, proc: subprocess.Popen[bytes], timeout: float, *,
                    timed_out: str, exited: str) -> str:
    """The first line the child writes on ``fd``; ``timed_out`` or ``exited`` (or what it
    wrote before closing) when it never finishes that line."""
    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return timed_out
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            if proc.poll() is not None:
                return exited
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return data.decode(errors="replace").strip() or exited
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace")


def import_path() -> list[str]:
    """sys.path made absolute, with the directory holding ganga_like first: a child started
    with it as PYTHONPATH imports the same code (and so resolves the same classes)."""
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    paths = [package_root]
    for entry in sys.path:
        absolute = os.path.abspath(entry or os.curdir)
        if absolute not in paths:
            paths.append(absolute)
    return paths
