"""Submit a 10,000-subjob job (Executable /bin/true, Local) and time submit() until it returns.

    python scripts/bench/bench_submit.py [N] [--kill]

Prints the wall time and CPU of submit(), the repository growth per subjob, and (after the
job completed) the process's peak RSS. With ``--kill`` the peak RSS is that of the submission
alone: as soon as submit() returned the runner is killed (1,000,000 subjobs would run for
most of an hour) and the gangadir removed.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 10_000
    kill = "--kill" in sys.argv
    gangadir = Path(tempfile.mkdtemp(prefix="bench-submit-")) / "gangadir"
    os.environ["GANGA_DIR"] = str(gangadir)
    from ganga_like import ArgSplitter, Executable, Job, Local
    from ganga_like.runtime.session import current_session
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    session = current_session()
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
        backend=Local(),
    )
    data = gangadir / "repository" / "Data.fs"
    size_before = data.stat().st_size
    started, cpu = time.perf_counter(), time.process_time()
    j.submit()
    submit_wall, submit_cpu = time.perf_counter() - started, time.process_time() - cpu
    size_after_submit = data.stat().st_size
    print(f"submit() of {n} subjobs: {submit_wall:.2f} s wall, {submit_cpu:.2f} s CPU", flush=True)
    print(f"repository growth at submit: {(size_after_submit - size_before) / n:.0f} B/subjob")
    if kill:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of the submitting process: {rss:.0f} MB", flush=True)
        # Everything goes with the gangadir: the runner is ended, not each subjob killed
        # (killing a million records takes longer than submitting them).
        session.close()  # first: its monitor would start the runner again
        pid = runner_client.runner_pid(runner_dir(gangadir))
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        from ganga_like.repository.zeo import shared

        shared.stop_server(gangadir / "repository")
        shutil.rmtree(gangadir.parent, ignore_errors=True)
        return
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
