"""``j.dashboard()`` in a real notebook (nbclient on a real ipykernel): the cell returns at
once, later cells run while the plots are redrawn, the displays follow the job to its end,
and ``stop()`` ends the updates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

from ganga_like.runtime.plots.dashboard import PLOTLY_MIMETYPE

from .test_notebook import kernel_env, run_notebook

__all__ = ["kernel_env"]  # the fixture, used by name

# Each subjob waits for the gate file, then exits with its argument.
GATED = (
    "import os, sys, time\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def cells(gate: Path, never: Path) -> list[str]:
    return [
        "%load_ext ganga_like",
        f"import sys, time\nGATED = {GATED!r}\n"
        "j = Job(application=Executable(exe=sys.executable),\n"
        f"        splitter=ArgSplitter(args=[['-c', GATED, {str(gate)!r}, c] for c in '003']))\n"
        "j.submit()",
        "started = time.monotonic()\n"
        "d = j.dashboard(interval=0.2)\n"
        "print('returned after', time.monotonic() - started, 'drawn', d.updates, 'live', d.live)",
        # A later cell runs while the dashboard goes on drawing.
        "drawn = d.updates\n"
        "await d.next_update(timeout=60)\n"
        "print('later cell', d.updates > drawn, d.live)",
        f"open({str(gate)!r}, 'w').close()\n"
        "while d.live:\n"
        "    await d.next_update(timeout=60)\n"
        "print(json.dumps(d.stats.counts, sort_keys=True), d.live)",
        # stop(): a job that never ends stops being drawn when asked.
        "k = Job(application=Executable(exe=sys.executable),\n"
        f"        splitter=ArgSplitter(args=[['-c', GATED, {str(never)!r}, '0']] * 2))\n"
        "k.submit()\n"
        "e = k.dashboard(interval=0.2)\n"
        "e.stop()\n"
        "print('stopped', e.live)\n"
        "k.kill()",
    ]


def displays(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o["data"] for o in outputs if o["output_type"] == "display_data"]


def test_the_dashboard_draws_live_without_holding_the_kernel(kernel_env: Path) -> None:
    nb = nbformat.v4.new_notebook()
    gate, never = kernel_env / "gate", kernel_env / "never"
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells(gate, never)]
    nb.cells.insert(1, nbformat.v4.new_code_cell("import json"))
    run_notebook(nb, kernel_env)
    out = [cell.outputs for cell in nb.cells]

    printed = out[3][-1]["text"].split()
    # The cell read nothing: the first drawing is the task's, once the cell has returned.
    assert printed[0] == "returned" and printed[-4:] == ["drawn", "0", "live", "True"]
    assert out[4][-1]["text"].split() == ["later", "cell", "True", "True"]
    counts, live = out[5][-1]["text"].rsplit(" ", 1)
    assert json.loads(counts) == {"completed": 2, "failed": 1} and live.strip() == "False"

    # The displays of the dashboard's cell were updated in place to the end.
    summary, *figures = displays(out[3])
    assert "completed 2  failed 3" not in summary["text/plain"]  # not a stale picture
    assert "completed 2" in summary["text/plain"] and "failed 1" in summary["text/plain"]
    assert "ended" in summary["text/plain"] and "exit code 3" in summary["text/html"]
    assert len(figures) == 4 and all(PLOTLY_MIMETYPE in f for f in figures)
    grid = next(
        f[PLOTLY_MIMETYPE] for f in figures if f[PLOTLY_MIMETYPE]["data"][0]["type"] == "heatmap"
    )
    assert {t["name"] for t in grid["data"][1:]} == {"completed 2", "failed 1"}

    printed = "".join(o.get("text", "") for o in out[6] if o["output_type"] == "stream")
    assert "stopped False" in printed
    (stopped,) = [d for d in displays(out[6]) if d["text/plain"].startswith("stats of job")]
    assert stopped["text/plain"].endswith("stopped")  # stopped before or after a first drawing
