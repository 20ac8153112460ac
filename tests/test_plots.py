"""The figures of a job's stats (Plotly): status over time, run-time histogram, the subjob
grid as one heatmap, failure groups; and the plain data they are drawn from."""

from __future__ import annotations

import json

import plotly.graph_objects as go
from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime.plots.figures import FIGURES, figures, grid_shape, subjob_grid
from ganga_like.runtime.stats import job_stats
from ganga_like.runtime.stats.grid import subjob_grid as grid_of
from ganga_like.runtime.stats.histogram import Histogram

from .split_jobs import submitted_model_master
from .test_stats import _MOVES, _allowed


def driven_master(size: int) -> JobImpl:
    """A master whose subjobs ran for 1 s, 2 s, ...; every 5th failed (exit 3, out of
    memory), every 7th still runs, the rest completed."""
    master, subjobs = submitted_model_master(size)
    for index, sj in enumerate(subjobs):
        sj.change_status(Status.RUNNING, "test", when=1000.0 + index)
        if index % 7 == 6:
            continue
        if index % 5 == 4:
            sj.exit_code = 3
            sj.change_status(Status.FAILED, "Slurm: failed, OUT_OF_MEMORY", when=1001.0 + 2 * index)
        else:
            sj.change_status(Status.COMPLETED, "test", when=1001.0 + 2 * index)
    return master


def test_the_figures_of_a_master_show_its_counts_run_times_cells_and_failures() -> None:
    master = driven_master(35)
    stats = job_stats([master], "job 0", now=2000.0)
    figs = figures(stats, grid_of([master]))
    assert tuple(figs) == FIGURES and all(isinstance(f, go.Figure) for f in figs.values())
    # Status over time: one stacked area per status, ending at the counts now.
    over = {t.name: t.y[-1] for t in figs["status_over_time"].data if t.y[-1]}
    assert over == {label: n for label, n in stats.counts.items()}
    # The histogram's bars hold every run that ended.
    bars = figs["run_time"].data[0]
    assert sum(bars.y) == stats.run_time.count == 30
    # The grid: one heatmap trace, one cell per subjob, then one legend entry per status.
    heat, *legend = figs["grid"].data
    assert isinstance(heat, go.Heatmap) and not figs["grid"].layout.shapes
    rows, columns = grid_shape(35)
    assert heat.z.shape == heat.text.shape == (rows, columns)
    cells = heat.text.ravel().tolist()[:35]
    m = master.fqid
    assert cells[0] == f"{m}.0 completed" and cells[6] == f"{m}.6 running"
    assert cells[4] == f"{m}.4 failed<br>exit code 3<br>OUT_OF_MEMORY"
    assert {t.name for t in legend} == {f"{k} {n}" for k, n in stats.counts.items()}
    # Failure groups: one bar, its count and reason.
    failed = figs["failures"].data[0]
    assert list(failed.y) == ["OUT_OF_MEMORY [exit 3]"] and list(failed.x) == [6]
    # Each figure is plain JSON a browser draws (what a web page is sent).
    assert json.loads(figs["grid"].to_json())["data"][0]["type"] == "heatmap"


def test_the_figures_of_a_job_not_yet_run_are_empty_not_broken() -> None:
    job = JobImpl()
    figs = figures(job_stats([job], "job 0", now=10.0), grid_of([job]))
    assert figs["run_time"].data[0].y == ()
    assert figs["failures"].data[0].x == ()
    assert figs["grid"].data[0].text.ravel().tolist() == [f"{job.fqid} new"]


def test_a_grid_of_several_jobs_names_a_master_s_subjobs_and_the_other_jobs() -> None:
    master, _ = submitted_model_master(3)
    single = JobImpl()
    grid = grid_of([master, single])
    assert list(grid.names()) == [f"{master.fqid}.{i}" for i in range(3)] + [single.fqid]
    assert grid.labels == ("submitted",) * 3 + ("new",)


@settings(max_examples=25, deadline=None)
@given(
    size=st.integers(1, 40),
    moves=st.lists(st.tuples(st.integers(0, 39), st.sampled_from(_MOVES)), max_size=80),
)
def test_the_grid_read_from_the_status_column_is_the_subjobs_read_one_by_one(
    size: int, moves: list[tuple[int, Status]]
) -> None:
    master, subjobs = submitted_model_master(size)
    for index, target in moves:
        sj = subjobs[index % size]
        if _allowed(Status.parse(sj.status), target):
            sj.change_status(target, "test")
    grid = grid_of([master])
    assert list(grid.labels) == [sj.status for sj in subjobs]
    assert list(grid.names()) == [sj.fqid for sj in subjobs]
    cells = subjob_grid(grid).data[0].text.ravel().tolist()
    assert cells[:size] == [f"{sj.fqid} {sj.status}" for sj in subjobs]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), max_size=300))
def test_a_histogram_puts_each_value_in_the_one_bin_it_falls_in(values: list[float]) -> None:
    hist = Histogram.of(values)
    assert hist.total == len(values)
    assert len(hist.edges) == (len(hist.counts) + 1 if values else 0)
    assert list(hist.edges) == sorted(hist.edges)
    for index, n in enumerate(hist.counts):
        low, high = hist.edges[index], hist.edges[index + 1]
        last = index == len(hist.counts) - 1
        inside = [v for v in values if low <= v < high or (last and v == high)]
        # Rounding of the edges may move a value lying on one into the next bin, never further.
        assert abs(len(inside) - n) <= sum(1 for v in values if v in (low, high))
