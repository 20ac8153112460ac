"""What ``load()`` of an export costs, against the size of the file.

    python scripts/bench/bench_load.py [JOBS ...] [--gangadir DIR]

For each JOBS (default 1000 4000): makes that many jobs like a scan's (an Executable with
20 arguments, an ArgSplitter of 40 points, Local), writes them with ``export()``, then
times, in a fresh gangadir, ``load()`` of the file (wall, and the CPU of this process: the
commit's storage work is the server's), and apart from it the parse alone
(``ast.parse``), the part no object or commit is in. Prints the file's size, the seconds
and the MB/s of each.
"""

from __future__ import annotations

import ast
import sys
import tempfile
import time
from pathlib import Path


def _jobs(count: int) -> None:
    from ganga_like import ArgSplitter, Executable, Job, Local

    for i in range(count):
        Job(
            name=f"scan{i}",
            application=Executable(exe="/bin/echo", args=[f"arg{i}_{k}" for k in range(20)]),
            splitter=ArgSplitter(args=[[f"x{k}"] for k in range(40)]),
            backend=Local(),
        )


def main() -> None:
    args = sys.argv[1:]
    base = Path(tempfile.mkdtemp(prefix="bench-load-"))
    if "--gangadir" in args:
        at = args.index("--gangadir")
        base = Path(args[at + 1])
        del args[at : at + 2]
    counts = [int(a) for a in args] or [1000, 4000]
    import os

    from ganga_like.runtime.session import close_session

    for count in counts:
        os.environ["GANGA_DIR"] = str(base / f"source-{count}")
        import ganga_like
        from ganga_like import export, jobs, load

        del ganga_like
        _jobs(count)
        target = base / f"export-{count}.txt"
        export(jobs, str(target))
        close_session()
        size = target.stat().st_size / 2**20
        t0 = time.perf_counter()
        ast.parse(target.read_text())
        parse = time.perf_counter() - t0
        os.environ["GANGA_DIR"] = str(base / f"target-{count}")
        t0, cpu0 = time.perf_counter(), time.process_time()
        loaded = load(str(target))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        close_session()
        assert len(loaded) == count
        print(
            f"{count} jobs, export {size:.1f} MB: load {seconds:.1f} s "
            f"({size / seconds:.2f} MB/s), {cpu:.1f} s CPU in this process "
            f"({size / cpu:.2f} MB/s); the parse alone {parse:.1f} s "
            f"({size / parse:.2f} MB/s)"
        )


if __name__ == "__main__":
    main()
