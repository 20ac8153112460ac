"""Concurrent writers in shared mode, with the repository server killed in the middle.

    python scripts/bench/bench_writers.py [SECONDS] [WRITERS]

Starts the monitor daemon (``ganga monitor start``) and WRITERS (default 3) writer
processes on one new gangadir in shared mode. For SECONDS (default 60) each writer creates
jobs (Local backend, ``true``), submits some and removes some of its own, at random. Halfway
through, the repository server is killed with SIGKILL (the sessions start a new one).
Each writer reports the ids it created and did not remove, its retried and rolled-back
changes, and finally creates one more job to show that its session still works.

Prints: jobs in the repository against jobs reported, lost, duplicated (an id reported
by two writers, or reported and held twice), tracebacks, unusable sessions (a writer
that failed, whose last action failed, or that met a failed transaction). All must be 0.

The writers run whatever ``ganga_like`` is first on ``sys.path``: with ``PYTHONPATH``
pointing at an older checkout the same run measures that version.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WRITER = """
    import json, random, sys, time, traceback
    from ganga_like import Executable, Job, Local, jobs
    from ganga_like.errors import GangaError
    from ganga_like.runtime.session import current_session
    try:
        from ganga_like.errors import RepositoryConflictError
        from ganga_like.repository.transaction_retry import counts
    except ImportError:  # a version from before retries, for comparison
        class RepositoryConflictError(GangaError):
            pass
        counts = {"retried": 0}

    name, seconds = sys.argv[1], float(sys.argv[2])
    session = current_session()
    print("ready", flush=True)
    sys.stdin.readline()
    rng = random.Random(name)
    mine, new = set(), set()
    report = {"actions": 0, "created": 0, "submitted": 0, "removed": 0, "rolled_back": 0,
              "other_errors": {}, "unexpected": 0, "unexpected_kinds": {}, "slowest": 0.0}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        report["actions"] += 1
        choice = rng.random()
        started = time.monotonic()
        try:
            if choice < 0.45 or not mine:
                j = Job(application=Executable(exe="true"), backend=Local())
                mine.add(j.id)
                new.add(j.id)
                report["created"] += 1
            elif choice < 0.75 and new:
                job_id = rng.choice(sorted(new))
                new.discard(job_id)
                jobs(job_id).submit()
                report["submitted"] += 1
            else:
                job_id = rng.choice(sorted(mine))
                jobs(job_id).remove()
                mine.discard(job_id)
                new.discard(job_id)
                report["removed"] += 1
        except RepositoryConflictError as exc:
            report["rolled_back"] += 1
            print(f"rolled back: {exc}", file=sys.stderr, flush=True)
        except GangaError as exc:
            kind = type(exc).__name__
            report["other_errors"][kind] = report["other_errors"].get(kind, 0) + 1
            print(f"{kind}: {exc}", file=sys.stderr, flush=True)
        except Exception as exc:  # what the user would see as a traceback
            if report["unexpected"] < 3:
                traceback.print_exc()
            report["unexpected"] += 1
            kind = type(exc).__name__
            report["unexpected_kinds"][kind] = report["unexpected_kinds"].get(kind, 0) + 1
        report["slowest"] = max(report["slowest"], time.monotonic() - started)
    try:
        last = Job(application=Executable(exe="true"), backend=Local())
        mine.add(last.id)
        last.submit()
        report["last_action"] = "ok"
    except Exception as exc:
        report["last_action"] = f"{type(exc).__name__}: {exc}"
    report["mine"] = sorted(mine)
    report["retried"] = counts["retried"]
    print(json.dumps(report), flush=True)
"""

COUNT = """
    import json
    from ganga_like.runtime.session import current_session
    print(json.dumps(list(current_session().registry().jobs.keys())))
"""


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    base = Path(tempfile.mkdtemp(prefix="bench-writers-"))
    gangadir = base / "gangadir"
    env = dict(
        os.environ,
        GANGA_DIR=str(gangadir),
        GANGA_REPOSITORY_MODE="shared",
        XDG_CONFIG_HOME=str(base / "xdg"),
    )
    ganga = [str(Path(sys.executable).with_name("ganga"))]
    subprocess.run([*ganga, "monitor", "start"], env=env, check=True, capture_output=True)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WRITER), f"w{i}", str(seconds)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    for w in writers:
        assert w.stdout is not None
        if w.stdout.readline().strip() != "ready":
            raise SystemExit(w.communicate()[1])
    for w in writers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    started = time.monotonic()
    time.sleep(seconds / 2)
    pid = int((gangadir / "repository" / "zeo.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic() - started
    reports, tracebacks, failed, messages = [], 0, 0, []
    for w in writers:
        out, err = w.communicate(timeout=seconds + 300)
        printed = (out + err).count("Traceback")
        messages += [line for line in err.splitlines() if "rolled back" in line]
        (base / f"writer-{len(reports) + failed}.err").write_text(err)
        if w.returncode != 0:
            failed += 1
            print(err[-2000:], file=sys.stderr)
            continue
        report = json.loads(out.strip().splitlines()[-1])
        # Tracebacks: every unexpected exception, plus any printed by something else.
        tracebacks += report["unexpected"] + max(0, printed - min(3, report["unexpected"]))
        reports.append(report)
    held_list = json.loads(
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(COUNT)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    subprocess.run([*ganga, "monitor", "stop"], env=env, capture_output=True)
    claimed = [job_id for r in reports for job_id in r["mine"]]
    held, reported = set(held_list), set(claimed)
    duplicated = (len(claimed) - len(reported)) + (len(held_list) - len(held))
    unusable = failed + sum(
        1
        for r in reports
        if r["last_action"] != "ok" or "TransactionFailedError" in r["unexpected_kinds"]
    )
    totals = {
        k: sum(r[k] for r in reports)
        for k in (
            "actions",
            "created",
            "submitted",
            "removed",
            "retried",
            "rolled_back",
            "unexpected",
        )
    }
    print(
        f"{count} writers + monitor daemon, {seconds:.0f} s, repository server killed "
        f"(SIGKILL) at {killed_at:.1f} s; gangadir {gangadir} (writers' stderr beside it)"
    )
    print(
        f"actions: {totals['actions']} ({totals['created']} creations, "
        f"{totals['submitted']} submissions, {totals['removed']} removals); retried "
        f"attempts: {totals['retried']}; changes rolled back after the last attempt: "
        f"{totals['rolled_back']}; slowest action: "
        f"{max((r['slowest'] for r in reports), default=0):.2f} s"
    )
    other: dict[str, int] = {}
    for r in reports:
        for kind, n in r["other_errors"].items():
            other[kind] = other.get(kind, 0) + n
    print(f"other one-line errors: {other or 'none'}")
    kinds: dict[str, int] = {}
    for r in reports:
        for kind, n in r["unexpected_kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    if kinds:
        print(f"raw exceptions (tracebacks): {kinds}")
    for line in messages[:5]:
        print(f"  {line[:160]}")
    print(f"jobs in the repository: {len(held)}; reported by the writers: {len(reported)}")
    print(
        f"lost: {len(reported - held)}  not reported: {len(held - reported)}  "
        f"duplicated: {duplicated}  tracebacks: {tracebacks}  "
        f"unusable sessions: {unusable}"
    )


if __name__ == "__main__":
    main()
