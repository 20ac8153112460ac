"""What each Dask subjob used (peak memory, CPU, wall time), measured by the worker that
ran its program (``wait4`` when it reaps it) and brought back with its result: real
programs that allocate a known amount of memory and burn known CPU on the gangadir's own
LocalCluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")

from ganga_like import ArgSplitter, Dask, Executable, Job
from ganga_like.runtime.session import Session
from ganga_like_dask.settings import Dask as DaskSection

SESSION_SETTINGS = {"monitor_max_interval": 0.5}
SESSION_CONFIG = {DaskSection: {"n_workers": 2, "timeout": 2.0}}
MIB = 1024**2

# Holds $1 MiB, burns $2 CPU seconds, exits with $3.
HUNGRY = (
    "import sys, time\n"
    "block = bytearray(int(sys.argv[1]) * 1024 * 1024)\n"
    "for i in range(0, len(block), 4096): block[i] = 1\n"
    "end = time.process_time() + float(sys.argv[2])\n"
    "while time.process_time() < end: pass\n"
    "sys.exit(int(sys.argv[3]))\n"
)


def test_each_subjob_records_what_its_worker_measured_of_its_program(
    session: Session, tmp_path: Path
) -> None:
    runs = [(150, 1.0, 0), (300, 0.3, 4)]
    j = Job(
        application=Executable(exe=sys.executable),
        splitter=ArgSplitter(args=[["-c", HUNGRY, str(m), str(c), str(e)] for m, c, e in runs]),
        backend=Dask(),
    )
    j.submit()
    assert j.wait(timeout=180) == "failed"
    small, large = (sj.resources_used for sj in j.subjobs)
    assert small is not None and large is not None  # a failed run is measured too
    # The block plus Python itself; zeros or a swapped pair cannot pass.
    assert 150 * MIB <= small.max_rss < 250 * MIB, small
    assert 300 * MIB <= large.max_rss < 400 * MIB, large
    assert 0.95 <= small.cpu <= 6.0, small
    assert 0.28 <= large.cpu <= 6.0, large
    assert small.wall >= small.cpu * 0.5 and small.wall > 0.9, small
    stats = j.stats()
    assert stats.resources.measured == 2
    assert stats.resources.max_rss_fqid == f"{j.id}.1"
    assert stats.resources.cpu == pytest.approx(small.cpu + large.cpu)
    # Kept with the run's record too: what a later cycle reads once Dask forgot the task.
    record = json.loads((j.subjobs[0].outputdir / "__run__").read_text())
    assert record["usage"][0] * 1024 == small.max_rss
