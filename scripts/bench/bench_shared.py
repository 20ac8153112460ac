"""Shared mode: listing from a second session, update round trips, lease takeover.

    python scripts/bench/bench_shared.py [GANGADIR]

1. Builds 1,000 jobs (each its own commit, as the GPI makes them) in shared mode.
2. Lists them from a second session in a fresh process (``repr(jobs)``), twice: the first
   process fills its persistent client cache (cold), the second starts with it (warm).
   Target: warm <= 0.2 s.
3. One subjob status update round trip: a client changes one subjob's status and commits,
   500 times; median and 90th percentile, in shared mode and (for comparison) embedded.
   Target: shared median <= 5 ms.
4. Monitor lease takeover: how long after its holder is killed another session polls.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

LIST = """
    import time
    t0 = time.perf_counter()
    from ganga_like import jobs
    from ganga_like.runtime.session import current_session
    current_session()
    t1 = time.perf_counter()
    text = repr(jobs)
    t2 = time.perf_counter()
    print(f"{t1 - t0:.4f} {t2 - t1:.4f} {text.count(chr(10))}")
"""

UPDATES = """
    import statistics, sys, time
    from ganga_like.model.status import Status
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    session = open_session(Settings(monitoring=False))
    repo = session.repo
    master = session.registry().get(int(sys.argv[1]))
    subjobs = list(master.iter_subjobs())
    tm = repo.connection().transaction_manager
    times = []
    for i in range(500):
        sj = subjobs[i % len(subjobs)]
        t0 = time.perf_counter()
        target = Status.SUBMITTING if sj.status == "new" else Status.NEW
        sj.change_status(target, "bench")
        tm.commit()
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"{statistics.median(times) * 1e3:.2f} {times[int(len(times) * 0.9)] * 1e3:.2f}")
"""

HOLDER = """
    import time
    from ganga_like.runtime.session import current_session
    s = current_session()
    while not s.monitor.lease.held:
        s.monitor.run_once(); time.sleep(0.01)
    print("holding", flush=True)
    time.sleep(600)
"""


def run(code: str, env: dict[str, str], *argv: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    return out.stdout.strip()


def main() -> None:
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="bench-"))
    gangadir = base / "gangadir"
    from ganga_like.model.job import Job as JobImpl
    from ganga_like.repository.registry import Registry
    from ganga_like.repository.zeo import shared
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings

    env = dict(
        os.environ,
        GANGA_DIR=str(gangadir),
        GANGA_REPOSITORY_MODE="shared",
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        XDG_CONFIG_HOME=str(base / "xdg"),
    )
    session = open_session(
        Settings(gangadir=gangadir, repository_mode="shared", monitoring=False, zeo_idle_exit=5)
    )
    t0 = time.perf_counter()
    for i in range(1000):

        def add(i: int = i) -> None:
            job = JobImpl()
            job.name = f"job{i}"
            Registry(session.repo.connection().root()).add(job)

        session.repo.in_transaction(add)
    print(f"1,000 jobs created, one commit each: {time.perf_counter() - t0:.2f} s")

    def master() -> int:
        job = JobImpl()
        subjobs = [JobImpl.new_subjob(job, k) for k in range(100)]
        for sj in subjobs:
            sj.__dict__["status"] = "new"
        job.attach_subjobs(subjobs)
        return Registry(session.repo.connection().root()).add(job)

    master_id = session.repo.in_transaction(master)

    for label in ("cold", "warm", "warm"):
        opened, listed, rows = run(LIST, env).split()
        print(
            f"second session, list 1,000 jobs ({label} client cache): {float(listed):.3f} s "
            f"(opening the session {float(opened):.3f} s; {rows} lines)"
        )

    median, p90 = run(UPDATES, env, str(master_id)).split()
    print(f"subjob status update round trip, shared: median {median} ms, p90 {p90} ms")
    close_session()
    shared.stop_server(gangadir / "repository")
    median, p90 = run(UPDATES, dict(env, GANGA_REPOSITORY_MODE="embedded"), str(master_id)).split()
    print(f"subjob status update round trip, embedded: median {median} ms, p90 {p90} ms")

    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    session = open_session(Settings(gangadir=gangadir, repository_mode="shared", zeo_idle_exit=5))
    time.sleep(0.5)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    killed = time.perf_counter()
    while not session.monitor.lease.held:
        time.sleep(0.005)
    print(
        f"monitor lease taken over {time.perf_counter() - killed:.2f} s after its holder "
        f"was killed (Settings.monitor_lease_timeout = "
        f"{session.settings.monitor_lease_timeout} s)"
    )
    close_session()
    shared.stop_server(gangadir / "repository")


if __name__ == "__main__":
    main()
