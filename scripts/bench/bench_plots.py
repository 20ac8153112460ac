"""The figures and the HTML report of a master of 100,000 finished subjobs.

    python scripts/bench/bench_plots.py [N] [--rounds R]

Builds a repository with one master of N subjobs (default 100,000) as
``bench_stats.py`` does (through the model and registry: submitted, running, completed or,
1 in 20, failed with one of three exit codes, each with what it used). Then, in a fresh
process, times: importing Plotly; ``j.stats()`` (what the figures are drawn from; read
from the storage, then again from the connection's cache); the subjob grid (the master's
status column); the four figures, first and again; the grid figure as JSON (what a web
page is sent); and the whole report (``j.report()``), its size. The budget: the figures
of 100,000 subjobs in under a second. Wall and CPU are printed: on a shared machine
the wall time is mostly waiting for a core.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_stats import build

MEASURE = r"""
import sys, time
from pathlib import Path

def timed(what, call):
    t0, c0 = time.perf_counter(), time.process_time()
    result = call()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"  {what:<38} {1000 * wall:8.1f} ms wall {1000 * cpu:8.1f} ms CPU")
    return result

job_id, n, rounds, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
timed("import plotly.graph_objects", lambda: __import__("plotly.graph_objects"))
from ganga_like import jobs
from ganga_like.gpi.proxy import unwrap
from ganga_like.runtime.plots.figures import figures
from ganga_like.runtime.plots.report import report_html
from ganga_like.runtime.stats.grid import subjob_grid

j = jobs(job_id)
print(f"{n} subjobs:")
stats = timed("j.stats(), first (from the storage)", j.stats)
stats = timed("j.stats(), again (cached)", j.stats)
assert stats.total == n
for round in range(rounds):
    grid = timed("the subjob grid (status column)", lambda: subjob_grid([unwrap(j)]))
    assert len(grid) == n
    label = "first" if round == 0 else "again"
    figs = timed(f"the four figures, {label}", lambda: figures(stats, grid))
    text = timed("the grid figure as JSON", lambda: figs["grid"].to_json())
    print(f"  {'':<38} {len(text) / 1e6:8.1f} MB")
    html = timed("the report (HTML, figures included)", lambda: report_html(stats, grid))
    print(f"  {'':<38} {len(html) / 1e6:8.1f} MB")
Path(out).write_text(html)
"""


def main() -> None:
    args = sys.argv[1:]
    rounds = 3
    if "--rounds" in args:
        at = args.index("--rounds")
        rounds = int(args[at + 1])
        del args[at : at + 2]
    n = int(args[0]) if args else 100_000
    where = Path(tempfile.mkdtemp(prefix="bench-plots-"))
    started = time.perf_counter()
    ((job_id, _),) = build(where / "gangadir", [n])
    print(f"built {n} subjobs in {time.perf_counter() - started:.1f} s")
    env = dict(os.environ, GANGA_DIR=str(where / "gangadir"))
    report = where / "run.html"
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(job_id), str(n), str(rounds), str(report)], env=env
    )
    if out.returncode:
        raise SystemExit(out.returncode)
    print(f"report written to {report}")


if __name__ == "__main__":
    main()
