"""Tests of the detached Local runner with real processes and real files."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like_runner.client import (
    TERMINAL_EVENTS,
    Event,
    TaskSpec,
    configure,
    event_line,
    kill,
    read_events,
    runner_pid,
    stop,
    submit,
)

from .stand_in import process_with_args

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
BASE_ENV = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONUTF8": "1", "LC_ALL": "C.UTF-8"}
TIMEOUT = 120.0  # a guard against a hang, never reached unless something is wrong


class Journal:
    """Reads an events journal incrementally, the way the core does."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.events: list[Event] = []

    def poll(self) -> None:
        new, self.offset = read_events(self.path, self.offset)
        self.events.extend(new)

    def final(self) -> dict[str, Event]:
        return {e.key: e for e in self.events if e.event in TERMINAL_EVENTS}

    def of(self, key: str) -> list[str]:
        return [e.event for e in self.events if e.key == key]

    def wait(self, keys: Collection[str], event: str | None = None) -> dict[str, Event]:
        """Wait until every key has a final event (or the given event); return them."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            self.poll()
            if event is None:
                found = self.final()
            else:
                found = {e.key: e for e in self.events if e.event == event}
            missing = set(keys) - set(found)
            if not missing:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no event for {sorted(missing)[:10]} after {TIMEOUT} s")
            time.sleep(0.01)


@pytest.fixture
def runner_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "runner"
    yield path
    stop(path)


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "events" / "journal.jsonl")


def make_task(
    tmp_path: Path,
    key: str,
    argv: list[str],
    journal: Journal,
    inputs: Collection[str] = (),
    patterns: Collection[str] = (),
) -> TaskSpec:
    return TaskSpec(
        key=key,
        argv=argv,
        env={"TASK_KEY": key},
        workdir=str(tmp_path / "work" / key),
        output_dir=str(tmp_path / "out" / key),
        inputs=list(inputs),
        output_patterns=list(patterns),
        events=str(journal.path),
    )


def out(tmp_path: Path, key: str) -> Path:
    return tmp_path / "out" / key


def read_json(path: Path) -> dict[str, Any]:
    value = json.loads(path.read_text())
    assert isinstance(value, dict)
    return value


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def is_gone(pid: int) -> bool:
    """A process that no longer exists or is only a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    return stat.rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")


def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.01)


def start_pid(tmp_path: Path, key: str) -> int:
    pid = read_json(out(tmp_path, key) / "__run__")["pid"]
    assert isinstance(pid, int)
    return pid


@contextlib.contextmanager
def paused_runner(tmp_path: Path, runner_dir: Path) -> Iterator[int]:
    """A live runner, stopped with SIGSTOP: requests sent to it stay queued, unread.

    The caller resumes it (SIGCONT) or crashes it (SIGKILL) when done.
    """
    warm = Journal(tmp_path / "warm.jsonl")
    workdir = str(tmp_path / "warm")
    task = TaskSpec("warm", ["true"], {}, workdir, workdir, [], [], str(warm.path))
    submit(runner_dir, [task], BASE_ENV, 1)
    warm.wait(["warm"])
    pid = runner_pid(runner_dir)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # so that stop() can end it if the test failed


def kill_groups(pgids: Collection[int]) -> None:
    """Clean up after a failed test: tasks the runner was asked to leave running."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def test_echo_tasks_complete_with_outputs_events_and_exit_files(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    keys = [f"7.{i}" for i in range(200)]
    tasks = [make_task(tmp_path, key, ["/bin/echo", "hello", key], journal) for key in keys]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=4)
    final = journal.wait(keys)
    batch_ids = set()
    # Too short for a "started" event: the final event carries the start time. Under a
    # heavy load an echo may still be reaped after the delay, so most, not all, say so.
    unannounced = sum(journal.of(key) == ["completed"] for key in keys)
    assert unannounced >= len(keys) // 2
    for key in keys:
        assert final[key].event == "completed"
        assert final[key].exit_code == 0 and final[key].reason is None
        assert journal.of(key) in (["completed"], ["started", "completed"])
        assert (out(tmp_path, key) / "stdout").read_text() == f"hello {key}\n"
        assert (out(tmp_path, key) / "stderr").read_text() == ""
        record = read_json(out(tmp_path, key) / "__run__")
        assert record["state"] == "completed" and record["exit_code"] == 0
        assert record["start"] == final[key].start
        assert isinstance(record["end"], float) and record["end"] >= record["start"]
        assert isinstance(record["pid"], int)
        batch_ids.add(record["batch"])
    assert len(batch_ids) == 1
    # A finished batch leaves nothing behind in the runner's directory.
    wait_until(lambda: not os.listdir(runner_dir / "accepted"))
    assert not [n for n in os.listdir(runner_dir / "queue") if not n.startswith(".")]


def test_a_task_that_keeps_running_is_announced_with_a_started_event(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    submit(runner_dir, [make_task(tmp_path, "long", ["sleep", "0.6"], journal)], BASE_ENV, 1)
    started = journal.wait(["long"], event="started")["long"]
    assert journal.of("long") == ["started"]  # announced while it still runs
    running = read_json(out(tmp_path, "long") / "__run__")
    assert "state" not in running and running["time"] == started.time
    assert isinstance(running["pid"], int)
    final = journal.wait(["long"])["long"]
    assert journal.of("long") == ["started", "completed"]
    assert final.start == started.time == read_json(out(tmp_path, "long") / "__run__")["start"]
    assert final.time - started.time >= 0.5


def test_concurrency_limit_is_honoured(tmp_path: Path, runner_dir: Path, journal: Journal) -> None:
    script = "date +%s%N > t0; sleep 0.25; date +%s%N > t1"
    keys = [f"c.{i}" for i in range(8)]
    tasks = [make_task(tmp_path, key, sh(script), journal) for key in keys]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=3)
    final = journal.wait(keys)
    assert all(final[key].event == "completed" for key in keys)
    changes = []
    for key in keys:
        workdir = tmp_path / "work" / key
        changes.append((int((workdir / "t0").read_text()), 1))
        changes.append((int((workdir / "t1").read_text()), -1))
    running = peak = 0
    for _, change in sorted(changes):
        running += change
        peak = max(peak, running)
    assert peak == 3


def test_a_slot_starts_the_next_task_while_the_event_loop_is_busy(
    tmp_path: Path, runner_dir: Path
) -> None:
    """A task's end starts the next task in line at once, without the runner's event loop:
    here the loop is stuck writing to the tasks' journal, a full pipe."""
    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    pipe = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    for size in (4096, 1):
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(pipe, b"x" * size)
    journal = Journal(fifo)
    gate = tmp_path / "gate"
    ran = tmp_path / "work" / "second" / "ran"
    first = make_task(tmp_path, "first", sh(f"until [ -e {gate} ]; do sleep 0.01; done"), journal)
    second = make_task(tmp_path, "second", sh("touch ran"), journal)
    submit(runner_dir, [first, second], BASE_ENV, max_concurrent=1)
    # The runner is named by whichever of the client and itself writes its record first.
    wait_until(lambda: runner_pid(runner_dir) is not None)
    pid = runner_pid(runner_dir)
    assert pid is not None
    stuck = Path(f"/proc/{pid}/wchan")
    draining = threading.Event()

    def drain() -> None:
        while not draining.is_set():
            with contextlib.suppress(BlockingIOError):
                os.read(pipe, 65536)
            time.sleep(0.01)

    try:
        # The first task runs long enough to be announced: the loop writes its "started"
        # event and waits there for room in the pipe.
        wait_until(lambda: "pipe_write" in stuck.read_text())
        gate.touch()
        wait_until(ran.exists)
        assert "pipe_write" in stuck.read_text()
    finally:
        drainer = threading.Thread(target=drain)
        drainer.start()  # lets the loop go on
        stop(runner_dir)
        draining.set()
        drainer.join()
        os.close(pipe)


def test_nonzero_exit_is_a_failure_with_its_exit_code(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    submit(
        runner_dir, [make_task(tmp_path, "f", sh("echo oops >&2; exit 3"), journal)], BASE_ENV, 2
    )
    event = journal.wait(["f"])["f"]
    assert (event.event, event.exit_code, event.reason) == ("failed", 3, "exit code 3")
    exit_record = read_json(out(tmp_path, "f") / "__run__")
    assert (exit_record["state"], exit_record["exit_code"]) == ("failed", 3)
    assert (out(tmp_path, "f") / "stderr").read_text() == "oops\n"


def test_environment_is_the_base_env_and_the_task_env_only(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    # The runner itself has PYTHONPATH set; it must not leak into tasks.
    script = 'echo "$TASK_KEY ${SHARED-unset} ${PYTHONPATH-unset}"'
    task = make_task(tmp_path, "env", sh(script), journal)
    submit(runner_dir, [task], {**BASE_ENV, "SHARED": "base", "TASK_KEY": "base"}, 1)
    assert journal.wait(["env"])["env"].event == "completed"
    assert (out(tmp_path, "env") / "stdout").read_text() == "env base unset\n"


def test_missing_and_non_executable_programs_fail_without_disturbing_others(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    not_executable = tmp_path / "script.sh"
    not_executable.write_text("#!/bin/sh\necho hi\n")
    not_executable.chmod(0o644)
    tasks = [
        make_task(tmp_path, "ok.0", ["/bin/echo", "a"], journal),
        make_task(tmp_path, "missing", ["/no/such/program"], journal),
        make_task(tmp_path, "ok.1", ["echo", "b"], journal),  # found on PATH
        make_task(tmp_path, "not-exec", [str(not_executable)], journal),
        make_task(tmp_path, "no-name", ["no-such-program-anywhere"], journal),
        make_task(tmp_path, "ok.2", ["/bin/echo", "c"], journal),
    ]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=2)
    final = journal.wait([t.key for t in tasks])
    assert [final[k].event for k in ("ok.0", "ok.1", "ok.2")] == ["completed"] * 3
    assert (out(tmp_path, "ok.1") / "stdout").read_text() == "b\n"
    assert final["missing"].event == "failed"
    assert final["missing"].reason == "program not found: /no/such/program"
    assert final["no-name"].reason == "program not found: no-such-program-anywhere"
    assert final["not-exec"].event == "failed"
    assert final["not-exec"].reason == f"program is not executable: {not_executable}"
    for key in ("missing", "not-exec", "no-name"):
        assert final[key].exit_code is None
        assert journal.of(key) == ["failed"]
        record = read_json(out(tmp_path, key) / "__run__")
        assert record["state"] == "failed"
        assert record["start"] is None and record["pid"] is None  # it never started


def test_output_patterns_are_collected_or_fail_the_task(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    script = "echo data > result.txt; echo more > extra.txt; echo log > run.log"
    tasks = [
        make_task(tmp_path, "collect", sh(script), journal, patterns=["*.txt"]),
        make_task(tmp_path, "nomatch", sh(script), journal, patterns=["*.log", "*.dat"]),
    ]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=2)
    final = journal.wait(["collect", "nomatch"])
    assert final["collect"].event == "completed"
    assert (out(tmp_path, "collect") / "result.txt").read_text() == "data\n"
    assert (out(tmp_path, "collect") / "extra.txt").read_text() == "more\n"
    assert not (tmp_path / "work" / "collect" / "result.txt").exists()
    assert (tmp_path / "work" / "collect" / "run.log").exists()
    assert final["nomatch"].event == "failed"
    assert final["nomatch"].exit_code == 0
    assert final["nomatch"].reason == "output pattern '*.dat' matched no file"


def test_inputs_are_copied_into_the_workdir(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    first, second = tmp_path / "in" / "a.txt", tmp_path / "in" / "b.txt"
    first.parent.mkdir()
    first.write_text("alpha\n")
    second.write_text("beta\n")
    first.chmod(0o755)  # a script: the copy stays executable, and private
    second.chmod(0o644)
    task = make_task(
        tmp_path, "in", ["cat", "a.txt", "b.txt"], journal, inputs=[str(first), str(second)]
    )
    missing = make_task(tmp_path, "in-missing", ["true"], journal, inputs=[str(tmp_path / "no")])
    submit(runner_dir, [task, missing], BASE_ENV, max_concurrent=2)
    final = journal.wait(["in", "in-missing"])
    assert final["in"].event == "completed"
    assert (out(tmp_path, "in") / "stdout").read_text() == "alpha\nbeta\n"
    # a copy, never a link: the program may write to it
    assert (tmp_path / "work" / "in" / "a.txt").stat().st_ino != first.stat().st_ino
    assert first.stat().st_nlink == 1
    assert (tmp_path / "work" / "in" / "a.txt").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "work" / "in" / "b.txt").stat().st_mode & 0o777 == 0o600
    assert final["in-missing"].event == "failed"
    assert final["in-missing"].reason == f"input file not found: {tmp_path / 'no'}"


def test_kill_queued_and_running_tasks_including_grandchildren(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    tree = "sleep 100 & echo $! > grandchild; wait"
    stubborn = "trap '' TERM; sleep 100 & echo $! > grandchild; wait"
    tasks = [
        make_task(tmp_path, "tree", sh(tree), journal),
        make_task(tmp_path, "stubborn", sh(stubborn), journal),
        make_task(tmp_path, "queued", ["/bin/echo", "never"], journal),
    ]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=2)
    journal.wait(["tree", "stubborn"], event="started")
    grandchild = {key: tmp_path / "work" / key / "grandchild" for key in ("tree", "stubborn")}
    wait_until(lambda: all(p.exists() and p.read_text().strip() for p in grandchild.values()))
    pids = {key: [start_pid(tmp_path, key), int(grandchild[key].read_text())] for key in grandchild}
    try:
        killed_at = time.monotonic()
        kill(runner_dir, ["queued", "tree", "stubborn", "unknown-key"])
        final = journal.wait(["queued", "tree", "stubborn"])
        for key in ("queued", "tree", "stubborn"):
            assert final[key].event == "killed"
            assert final[key].reason == "killed by user"
            assert read_json(out(tmp_path, key) / "__run__")["state"] == "killed"
        assert journal.of("queued") == ["killed"]
        assert not (out(tmp_path, "queued") / "stdout").exists()
        assert final["tree"].exit_code == -signal.SIGTERM
        # The task ignoring SIGTERM is only gone after the grace period, by SIGKILL.
        assert final["stubborn"].exit_code == -signal.SIGKILL
        assert time.monotonic() - killed_at >= 2.5
        every_pid = [pid for key_pids in pids.values() for pid in key_pids]
        wait_until(lambda: all(is_gone(pid) for pid in every_pid), 5.0)
    except BaseException:
        kill_groups([key_pids[0] for key_pids in pids.values()])
        raise


def test_no_killed_queued_task_ever_starts_when_its_slot_frees(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    """One slot: the next task is handed to its thread ahead, the rest queue.  Killing all
    while the first runs, then letting the first end, starts none of the others."""
    release = tmp_path / "release"
    first = make_task(
        tmp_path, "first", sh(f"while [ ! -e {release} ]; do sleep 0.01; done"), journal
    )
    queued = [
        make_task(tmp_path, f"q.{i}", sh(f"touch {tmp_path}/ran.q.{i}"), journal) for i in range(40)
    ]
    submit(runner_dir, [first, *queued], BASE_ENV, max_concurrent=1)
    journal.wait(["first"], event="started")
    keys = [task.key for task in queued]
    kill(runner_dir, keys)
    final = journal.wait(keys)
    release.touch()  # the slot frees only now, every other task already killed
    # First in, first out on the one slot: once this one has run, none of those before can.
    last = make_task(tmp_path, "last", ["true"], journal)
    submit(runner_dir, [last], BASE_ENV, max_concurrent=1)
    assert journal.wait(["first", "last"])["first"].event == "completed"
    assert {final[key].event for key in keys} == {"killed"}
    assert all(journal.of(key) == ["killed"] for key in keys)
    # Never started: the one handed to the slot ahead has a record saying so; those still
    # queued none of their own (their batch's kill record named them).
    records = [out(tmp_path, key) / "__run__" for key in keys]
    assert all(not path.exists() or read_json(path)["pid"] is None for path in records)
    assert sum(path.exists() for path in records) <= 1
    assert not list(tmp_path.glob("ran.*"))


def test_runner_survives_the_submitting_process(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    keys = [f"s.{i}" for i in range(20)]
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from ganga_like_runner.client import TaskSpec, submit
        root = Path({str(tmp_path)!r})
        tasks = [
            TaskSpec(key, ["/bin/sh", "-c", "sleep 0.3; echo done " + key], {{}},
                     str(root / "work" / key), str(root / "out" / key), [], [],
                     {str(journal.path)!r})
            for key in {keys!r}
        ]
        submit(Path({str(runner_dir)!r}), tasks, {BASE_ENV!r}, max_concurrent=10)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(PLUGINS)}
    submitter = subprocess.run([sys.executable, "-c", code], env=env, timeout=TIMEOUT)
    assert submitter.returncode == 0
    final = journal.wait(keys)
    assert all(final[key].event == "completed" for key in keys)
    assert (out(tmp_path, "s.3") / "stdout").read_text() == "done s.3\n"


def test_idle_runner_exits_and_a_new_one_starts_on_demand(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    submit(runner_dir, [make_task(tmp_path, "i.0", ["true"], journal)], BASE_ENV, 1, 0.2)
    journal.wait(["i.0"])
    first = runner_pid(runner_dir)
    wait_until(lambda: runner_pid(runner_dir) is None, 5.0)
    wait_until(lambda: first is None or is_gone(first), 5.0)
    assert "exiting (idle)" in (runner_dir / "runner.log").read_text()
    fd = os.open(runner_dir / "runner.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    finally:
        os.close(fd)
    submit(runner_dir, [make_task(tmp_path, "i.1", ["true"], journal)], BASE_ENV, 1, 30.0)
    assert journal.wait(["i.1"])["i.1"].event == "completed"
    assert runner_pid(runner_dir) is not None


def test_concurrent_submitters_racing_an_idle_exiting_runner_lose_nothing(
    tmp_path: Path, runner_dir: Path
) -> None:
    # The runner leaves as soon as it is idle.  Each submitter queues its next batch right
    # after seeing its previous one finish, which is exactly when a runner is leaving, or
    # after a short random pause, which lands while one is starting or absent.
    code = textwrap.dedent(
        f"""
        import random, sys, time
        from pathlib import Path
        from ganga_like_runner.client import TaskSpec, read_events, submit
        root, name = Path({str(tmp_path)!r}), sys.argv[1]
        journal, offset = root / "events" / f"{{name}}.jsonl", 0
        for batch in range(12):
            keys = [f"{{name}}.{{batch}}.{{i}}" for i in range(2)]
            tasks = [TaskSpec(k, ["true"], {{}}, str(root / "work" / k), str(root / "out" / k),
                              [], [], str(journal)) for k in keys]
            submit(Path({str(runner_dir)!r}), tasks, {BASE_ENV!r}, 2, idle_exit_seconds=0.0)
            done, deadline = set(), time.monotonic() + {TIMEOUT}
            while len(done) < len(keys) and time.monotonic() < deadline:
                events, offset = read_events(journal, offset)
                done.update(e.key for e in events if e.event == "completed")
                time.sleep(0.001)
            time.sleep(random.choice([0.0, random.uniform(0, 0.05)]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(PLUGINS)}
    names = ("a", "b")
    submitters = [subprocess.Popen([sys.executable, "-c", code, name], env=env) for name in names]
    assert [p.wait(timeout=2 * TIMEOUT) for p in submitters] == [0, 0]
    for name in names:
        journal = Journal(tmp_path / "events" / f"{name}.jsonl")
        keys = [f"{name}.{b}.{i}" for b in range(12) for i in range(2)]
        final = journal.wait(keys)
        assert all(final[key].event == "completed" for key in keys)
        assert all(journal.of(key) == ["completed"] for key in keys)
    assert (runner_dir / "runner.log").read_text().count("runner started") >= 3


def test_runner_killed_mid_run_is_recovered_by_the_next_one(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    fast = [f"fast.{i}" for i in range(3)]
    slow = ["slow.0", "slow.1"]
    queued = [f"queued.{i}" for i in range(3)]
    tasks = [make_task(tmp_path, key, ["/bin/echo", key], journal) for key in fast]
    tasks += [make_task(tmp_path, key, ["sleep", "100"], journal) for key in slow]
    tasks += [make_task(tmp_path, key, ["/bin/echo", key], journal) for key in queued]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=2)
    journal.wait(fast)
    journal.wait(slow, event="started")
    slow_pids = {key: start_pid(tmp_path, key) for key in slow}
    try:
        old = runner_pid(runner_dir)
        assert old is not None
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: runner_pid(runner_dir) is None, 5.0)
        assert all(not is_gone(pid) for pid in slow_pids.values())  # orphans still running
        assert os.listdir(runner_dir / "accepted")

        submit(runner_dir, [make_task(tmp_path, "new", ["/bin/echo", "new"], journal)], BASE_ENV, 2)
        final = journal.wait([*fast, *slow, *queued, "new"])
        for key in slow:
            assert final[key].event == "failed"
            assert final[key].reason == (f"the runner died while it ran (pid {slow_pids[key]})")
            assert journal.of(key) == ["started", "failed"]
            assert read_json(out(tmp_path, key) / "__run__")["state"] == "failed"
        for key in [*fast, *queued, "new"]:
            assert final[key].event == "completed"
            assert journal.of(key) == ["completed"], key  # nothing ran twice
        wait_until(lambda: all(is_gone(pid) for pid in slow_pids.values()), 5.0)
        wait_until(lambda: not os.listdir(runner_dir / "accepted"), 5.0)
    except BaseException:
        kill_groups(slow_pids.values())
        raise


def test_recovery_from_every_state_a_crash_can_leave(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    keys = ["logged", "unlogged", "no-pid", "reused-pid", "superseded", "old-exit", "fresh"]
    tasks = [make_task(tmp_path, key, ["/bin/echo", key], journal) for key in keys]
    # Queue the batch for a paused runner, put it where the runner would have moved it on
    # reading it, then crash the runner.
    with paused_runner(tmp_path, runner_dir) as paused:
        submit(runner_dir, tasks, BASE_ENV, 2)
        (batch_file,) = (runner_dir / "queue").iterdir()
        batch = json.loads(batch_file.read_bytes())["id"]
        (runner_dir / "accepted").mkdir(exist_ok=True)
        batch_file.rename(runner_dir / "accepted" / batch_file.name)
        os.kill(paused, signal.SIGKILL)
        wait_until(lambda: is_gone(paused), 5.0)

    def state(key: str, name: str, record: dict[str, object]) -> None:
        out(tmp_path, key).mkdir(parents=True, exist_ok=True)
        (out(tmp_path, key) / name).write_text(json.dumps(record))

    done = {"state": "completed", "exit_code": 0, "start": 1.0, "reason": None, "batch": batch}
    state("logged", "__run__", {**done, "end": 2.0})
    state("unlogged", "__run__", {**done, "end": 3.0})
    state("no-pid", "__run__", {"time": 1.0, "pid": None, "batch": batch})
    # A process older than the task that got its pid must survive the recovery.
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    state("reused-pid", "__run__", {"time": time.time() + 60, "pid": bystander.pid, "batch": batch})
    state("superseded", "__run__", {"time": 1.0, "pid": None, "batch": "9" * 20})
    state("old-exit", "__run__", {**done, "end": 2.0, "batch": "0" * 20})
    journal.path.parent.mkdir()
    # The crash also cut the journal in the middle of a line.
    journal.path.write_bytes(event_line("logged", "completed", 2.0, 0, None) + b'{"key": "cut')
    try:
        submit(runner_dir, [make_task(tmp_path, "trigger", ["true"], journal)], BASE_ENV, 2)
        final = journal.wait(["logged", "unlogged", "no-pid", "reused-pid", "old-exit", "fresh"])
        journal.wait(["trigger"])
        assert journal.of("logged") == ["completed"]
        assert journal.of("unlogged") == ["completed"]
        assert final["unlogged"].time == 3.0
        assert final["no-pid"].reason == ("the runner died while it ran (pid unknown)")
        assert final["reused-pid"].reason == (f"the runner died while it ran (pid {bystander.pid})")
        assert bystander.poll() is None
        assert journal.of("superseded") == []
        for key in ("old-exit", "fresh"):
            assert journal.of(key) == ["completed"]
            assert (out(tmp_path, key) / "stdout").read_text() == f"{key}\n"
        wait_until(lambda: not os.listdir(runner_dir / "accepted"), 5.0)
    finally:
        bystander.kill()
        bystander.wait()


def test_configure_changes_the_limit_of_a_live_runner(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    keys = [f"cfg.{i}" for i in range(4)]
    # Each task runs until the test releases them all: none can end and make room.
    release = tmp_path / "release"
    hold = sh(f"while [ ! -e {release} ]; do sleep 0.01; done")
    tasks = [make_task(tmp_path, key, hold, journal) for key in keys]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=1)
    journal.wait(["cfg.0"], event="started")
    assert [e.key for e in journal.events if e.event == "started"] == ["cfg.0"]
    configure(runner_dir, max_concurrent=4)
    # The three that waited behind the first one start once the limit is raised, while
    # the first one still runs.
    journal.wait(keys, event="started")
    assert journal.final() == {}
    release.touch()
    final = journal.wait(keys)
    assert all(final[key].event == "completed" for key in keys)


def test_same_key_can_run_again_after_failing(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    submit(runner_dir, [make_task(tmp_path, "r", ["false"], journal)], BASE_ENV, 1)
    assert journal.wait(["r"])["r"].event == "failed"
    submit(runner_dir, [make_task(tmp_path, "r", ["/bin/echo", "again"], journal)], BASE_ENV, 1)

    def ran_again() -> bool:
        journal.poll()
        return journal.of("r")[-1:] == ["completed"]

    wait_until(ran_again)
    assert journal.of("r") == ["failed", "completed"]
    assert read_json(out(tmp_path, "r") / "__run__")["state"] == "completed"
    assert (out(tmp_path, "r") / "stdout").read_text() == "again\n"


ARGUMENT = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
    max_size=20,
) | st.sampled_from(["", " ", "'", '"', "$HOME", "`id`", "a;b|c&d", "*", "\\", "\n", "-c", "é€😀"])
ECHO_ARGS = (
    "import os, sys; sys.stdout.buffer.write(b'\\0'.join(os.fsencode(a) for a in sys.argv[1:]))"
)


def test_arguments_reach_the_program_unchanged(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    examples: list[list[str]] = []

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(ARGUMENT, max_size=6))
    def collect(args: list[str]) -> None:
        examples.append(args)

    collect()
    tasks = [
        make_task(tmp_path, f"arg.{i}", [sys.executable, "-c", ECHO_ARGS, *args], journal)
        for i, args in enumerate(examples)
    ]
    submit(runner_dir, tasks, BASE_ENV, max_concurrent=4)
    final = journal.wait([t.key for t in tasks])
    for i, args in enumerate(examples):
        key = f"arg.{i}"
        assert final[key].event == "completed", final[key]
        expected = b"\0".join(arg.encode("utf-8") for arg in args)
        assert (out(tmp_path, key) / "stdout").read_bytes() == expected, args


def test_read_events_keeps_a_partial_last_line_for_later(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    whole = event_line("1", "started", 1.5, None, None)
    partial = event_line("1", "completed", 2.5, 0, "multi\nline")
    path.write_bytes(whole + partial[:10])
    events, offset = read_events(path, 0)
    assert events == [Event("1", "started", 1.5, None, None)]
    assert offset == len(whole)
    assert read_events(path, offset) == ([], offset)
    with open(path, "ab") as handle:
        handle.write(partial[10:])
    events, offset = read_events(path, offset)
    assert events == [Event("1", "completed", 2.5, 0, "multi\nline")]
    assert offset == path.stat().st_size
    assert read_events(tmp_path / "absent", 0) == ([], 0)


def best_of(runs: int, action: Callable[[], object]) -> float:
    """CPU seconds of the fastest of a few runs.

    CPU time and the best run keep a busy machine (other processes, preemption) from
    failing a check that is about this code's own cost.
    """
    times = []
    for _ in range(runs):
        start = time.process_time()
        action()
        times.append(time.process_time() - start)
    return min(times)


def test_submit_and_read_events_are_fast(tmp_path: Path, runner_dir: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    tasks = [make_task(tmp_path, f"{i}", ["true"], journal) for i in range(10_000)]
    with paused_runner(tmp_path, runner_dir) as paused:
        elapsed = best_of(3, lambda: submit(runner_dir, tasks, BASE_ENV, 4))
        batches = sorted((runner_dir / "queue").iterdir())
        for batch in batches:
            batch.unlink()  # nothing for the runner to pick up when it resumes
        os.kill(paused, signal.SIGCONT)
    assert elapsed < 0.3
    assert len(batches) == 3

    lines = [event_line(str(i), "completed", 1e9 + i, 0, None) for i in range(10_000)]
    journal.path.write_bytes(b"".join(lines))
    result: list[tuple[list[Event], int]] = []
    elapsed = best_of(5, lambda: result.append(read_events(journal.path, 0)))
    assert elapsed < 0.05
    events, offset = result[0]
    assert len(events) == 10_000 and offset == journal.path.stat().st_size
    assert events[-1] == Event("9999", "completed", 1e9 + 9999, 0, None)


def test_a_kill_posted_as_empty_files_for_a_full_disk_reaches_its_tasks(
    tmp_path: Path, runner_dir: Path, journal: Journal
) -> None:
    from ganga_like_runner.client import _post_kill_names

    keys = ["a.0@1", "a.1@1"]
    submit(
        runner_dir,
        [make_task(tmp_path, key, sh("sleep 30"), journal) for key in keys],
        BASE_ENV,
        max_concurrent=1,
    )
    journal.wait(["a.0@1"], event="started")
    # Many keys: they are spread over several names, none longer than a file name may be.
    names = _post_kill_names(runner_dir / "queue", [*keys, *(f"other.{i}@1" for i in range(60))])
    assert len(names) > 1 and all(len(name) < 256 for name in names)
    pid = runner_pid(runner_dir)
    assert pid is not None
    os.kill(pid, signal.SIGUSR1)
    final = journal.wait(keys)
    assert {key: final[key].event for key in keys} == {"a.0@1": "killed", "a.1@1": "killed"}
    assert not [n for n in os.listdir(runner_dir / "queue") if not n.startswith(".")]


@pytest.mark.parametrize("module", ["ganga_like_runner", "ganga_like_local.runner"])
def test_a_live_runner_is_found_under_its_module_and_the_one_earlier_versions_started(
    tmp_path: Path, module: str
) -> None:
    """A runner an earlier version started may still run tasks after an upgrade: its
    command line names the runner's earlier module, and it is still found (and so woken
    and stopped) rather than taken for a stranger holding the lock."""
    runner = tmp_path / "runner"
    runner.mkdir()
    with process_with_args(module, str(runner)) as pid:
        (runner / "runner.pid").write_text(f"{pid}\n")
        assert runner_pid(runner) == pid
        (runner / "runner.pid").write_text(f"{os.getpid()}\n")  # not a runner
        assert runner_pid(runner) is None
