"""``ganga web``'s subjob grid for a master of 100,000 subjobs: the time to produce its
data, in the server's process and through a real server, and the time Chromium takes to
draw it.

    python scripts/bench/bench_web.py [N]        (default 100,000)

Builds one master of N subjobs through the model and registry directly (the Local backend
would take long to run that many), in a mix of statuses (completed, failed, running,
submitted, killed). Then:

* in a fresh process, ``job_data.subjob_grid`` (what ``GET /api/jobs/ID/grid`` returns):
  the first call (the master's status records read from the storage) and again;
* a real ``ganga web`` on that gangadir: ``GET /api/jobs/ID/grid`` over HTTP, first and
  again, with the size of the answer;
* when /usr/bin/chromium and Playwright are there, the job page in headless Chromium: the
  time its script takes to decode and draw the grid into the canvas (``grid.draw``).
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
from ganga_like.runtime.session import open_session, close_session
from ganga_like.runtime.settings import configured_settings
from ganga_like.web import job_data
job_id, n = map(int, sys.argv[1:3])
settings = configured_settings()
settings.monitoring = False
session = open_session(settings)
for label in ("first", "again"):
    session.repo.abort()
    t0 = time.perf_counter()
    grid = job_data.subjob_grid(session, job_id)
    took = time.perf_counter() - t0
    assert grid["count"] == n
    print(f"{n:>7} subjobs, grid data in the process, {label}: {1000 * took:7.1f} ms")
close_session()
"""

# The tests' helpers: a real `ganga web`, Chromium's launch, masters built through the model.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

LABELS = ("completed", "failed", "running", "submitted", "killed")


def build(gangadir: Path, n: int) -> int:
    from web_server import master_with_statuses

    from ganga_like.repository.connection import Repository

    with Repository(gangadir) as repo:
        labels = [LABELS[i % 7 % 5] for i in range(n)]
        master = master_with_statuses(repo.registry(), labels, f"grid-{n}")
        repo.connection().transaction_manager.commit()
        job_id: int = master.id
    return job_id


def through_server(env: dict[str, str], job_id: int, n: int) -> None:
    from web_server import running_web

    # No monitoring: the subjobs built here have no backend process to follow.
    with running_web(env, "--no-monitor") as web:
        for label in ("first", "again"):
            t0 = time.perf_counter()
            status, body = web.get(f"/api/jobs/{job_id}/grid")
            took = time.perf_counter() - t0
            assert status == 200
            size = len(body) / 1024
            print(
                f"{n:>7} subjobs, GET /api/jobs/ID/grid, {label}: {1000 * took:7.1f} ms"
                f"  ({size:.0f} KiB)"
            )
        in_browser(web.base, web.token, job_id, n)


def in_browser(base: str, token: str, job_id: int, n: int) -> None:
    from web_server import CHROMIUM, launch_chromium

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("(no playwright: the drawing in Chromium is not measured)")
        return
    if not CHROMIUM.exists():
        print("(no /usr/bin/chromium: the drawing in Chromium is not measured)")
        return
    with sync_playwright() as driver:
        context = launch_chromium(driver, tempfile.mkdtemp(prefix="bench-web-chromium-"))
        page = context.new_page()
        page.goto(f"{base}/job/{job_id}?token={token}")
        deadline = time.monotonic() + 120
        while not page.evaluate(f"!!(grid.data && grid.data.count === {n})"):
            assert time.monotonic() < deadline, "the grid was not drawn"
            time.sleep(0.05)
        took = page.evaluate(
            "(() => { const t0 = performance.now(); for (let i = 0; i < 5; i++)"
            " grid.draw(grid.data); return (performance.now() - t0) / 5; })()"
        )
        print(
            f"{n:>7} subjobs, drawn into the canvas by Chromium: {took:7.1f} ms"
            " (mean of 5, decoding included)"
        )
        context.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-web-")) / "gangadir"
    started = time.perf_counter()
    job_id = build(gangadir, n)
    print(f"built {n} subjobs in {time.perf_counter() - started:.1f} s")
    env = dict(os.environ, GANGA_DIR=str(gangadir))
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(job_id), str(n)],
        env=env,
        capture_output=True,
        text=True,
    )
    print(out.stdout, end="")
    if out.returncode:
        print(out.stderr, end="", file=sys.stderr)
        raise SystemExit(out.returncode)
    through_server(env, job_id, n)


if __name__ == "__main__":
    main()
