"""``j.report("run.html")`` and ``j.dashboard()`` (and the same of a slice): a job's
stats as pictures (``ganga_like.runtime.plots``), in a file or live in a notebook.

Both read what ``j.stats()`` reads, plus the subjob grid from the masters' status
columns. Plotly is imported only here, when a picture is asked for.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganga_like.errors import JobError, SchemaError
from ganga_like.gpi.arguments import given
from ganga_like.gpi.proxy import current_session
from ganga_like.model.job import Job as JobImpl
from ganga_like.runtime.stats import JobStats, job_stats
from ganga_like.runtime.stats.grid import SubjobGrid, subjob_grid

__all__ = ["job_dashboard", "job_report", "slice_dashboard", "slice_report"]

NEEDS_PLOTLY = "needs plotly and numpy: pip install 'ganga_like[plots]'"
NOT_LIVE = (
    "{where}: live plots need a Jupyter notebook (a kernel running an event loop); here, "
    "print({obj}.stats()) shows the numbers and {obj}.report('run.html') writes the plots "
    "to a file"
)

Jobs = Callable[[], list[JobImpl]]


def _reader(jobs: Jobs, title: str) -> Callable[[], tuple[JobStats, SubjobGrid]]:
    def read() -> tuple[JobStats, SubjobGrid]:
        impls = jobs()
        return job_stats(impls, title), subjob_grid(impls)

    return read


def _report_path(where: str, path: object) -> Path:
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise SchemaError(
            f"{where}: path expected a file name such as 'run.html', not {given(path)}"
        )
    if not os.fspath(path):
        raise SchemaError(f"{where}: path is empty; give a file name such as 'run.html'")
    target = Path(path).expanduser().absolute()
    if target.is_dir():
        raise SchemaError(
            f"{where}: {target} is a directory; give a file name such as {target / 'run.html'}"
        )
    if not target.parent.is_dir():
        raise SchemaError(f"{where}: no directory {target.parent} to write {target.name} in")
    return target


def write(jobs: Jobs, title: str, path: object, where: str) -> str:
    """Write the report of ``jobs`` to ``path``; the absolute path written."""
    target = _report_path(where, path)
    try:
        from ganga_like.runtime.plots.report import write_report
    except ImportError as missing:
        raise JobError(f"{where} {NEEDS_PLOTLY}") from missing
    current_session().refresh()
    stats, grid = _reader(jobs, title)()
    try:
        return str(write_report(target, stats, grid))
    except OSError as failed:
        # Said of the path given: the file written aside first is the report's own affair.
        reason = failed.strerror or type(failed).__name__
        raise JobError(
            f"{where}: cannot write {target}: {target.parent} took no new file ({reason}); "
            "nothing written"
        ) from None


def show(jobs: Jobs, title: str, interval: object, where: str, obj: str) -> Any:
    """A live dashboard of ``jobs`` in a notebook; elsewhere one line saying what to use."""
    number = isinstance(interval, int | float) and not isinstance(interval, bool)
    if not (number and math.isfinite(interval) and interval > 0):  # type: ignore[arg-type,operator]
        raise SchemaError(
            f"{where}: interval expected a number of seconds above 0, not {given(interval)}"
        )
    jobs()  # a removed job says so now, in one line
    loop = _kernel_loop()
    if loop is None:
        print(NOT_LIVE.format(where=where, obj=obj))
        return None
    from ganga_like.runtime.plots.dashboard import Dashboard

    session = current_session()
    board = Dashboard(_reader(jobs, title), session.sync, float(interval), title)  # type: ignore[arg-type]
    board.start(loop)
    return board


def _kernel_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of the Jupyter kernel running this cell; None outside a kernel."""
    ipython = sys.modules.get("IPython")  # not imported: then no kernel runs this
    shell = getattr(ipython, "get_ipython", lambda: None)()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        io_loop = getattr(kernel, "io_loop", None)
        loop = getattr(io_loop, "asyncio_loop", None)
        return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def job_report(self: Any, path: object) -> str:
    """Write this job's plots and tables to one HTML file that opens with no network
    (status over time, run times, the subjob grid, failure groups, resources asked for
    and used); the path written. See docs/seeing-jobs.md."""
    job = self._live("report()")
    return write(lambda: [self._live("report()")], f"job {job.fqid}", path, "j.report()")


def job_dashboard(self: Any, interval: float = 2.0) -> Any:
    """Live plots of this job in a notebook, redrawn every ``interval`` seconds while the
    cells go on running, until the job has ended or ``.stop()``. See docs/seeing-jobs.md."""
    job = self._live("dashboard()")
    jobs = lambda: [self._live("dashboard()")]  # noqa: E731
    return show(jobs, f"job {job.fqid}", interval, "j.dashboard()", "j")


def slice_report(self: Any, path: object) -> str:
    """Write the plots and tables of these jobs to one HTML file (as ``j.report``)."""
    return write(self._stats_jobs, self._title, path, "report()")


def slice_dashboard(self: Any, interval: float = 2.0) -> Any:
    """Live plots of these jobs in a notebook (as ``j.dashboard``)."""
    return show(self._stats_jobs, self._title, interval, "dashboard()", "jobs")
