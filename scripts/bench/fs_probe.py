"""How much creating a file or directory costs right now, where a benchmark writes.

The Local benchmarks create several inodes per subjob, the pool they are compared with one
per task, so a slow file system moves their ratio.  On an ext4 volume without a journal
(``/sys/fs/ext4/<dev>/journal_task`` reads ``<none>``) the inode allocator skips inodes
freed in the last half-minute or more, and after many deletions every creation pays for
that search: 0.5-2 ms per inode instead of 20-40 us.  The benchmarks therefore never delete
what they create, and print this probe before each round so that a reader can tell a slow
round from a slow file system.

    python scripts/bench/fs_probe.py [DIR]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

PROBE_DIRS = 50
FILES_PER_DIR = 3


def inode_cost(where: Path) -> float:
    """Microseconds per created inode (one directory and three files at a time, as a
    Local subjob).  What it creates is left in place: deleting it would slow the next
    creations on the file systems this probe is meant to expose."""
    base = Path(tempfile.mkdtemp(prefix="fs-probe-", dir=where))
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    started = time.perf_counter()
    for index in range(PROBE_DIRS):
        directory = base / str(index)
        os.mkdir(directory)
        for name in range(FILES_PER_DIR):
            os.close(os.open(directory / str(name), flags, 0o644))
    elapsed = time.perf_counter() - started
    return 1e6 * elapsed / (PROBE_DIRS * (1 + FILES_PER_DIR))


def describe(where: Path) -> str:
    return f"file creation in {where}: {inode_cost(where):.0f} us per inode"


if __name__ == "__main__":
    print(describe(Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir())))
