"""Benchmark the detached Local runner against a plain thread pool of subprocess.run.

Runs N ``/bin/echo`` tasks through the runner with concurrency = os.cpu_count(), then the
same commands with a ``ThreadPoolExecutor`` of ``subprocess.run`` calls, and prints both
wall times, their ratio and the runner's own CPU time per task (read from /proc before the
runner exits; its children's CPU is not included).

Each task gets the layout the Local backend uses: ``<n>/work`` as its working directory
and ``<n>/output`` for stdout/stderr (and the runner's ``__run__`` record).  The pool
is measured twice: creating the same directories and output files, and bare (output to
/dev/null, no directories).  A minimal one-thread loop making the same directories and
files with the same spawn call shows how far the runner's own bookkeeping is from the least
a runner on one thread must do; the same loop with one thread per slot (each waiting for
its own process, like the pool) shows what a runner with a thread per slot could reach
at best.  Everything runs with this process's whole environment.  File creation costs
depend a lot on the file system; --dir picks where the task directories go.

    python scripts/bench/bench_runner.py [--tasks 1000] [--repeat 3] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

from fs_probe import describe

from ganga_like_runner.client import (
    TERMINAL_EVENTS,
    TaskSpec,
    read_events,
    runner_pid,
    stop,
    submit,
)

ECHO = "/bin/echo"


def runner_cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU of the runner process itself (not of its children)."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks  # utime, stime


def wait_for(journal: Path, count: int, timeout: float = 120.0) -> None:
    done = 0
    offset = 0
    deadline = time.monotonic() + timeout
    while done < count:
        events, offset = read_events(journal, offset)
        done += sum(1 for event in events if event.event in TERMINAL_EVENTS)
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {done} of {count} tasks finished")
        time.sleep(0.002)


def make_tasks(
    root: Path, prefix: str, count: int, journal: Path, flat: bool = False
) -> list[TaskSpec]:
    """Tasks ``<prefix>.<i>`` with the Local layout under ``root/<prefix>/<i>/``, or, with
    ``flat``, run in ``<i>/`` itself instead of ``<i>/work``."""
    return [
        TaskSpec(
            key=f"{prefix}.{i}",
            argv=[ECHO, "task", str(i)],
            env={},
            workdir=str(root / prefix / str(i) / ("" if flat else "work")),
            output_dir=str(root / prefix / str(i) / "output"),
            inputs=[],
            output_patterns=[],
            events=str(journal),
        )
        for i in range(count)
    ]


def bench_runner(root: Path, count: int, concurrency: int, run: int) -> tuple[float, float, float]:
    """Wall seconds for ``count`` tasks and the runner's user and system CPU per task."""
    runner_dir = root / "runner"
    # The whole environment, as the Local backend passes it and as the pool's processes
    # inherit it: variables such as LANG change what each echo costs (a locale to load).
    env = dict(os.environ)
    # A warm-up task starts the runner, so that neither its start-up nor its imports are
    # counted against the tasks.
    warm_journal = root / f"warm{run}.jsonl"
    submit(runner_dir, make_tasks(root, f"warm{run}", 1, warm_journal), env, concurrency)
    wait_for(warm_journal, 1)
    pid = runner_pid(runner_dir)
    if pid is None:
        raise RuntimeError("runner did not start")
    user_before, system_before = runner_cpu_seconds(pid)
    journal = root / f"run{run}.jsonl"
    tasks = make_tasks(root, f"run{run}", count, journal)
    start = time.perf_counter()
    submit(runner_dir, tasks, env, concurrency)
    wait_for(journal, count)
    wall = time.perf_counter() - start
    user, system = runner_cpu_seconds(pid)
    stop(runner_dir)
    return wall, (user - user_before) / count, (system - system_before) / count


def make_task_dirs(root: Path, i: int) -> tuple[Path, Path]:
    """Task ``i``'s work and output directories, created as the Local layout has them."""
    workdir, output = root / str(i) / "work", root / str(i) / "output"
    workdir.mkdir(parents=True)
    output.mkdir()
    return workdir, output


def pool_task_with_files(root: Path) -> Callable[[int], None]:
    def run_one(i: int) -> None:
        workdir, output = make_task_dirs(root, i)
        with open(output / "stdout", "wb") as out, open(output / "stderr", "wb") as err:
            subprocess.run([ECHO, "task", str(i)], stdout=out, stderr=err, cwd=workdir)

    return run_one


def start_echo(root: Path, i: int, devnull: int, env: dict[str, str]) -> tuple[int, int]:
    """Make task ``i``'s directories and files and start its echo the way the runner does;
    its pid and its open ``__run__`` record.  Not thread-safe (``chdir``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    workdir, output = make_task_dirs(root, i)
    out, err, record = (
        os.open(output / name, flags, 0o644) for name in ("stdout", "stderr", "__run__")
    )
    os.chdir(workdir)
    pid = os.posix_spawn(
        ECHO,
        [ECHO, "task", str(i)],
        env,
        file_actions=[
            (os.POSIX_SPAWN_DUP2, devnull, 0),
            (os.POSIX_SPAWN_DUP2, out, 1),
            (os.POSIX_SPAWN_DUP2, err, 2),
        ],
        setsid=True,
        setsigmask=(),
    )
    os.chdir("/")
    os.close(out)
    os.close(err)
    return pid, record


def finish_echo(record: int, status: int) -> None:
    os.pwrite(record, b'{"exit_code": %d}' % os.waitstatus_to_exitcode(status), 0)
    os.close(record)


def minimal_loop(root: Path, count: int, concurrency: int) -> float:
    """The least a one-thread runner must do: the same directories, files and spawn call as
    the runner, reaped with sigtimedwait, one final record per task and nothing else."""
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    env = {**os.environ}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    running: dict[int, int] = {}
    started = done = 0
    start = time.perf_counter()
    try:
        while done < count:
            while started < count and len(running) < concurrency:
                pid, record = start_echo(root, started, devnull, env)
                running[pid] = record
                started += 1
            signal.sigtimedwait([signal.SIGCHLD], 1.0)
            while running:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                finish_echo(running.pop(pid), status)
                done += 1
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        os.close(devnull)
    return time.perf_counter() - start


def minimal_threads(root: Path, count: int, concurrency: int) -> float:
    """The same work as ``minimal_loop`` with one thread per slot, each waiting for its own
    process as the pool's threads do; making a task's files and starting it is serialised
    by a lock (the working directory belongs to the whole process)."""
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    env = {**os.environ}
    numbers = iter(range(count))
    take, spawning = threading.Lock(), threading.Lock()

    def slot() -> None:
        while True:
            with take:
                i = next(numbers, None)
            if i is None:
                return
            with spawning:
                pid, record = start_echo(root, i, devnull, env)
            _, status = os.waitpid(pid, 0)
            finish_echo(record, status)

    start = time.perf_counter()
    try:
        threads = [threading.Thread(target=slot) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        os.close(devnull)
    return time.perf_counter() - start


def pool_task_bare(i: int) -> None:
    subprocess.run([ECHO, "task", str(i)], stdout=subprocess.DEVNULL)


def bench_pool(run_one: Callable[[int], None], count: int, concurrency: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(run_one, range(count)))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--dir", default=None, help="where to create the task directories")
    args = parser.parse_args()
    count, concurrency = args.tasks, args.concurrency
    runner_walls, users, systems, pool_walls, bare_walls = [], [], [], [], []
    loop_walls, thread_walls = [], []
    # Kept, not deleted: deleting thousands of files slows the next file creations on
    # some file systems for minutes (see fs_probe.py), which would skew the next repeat.
    base = Path(tempfile.mkdtemp(prefix="bench_runner_", dir=args.dir))
    for run in range(args.repeat):
        root = base / str(run)
        root.mkdir()
        print(f"repeat {run + 1}: {describe(base)}")
        wall, user, system = bench_runner(root, count, concurrency, run)
        runner_walls.append(wall)
        users.append(user)
        systems.append(system)
        pool_walls.append(bench_pool(pool_task_with_files(root / "pool"), count, concurrency))
        bare_walls.append(bench_pool(pool_task_bare, count, concurrency))
        loop_walls.append(minimal_loop(root / "loop", count, concurrency))
        thread_walls.append(minimal_threads(root / "threads", count, concurrency))
    runner_wall = statistics.median(runner_walls)
    pool_wall = statistics.median(pool_walls)
    bare_wall = statistics.median(bare_walls)
    print(f"tasks: {count}, concurrency: {concurrency}, repeats: {args.repeat} (medians)")
    print(f"task directories in: {base} (left in place)")
    print(f"runner wall:              {runner_wall:.3f} s  (runs: {fmt(runner_walls)})")
    print(f"pool wall, output files:  {pool_wall:.3f} s  (runs: {fmt(pool_walls)})")
    print(f"pool wall, bare:          {bare_wall:.3f} s  (runs: {fmt(bare_walls)})")
    loop_wall = statistics.median(loop_walls)
    print(f"minimal one-thread loop:  {loop_wall:.3f} s  (runs: {fmt(loop_walls)})")
    thread_wall = statistics.median(thread_walls)
    print(f"minimal thread per slot:  {thread_wall:.3f} s  (runs: {fmt(thread_walls)})")
    print(f"ratio runner / pool with files: {runner_wall / pool_wall:.2f}")
    print(f"ratio runner / bare pool:       {runner_wall / bare_wall:.2f}")
    print(f"ratio runner / minimal loop:    {runner_wall / loop_wall:.2f}")
    cpus = [user + system for user, system in zip(users, systems, strict=True)]
    for label, values in (("runner CPU per task", cpus), ("  user", users), ("  system", systems)):
        median = statistics.median(values) * 1000
        print(f"{label + ':':21}{median:.3f} ms  (runs: {fmt_ms(values)})")
    return 0


def fmt(values: list[float]) -> str:
    return ", ".join(f"{value:.3f}" for value in values)


def fmt_ms(values: list[float]) -> str:
    return ", ".join(f"{value * 1000:.3f}" for value in values)


if __name__ == "__main__":
    sys.exit(main())
