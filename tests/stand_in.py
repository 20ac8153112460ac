"""A live process whose command line says what the test needs it to look like."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def process_with_args(*args: str) -> Iterator[int]:
    """The pid of a Python process whose command line ends with ``args``, for as long as
    the block runs. It says when it runs (its command line is then in place) and lives
    until the test closes its stdin."""
    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    stand_in = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert stand_in.stdin is not None and stand_in.stdout is not None
    try:
        assert stand_in.stdout.readline() == b"ready\n"
        yield stand_in.pid
    finally:
        stand_in.stdin.close()
        stand_in.stdout.close()
        stand_in.wait(timeout=60)
