"""``j.submit()`` of N Local subjobs against the least a submission can cost, in the same run.

    python scripts/bench/bench_submit_floor.py N [--rounds R] [--embedded] [--before SRC]
        [--early-start]

The floor is a minimal script doing what a submission must leave behind and nothing else:

* one ZODB commit of N plain persistent records into a FileStorage, each as large as one
  subjob's own records (measured first: ``bench_submit.py --json`` at 1,000), kept in an
  ``IOBTree`` as the subjobs are; through a bare ZEO server on a Unix socket in the default
  mode (the project's default is its repository server), the file itself with
  ``--embedded``;
* the batch file the Local runner needs for them, in its real format
  (``ganga_like_runner.client.write_batch``, one task row per subjob with the command,
  environment, directories and journal a Local subjob has); no runner is started.

Each round runs the floor and ``bench_submit.py N --json`` (``--before SRC``: and the same
script of another checkout) in fresh processes, their order alternating from round to
round. The runner is held during the call (``bench_submit.py --hold-runner``): the floor
runs no subjob, so neither does the measured submission, which queues its batches as the
floor writes its one; ``--early-start`` lets the runner the submission starts run the first
subjobs beside it, on the same cores, as it does outside the benchmark. Printed per run:
wall, CPU of the submitting process and of the server (and of the runner the submission
started), peak RSS of the submitting process; last, the median ratio
of ``submit()`` to the floor, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from persistent import Persistent

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class Record(Persistent):  # type: ignore[misc]
    """A plain persistent record: one attribute of the measured size."""

    state: bytes


def floor(n: int, record_bytes: int, embedded: bool) -> dict[str, float]:
    """The floor's figures, in this process (a fresh one)."""
    import transaction
    import ZODB
    from BTrees.IOBTree import IOBTree
    from ZODB.FileStorage import FileStorage

    sys.path.insert(0, str(ROOT / "plugins"))
    from bench_submit import process_cpu

    from ganga_like_runner.client import write_batch

    base = Path(tempfile.mkdtemp(prefix="bench-submit-floor-"))
    server = None
    try:
        if embedded:
            storage = FileStorage(str(base / "Data.fs"))
        else:
            server, storage = _zeo(base)
        db = ZODB.DB(storage)
        conn = db.open()
        # A pickled Record of a payload of p bytes takes about p + 45.
        payload = b"x" * max(1, record_bytes - 45)
        server_cpu = process_cpu(server.pid) if server else 0.0
        started, cpu = time.perf_counter(), time.process_time()
        records = IOBTree()
        for i in range(n):
            record = Record()
            record.state = payload
            records[i] = record
        conn.root()["job"] = records
        transaction.commit()
        written = time.perf_counter()
        workspace = str(base / "workspace")
        write_batch(
            base / "local-runner",
            _tasks(n, workspace),
            dict(os.environ),
            max_concurrent=os.cpu_count() or 1,
            idle_exit_seconds=30.0,
        )
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        figures = {
            "wall": wall,
            "cpu": cpu,
            "commit_wall": written - started,
            "server_cpu": process_cpu(server.pid) - server_cpu if server else 0.0,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "record_bytes": len(storage.load(records[0]._p_oid)[0]),
        }
        db.close()
        return figures
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        shutil.rmtree(base, ignore_errors=True)


def _zeo(base: Path) -> tuple[subprocess.Popen[bytes], Any]:
    """A bare ZEO server of ``base/Data.fs`` on a Unix socket, and a client of it."""
    from ZEO.ClientStorage import ClientStorage

    socket = str(base / "zeo.sock")
    server = subprocess.Popen(
        [sys.executable, "-m", "ZEO.runzeo", "-a", socket, "-f", str(base / "Data.fs")],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not os.path.exists(socket):
        if time.monotonic() > deadline or server.poll() is not None:
            raise SystemExit("the bare ZEO server did not start")
        time.sleep(0.05)
    return server, ClientStorage(socket, wait_timeout=120)


def _tasks(n: int, workspace: str) -> Iterator[Any]:
    """The task rows of the Local backend's subjobs ``1.0`` .. ``1.N-1``."""
    from ganga_like_runner.client import TaskSpec

    base = os.path.join(workspace, "1")
    events = os.path.join(base, "runner-events.jsonl")
    for i in range(n):
        root = os.path.join(base, str(i))
        yield TaskSpec(
            key=f"1.{i}@1",
            argv=["/bin/true", str(i)],
            env={
                "GANGA_JOB_ID": str(i),
                "GANGA_FQID": f"1.{i}",
                "GANGA_MASTER_ID": "1",
                "GANGA_SUBJOB_ID": str(i),
            },
            workdir=os.path.join(root, "work"),
            output_dir=os.path.join(root, "output"),
            inputs=[],
            output_patterns=[],
            events=events,
        )


# -- the driver --------------------------------------------------------------------------


def _run(argv: list[str], pythonpath: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        raise SystemExit(f"{' '.join(argv)} failed:\n{out.stdout}\n{out.stderr}")
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def _submit(n: int, embedded: bool, src: Path | None, early: bool) -> dict[str, Any]:
    # This checkout's script, importing the code of ``src`` when given.
    argv = [sys.executable, str(HERE / "bench_submit.py"), str(n), "--json"]
    if embedded:
        argv.append("--embedded")
    if not early:
        argv.append("--hold-runner")
    figures = _run(argv, f"{src}:{src / 'plugins'}" if src is not None else None)
    code = Path(str(figures.pop("code")))
    if code != (src or ROOT).resolve():
        raise SystemExit(f"bench_submit.py ran the code of {code}, not of {src or ROOT}")
    return figures


def _show(label: str, f: dict[str, float]) -> None:
    extra = f", runner {f['runner_cpu']:.2f} s" if "runner_cpu" in f else ""
    during = f" (during the call {f['rss_submit_mib']:.0f})" if "rss_submit_mib" in f else ""
    print(
        f"  {label}: {f['wall']:.2f} s wall; CPU: itself {f['cpu']:.2f} s, server "
        f"{f['server_cpu']:.2f} s{extra}; peak RSS {f['rss_mib']:.0f} MiB{during}; "
        f"record {f['record_bytes']:.0f} B",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embedded", action="store_true")
    parser.add_argument("--before", type=Path, default=None, help="another checkout")
    parser.add_argument("--early-start", action="store_true", help="let the runner run")
    parser.add_argument("--floor-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.floor_child is not None:
        print(json.dumps(floor(args.n, args.floor_child, args.embedded)))
        return
    mode = "embedded" if args.embedded else "default (server)"
    print(f"load before: {os.getloadavg()}; mode: {mode}", flush=True)
    record = _submit(1000, args.embedded, None, True)["record_bytes"]
    print(f"a subjob's own records: {record:.0f} B", flush=True)
    floor_argv = [sys.executable, __file__, str(args.n), "--floor-child", str(int(record))]
    if args.embedded:
        floor_argv.append("--embedded")
    runs: dict[str, Any] = {
        "floor": lambda: _run(floor_argv, None),
        "submit": lambda: _submit(args.n, args.embedded, None, args.early_start),
    }
    if args.before is not None:
        runs["before"] = lambda: _submit(args.n, args.embedded, args.before, args.early_start)
    walls: dict[str, list[float]] = {name: [] for name in runs}
    for number in range(args.rounds):
        order = list(runs) if number % 2 == 0 else list(reversed(runs))
        print(f"round {number + 1} (load {os.getloadavg()[0]:.1f}):", flush=True)
        for name in order:
            figures = runs[name]()
            walls[name].append(figures["wall"])
            _show(name, figures)
    for name in walls:
        if name == "floor":
            continue
        ratios = [w / f for w, f in zip(walls[name], walls["floor"], strict=True)]
        print(
            f"{name}: ratio to the floor {statistics.median(ratios):.2f} (rounds "
            f"{', '.join(f'{r:.2f}' for r in ratios)})"
        )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
