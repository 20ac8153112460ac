"""``j.stats()`` on masters of 1,000 and 10,000 finished subjobs, read from a repository.

    python scripts/bench/bench_stats.py [N ...] [--profile]

Builds, through the model and registry directly (the Local backend would take minutes to
run that many), one master per N (default 1,000 and 10,000) whose subjobs went submitted,
running and completed or (1 in 20) failed with one of three exit codes, each with what it
used recorded, as the Local runner records it. Then, in a fresh process, times
``j.stats()`` on each master: the first call (its subjobs read from the storage) and a
second one (in the connection's cache); and, in another fresh process, a plain pass over
the subjobs reading each one's event log, one record at a time.

``--profile``: instead, in a fresh process, profile each master's first ``j.stats()``
(cProfile) and print its wall and CPU time, the share spent loading subjob records from
the storage, and the functions that took longest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURE = r"""
import sys, time
from ganga_like import jobs
for text in sys.argv[1:]:
    job_id, n = map(int, text.split(":"))
    j = jobs(job_id)
    for label in ("first", "again"):
        t0 = time.perf_counter()
        s = j.stats()
        took = time.perf_counter() - t0
        assert s.total == n and s.resources.measured == n
        each = f"{1e6 * took / n:.1f} us/subjob"
        print(f"{n:>7} subjobs, stats {label}: {1000 * took:8.1f} ms  ({each})")
"""
# A plain pass for comparison: reading each subjob's event log once, one record at a time
# (a fresh process, so that the records come from the storage as in the first stats call,
# which asks for them in batches).
FLOOR = r"""
import sys, time
from ganga_like import jobs
from ganga_like.gpi.proxy import unwrap
for text in sys.argv[1:]:
    job_id, n = map(int, text.split(":"))
    master = unwrap(jobs(job_id))
    t0 = time.perf_counter()
    read = sum(len(sj.history) for sj in master.iter_subjobs())
    took = time.perf_counter() - t0
    each = f"{1e6 * took / n:.1f} us/subjob"
    print(f"{n:>7} subjobs, a plain pass: {1000 * took:8.1f} ms  ({each})")
"""

# The first call under cProfile: what loading the records costs against the rest.
PROFILE = r"""
import cProfile, pstats, sys, time
from ganga_like import jobs
for text in sys.argv[1:]:
    job_id, n = map(int, text.split(":"))
    j = jobs(job_id)
    profile = cProfile.Profile()
    t0, c0 = time.perf_counter(), time.process_time()
    profile.enable()
    j.stats()
    profile.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    found = pstats.Stats(profile)
    loading = sum(
        row[3]
        for (path, _line, name), row in found.stats.items()
        if name == "setstate" and path.endswith("ZODB/Connection.py")
    )
    print(f"{n:>7} subjobs, stats first, profiled: {wall:.2f} s wall, {cpu:.2f} s CPU;"
          f" loading records (Connection.setstate) {loading:.2f} s")
    found.sort_stats("tottime").print_stats(12)
"""


def build(gangadir: Path, sizes: list[int]) -> list[tuple[int, int]]:
    from ganga_like.model.job import Job
    from ganga_like.model.status import Status
    from ganga_like.repository.connection import Repository

    repo = Repository(gangadir)
    registry = repo.registry()
    tm = repo.connection().transaction_manager
    built = []
    for n in sizes:
        master = Job(name=f"stats-{n}")
        registry.add(master)
        master.change_status(Status.SUBMITTING, "bench")
        subjobs = [Job.new_subjob(master, i) for i in range(n)]
        for sj in subjobs:
            sj.backend = master.backend
        master.attach_subjobs(subjobs)
        start = time.time() - n
        for i, sj in enumerate(subjobs):
            began = start + i * 0.5
            ended = began + 1.0 + (i % 7)
            sj.change_status(Status.SUBMITTED, "Local: submitted", when=began - 0.2)
            sj.change_status(Status.RUNNING, "Local: running", when=began)
            code = (i // 20) % 3 + 1 if i % 20 == 0 else 0
            final = Status.FAILED if code else Status.COMPLETED
            sj.change_status(final, f"Local: {final.label}, exit code {code}", when=ended)
            sj.exit_code = code
            sj.record_use([20_000 + i % 1000, 0.5, 0.1], began, ended)
        master.change_status(Status.SUBMITTED, "bench")
        registry.reindex(master)
        tm.commit()
        built.append((master.id, n))
    repo.close()
    return built


def main() -> None:
    profile = "--profile" in sys.argv[1:]
    sizes = [int(arg) for arg in sys.argv[1:] if arg != "--profile"] or [1_000, 10_000]
    gangadir = Path(tempfile.mkdtemp(prefix="bench-stats-")) / "gangadir"
    started = time.perf_counter()
    built = build(gangadir, sizes)
    print(f"built {' and '.join(map(str, sizes))} subjobs in {time.perf_counter() - started:.1f} s")
    env = dict(os.environ, GANGA_DIR=str(gangadir))
    args = [f"{job_id}:{n}" for job_id, n in built]
    for code in (PROFILE,) if profile else (FLOOR, MEASURE):
        out = subprocess.run(
            [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True
        )
        print(out.stdout, end="")
        if out.returncode:
            print(out.stderr, end="", file=sys.stderr)
            raise SystemExit(out.returncode)


if __name__ == "__main__":
    main()
