"""Submit a 10,000-subjob job (Executable /bin/true, Local) and time submit() until it returns.

    python scripts/bench/bench_submit.py [N]

Prints the wall time of submit(), the split/record/hand-off phases' total, the repository
growth per subjob, and (after the job completed) the process's peak RSS.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-submit-")) / "gangadir"
    os.environ["GANGA_DIR"] = str(gangadir)
    from ganga_like import ArgSplitter, Executable, Job, Local
    from ganga_like.runtime.session import current_session
    from ganga_like_local.backend import runner_dir
    from ganga_like_local.runner import client as runner_client

    session = current_session()
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
        backend=Local(),
    )
    data = gangadir / "repository" / "Data.fs"
    size_before = data.stat().st_size
    started = time.perf_counter()
    j.submit()
    submit_wall = time.perf_counter() - started
    size_after_submit = data.stat().st_size
    print(f"submit() of {n} subjobs: {submit_wall:.2f} s wall")
    print(f"repository growth at submit: {(size_after_submit - size_before) / n:.0f} B/subjob")
    j.wait(timeout=3600)
    done = time.perf_counter() - started
    size_done = data.stat().st_size
    print(f"all {n} completed after {done:.1f} s; status {j.status}")
    print(f"repository growth after completion: {(size_done - size_before) / n:.0f} B/subjob")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the submitting process: {rss:.0f} MB")
    session.close()
    runner_client.stop(runner_dir(gangadir))


if __name__ == "__main__":
    main()
