"""The default (shared) mode against ``embedded``, in interleaved rounds.

    python scripts/bench/bench_sessions.py [ROUNDS] [SUBJOBS] [--only NAME[,NAME]]

Each round runs every measurement once per mode, in a fresh process and a fresh gangadir,
alternating the modes, so that a machine shared with other work weighs on both alike:

1. ``j.submit()`` of SUBJOBS (default 10,000) ``/bin/true`` subjobs (Local): the wall time
   of ``submit()`` alone (the job is killed after). Budget: default <= 1.2x embedded.
2. One subjob status change, committed as the monitor commits it (one transaction) and
   seen by another session (its own connection; in the default mode its own client of the
   server, as a second process has): median of 200, from before the commit to the read
   that shows it. Budget: default <= 2 ms.
3. A second session listing 1,000 jobs (``repr(jobs)``) in a fresh process, warm (its
   client cache filled by an earlier session; embedded: the file in the page cache),
   while the first session is still open in the default mode. Budget: <= 0.1 s.
4. 1,000 ``/bin/true`` subjobs from ``submit()`` to ``completed``. Budget: default <=
   1.1x embedded.

Prints each round's figures, then the medians and the ratios, and the median of the
rounds' own ratios (each round measures both modes one after the other).  ``--only`` runs
the measurements named (``submit``, ``seen``, ``list``, ``complete``) and no other, for more
rounds of one figure in the same time.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SUBMIT = """
    import sys, time
    from ganga_like import ArgSplitter, Executable, Job, Local
    from ganga_like.runtime.session import current_session
    current_session()
    n = int(sys.argv[1])
    j = Job(application=Executable(exe="/bin/true"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(n)]), backend=Local())
    t0 = time.perf_counter()
    j.submit()
    print(f"{time.perf_counter() - t0:.4f}")
    j.kill()
"""

COMPLETE = """
    import sys, time
    from ganga_like import ArgSplitter, Executable, Job, Local
    from ganga_like.runtime.session import current_session
    current_session()
    j = Job(application=Executable(exe="/bin/true"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(1000)]), backend=Local())
    t0 = time.perf_counter()
    j.submit()
    assert j.wait(timeout=600) == "completed", j.status
    print(f"{time.perf_counter() - t0:.4f}")
"""

SEEN = """
    import statistics, sys, time
    import transaction
    from ganga_like.model.job import Job as JobImpl
    from ganga_like.model.status import Status
    from ganga_like.repository.connection import Repository
    from ganga_like.repository.registry import Registry
    from ganga_like.runtime.settings import Settings
    mode = sys.argv[1]
    settings = Settings(monitoring=False)
    options = settings.storage_options()
    writer = Repository(settings.gangadir, mode, options=options)

    def master():
        job = JobImpl()
        subjobs = [JobImpl.new_subjob(job, k) for k in range(100)]
        for sj in subjobs:
            sj.__dict__["status"] = "new"
        job.attach_subjobs(subjobs)
        return Registry(writer.connection().root()).add(job)

    master_id = writer.in_transaction(master)
    if mode == "embedded":  # another connection of the one database: all it can share
        tm = transaction.TransactionManager()
        reader_conn = writer.db.open(transaction_manager=tm)
    else:  # another client of the server, as a second process is
        reader = Repository(settings.gangadir, mode, options=options)
        tm = transaction.TransactionManager()
        reader_conn = reader.db.open(transaction_manager=tm)
    mine = list(Registry(writer.connection().root()).get(master_id).iter_subjobs())
    theirs = list(Registry(reader_conn.root()).get(master_id).iter_subjobs())
    wtm = writer.connection().transaction_manager
    times = []
    for i in range(200):
        k = i % len(mine)
        target = Status.SUBMITTING if mine[k].status == "new" else Status.NEW
        t0 = time.perf_counter()
        mine[k].change_status(target, "bench")
        wtm.commit()
        deadline = t0 + 10
        while True:
            tm.abort()
            if theirs[k].status == target.label:
                break
            if time.perf_counter() > deadline:
                raise SystemExit("the change was not seen within 10 s")
        times.append(time.perf_counter() - t0)
    print(f"{statistics.median(times) * 1e3:.3f}")
"""

FILL = """
    from ganga_like.model.job import Job as JobImpl
    from ganga_like.repository.registry import Registry
    from ganga_like.runtime.session import current_session
    import sys
    session = current_session()
    def add_all():
        registry = Registry(session.repo.connection().root())
        for i in range(1000):
            job = JobImpl()
            job.name = f"job{i}"
            registry.add(job)
    session.repo.in_transaction(add_all)
    print("filled", flush=True)
    if len(sys.argv) > 1:  # stay open: the listing is a second session
        sys.stdin.read()
"""

LIST = """
    import time
    from ganga_like import jobs
    from ganga_like.runtime.session import current_session
    current_session()
    t0 = time.perf_counter()
    text = repr(jobs)
    print(f"{time.perf_counter() - t0:.4f}")
"""

MODES = ("embedded", "default")


def environment(gangadir: Path, mode: str) -> dict[str, str]:
    env = dict(
        os.environ,
        GANGA_DIR=str(gangadir),
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        XDG_CONFIG_HOME=str(gangadir.parent / "xdg"),
    )
    env.pop("GANGA_REPOSITORY_MODE", None)
    if mode == "embedded":
        env["GANGA_REPOSITORY_MODE"] = "embedded"
    return env


def run(code: str, env: dict[str, str], *argv: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    return float(out.stdout.split()[-1])


def listing(gangadir: Path, mode: str) -> float:
    env = environment(gangadir, mode)
    if mode == "embedded":
        run(FILL.replace('print("filled", flush=True)', "print(0)"), env)
        run(LIST, env)  # the file is read once: the page cache is warm
        return run(LIST, env)
    first = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(FILL), "stay"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "filled"
        run(LIST, env)  # fills a client cache, as an earlier session would have
        return run(LIST, env)
    finally:
        assert first.stdin is not None
        first.stdin.close()
        first.wait(60)


def stop_everything(gangadir: Path) -> None:
    from ganga_like.repository.zeo import shared
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    runner_client.stop(runner_dir(gangadir))
    if (gangadir / "repository").exists():
        shared.stop_server(gangadir / "repository")


def main() -> None:
    args = sys.argv[1:]
    only: set[str] | None = None
    if "--only" in args:
        at = args.index("--only")
        only = set(args[at + 1].split(","))
        del args[at : at + 2]
    rounds = int(args[0]) if args else 3
    n = int(args[1]) if len(args) > 1 else 10_000
    base = Path(tempfile.mkdtemp(prefix="bench-sessions-"))
    figures: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        for mode in order:
            for name, measure in (
                ("submit", lambda g, m: run(SUBMIT, environment(g, m), str(n))),
                (
                    "seen",
                    lambda g, m: run(
                        SEEN, environment(g, m), "embedded" if m == "embedded" else "shared"
                    ),
                ),
                ("list", listing),
                ("complete", lambda g, m: run(COMPLETE, environment(g, m))),
            ):
                if only is not None and name not in only:
                    continue
                gangadir = base / f"{r}-{mode}-{name}" / "gangadir"
                gangadir.parent.mkdir(parents=True)
                try:
                    value = measure(gangadir, mode)
                finally:
                    stop_everything(gangadir)
                figures.setdefault((name, mode), []).append(value)
                print(f"round {r + 1} {mode:8s} {name:8s} {value:.4f}", flush=True)
    print()
    labels = {
        "submit": f"submit() of {n} subjobs (s)",
        "seen": "status change seen by another session (ms, median of 200)",
        "list": "second session lists 1,000 jobs, warm (s)",
        "complete": "1,000 subjobs submit -> completed (s)",
    }
    for name, label in labels.items():
        if (name, "default") not in figures:
            continue
        emb = statistics.median(figures[(name, "embedded")])
        dflt = statistics.median(figures[(name, "default")])
        pairs = zip(figures[(name, "default")], figures[(name, "embedded")], strict=True)
        paired = [d / e for d, e in pairs]
        print(
            f"{label}: default {dflt:.4f}, embedded {emb:.4f}, ratio {dflt / emb:.2f}; "
            f"rounds' own ratios: median {statistics.median(paired):.2f} "
            f"({', '.join(f'{v:.2f}' for v in paired)})"
        )


if __name__ == "__main__":
    main()
