"""The watchdog beside a Dask worker: one per worker, however many programs it runs, and
what the worker started ends when the worker's end of the pipe closes (it died), whether
the worker had told of it yet or not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from ganga_like_dask import task, watchdog

from .waiting import wait_for


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _watchdogs() -> set[int]:
    """The pids of this process's living watchdogs (those of workers that ran in it
    earlier may be ending, or ended and not reaped yet)."""
    found = set()
    for child in psutil.Process().children():
        try:
            if task.WATCHDOG in " ".join(child.cmdline() or []) and _alive(child.pid):
                found.add(child.pid)
        except psutil.Error:  # a zombie, or gone meanwhile
            continue
    return found


def test_one_watchdog_serves_every_program_of_a_worker() -> None:
    """Starting an interpreter beside each program cost many times what a short program
    does: the worker's one watchdog is started once and told of each program."""
    before = _watchdogs()
    serving = []
    for i in range(3):
        outcome = task.run(
            {
                "key": f"w{i}",
                "argv": ["/bin/echo", str(i)],
                "env": {},
                "inputs": [],
                "output_patterns": [],
            }
        )
        assert outcome["state"] == "completed"
        assert outcome["stdout"] == f"{i}\n".encode()
        watchdog = task._DIRECT.watchdog  # this process's, as it is no worker
        assert watchdog is not None
        serving.append(watchdog.pid)
    assert len(set(serving)) == 1
    assert _watchdogs() - before <= set(serving)


def _deaf_with_a_child(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """A shell in a session of its own that starts a child deaf to SIGTERM; the child's
    pid once it runs."""
    child_file = tmp_path / "child"
    shell = subprocess.Popen(
        [
            "/bin/sh",
            "-c",
            f"( trap '' TERM; sleep 300 ) & echo $! > {child_file}.new "
            f"&& mv {child_file}.new {child_file}; wait",
        ],
        env={**os.environ, **env},
        start_new_session=True,
    )
    wait_for(child_file.exists, 60, "the child to start")
    return shell, int(child_file.read_text())


def test_a_closed_pipe_ends_the_groups_told_of_and_the_marked_programs(tmp_path: Path) -> None:
    mark = "test-mark"
    guard = subprocess.Popen(
        [sys.executable, "-I", "-S", task.WATCHDOG, mark],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    (tmp_path / "told").mkdir()
    (tmp_path / "untold").mkdir()
    told, told_child = _deaf_with_a_child(tmp_path / "told", {})
    # Started, and the worker died before it told the watchdog: found by its mark.
    untold, untold_child = _deaf_with_a_child(tmp_path / "untold", {watchdog.MARK_VARIABLE: mark})
    plain, plain_child = _deaf_with_a_child(tmp_path, {})  # neither: not the worker's
    try:
        assert guard.stdin is not None
        guard.stdin.write(f"+{told.pid}\n".encode())
        guard.stdin.flush()
        guard.stdin.close()  # what the kernel does when the worker dies
        assert guard.wait(60) == 0
        for proc in (told, untold):
            proc.wait(60)
        wait_for(
            lambda: not _alive(told_child) and not _alive(untold_child),
            60,
            "the programs' children to end",
        )
        assert _alive(plain.pid) and _alive(plain_child)
    finally:
        os.killpg(plain.pid, signal.SIGKILL)
        plain.wait(60)
