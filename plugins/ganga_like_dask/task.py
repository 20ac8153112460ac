"""What runs on a Dask worker: one subjob's program, and the kill of running ones.

Only the standard library and ``distributed`` are used here, so that a worker needs nothing
of ``ganga_like`` but this module. Input files travel in the task's payload and the program's
stdout, stderr and output files travel back in its result: the workers need not share a
file system with the session.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from ganga_like_dask.claim import claim
from ganga_like_dask.watchdog import MARK_VARIABLE

__all__ = [
    "STARTED_TOPIC",
    "TASKS_ATTRIBUTE",
    "WorkerTasks",
    "kill_all",
    "kill_keys",
    "remove_work",
    "run",
]

# The scheduler event topic a task logs its start under when it could not claim it.
STARTED_TOPIC = "ganga_like-started"
# SIGTERM first; what is still alive this many seconds later gets SIGKILL.
KILL_GRACE = 3.0

# Where a worker keeps its WorkerTasks (as the scheduler keeps the claims on itself).
TASKS_ATTRIBUTE = "_ganga_like_tasks"


class WorkerTasks:
    """Of one worker: key -> the running program, the keys killed (so that one killed
    just before its program starts never starts it), and the worker's watchdog (which
    ends the running programs' process groups when the worker dies)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.killed: set[str] = set()
        self.watchdog: subprocess.Popen[bytes] | None = None
        # In every program's environment: what the watchdog finds one by that it was not
        # told of yet when the worker died.
        self.mark = f"{os.getpid()}-{secrets.token_hex(8)}"

    def guard(self) -> None:
        """Have the watchdog running, before a program starts (a watchdog that is gone
        is replaced, and told of every running program). Called with ``lock`` held."""
        if self.watchdog is not None and self.watchdog.poll() is None:
            return
        self.watchdog = _start_watchdog(self.mark)
        self._tell(b"".join(f"+{p.pid}\n".encode() for p in self.running.values()))

    def watch(self, group: int, started: bool) -> None:
        """Tell the watchdog that the process group ``group`` started (or was reaped).
        Called with ``lock`` held."""
        self._tell(f"{'+' if started else '-'}{group}\n".encode())

    def _tell(self, lines: bytes) -> None:
        watchdog = self.watchdog
        if watchdog is None or not lines:
            return  # none could start: the programs run on, as without it
        try:
            os.write(watchdog.stdin.fileno(), lines)  # type: ignore[union-attr]
        except OSError:  # it died meanwhile: the next program starts another
            self.watchdog = None


# The WorkerTasks of a process that calls ``run`` directly, not on a worker.
_DIRECT = WorkerTasks()


def _tasks_of(worker: Any) -> WorkerTasks:
    """The worker's WorkerTasks, made on first use (``setdefault`` makes one even when
    two of its threads ask at once); the process's own when not called on a worker."""
    if worker is None:
        try:
            from distributed import get_worker

            worker = get_worker()
        except (ImportError, ValueError):
            return _DIRECT
    tasks: WorkerTasks = vars(worker).setdefault(TASKS_ATTRIBUTE, WorkerTasks())
    return tasks


def _log_started(key: str, start: float) -> None:
    try:
        from distributed import get_worker

        get_worker().log_event(STARTED_TOPIC, {"key": key, "time": start})
    except (ImportError, ValueError):  # not on a worker (called directly)
        pass


def _claim(key: str, start: float) -> Callable[[], float | None]:
    """Claim the start of ``key``'s program at the scheduler; what waits for the answer:
    the time an earlier run of ``key`` started, if there was one (its worker was lost and
    the scheduler sent the task again), or None (this is its first run)."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not on a worker (called directly)
        return lambda: None

    def unanswered() -> None:  # the scheduler did not answer: run, and say when it started
        _log_started(key, start)

    try:
        return claim(worker, key, start, unanswered)
    except Exception:
        unanswered()
        return lambda: None


def _not_again(result: dict[str, Any], earlier: float) -> dict[str, Any]:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(earlier))
    result["start"] = earlier
    result["end"] = time.time()
    result["reason"] = (
        f"the Dask worker running it was lost (its program started at {when}); "
        "the task was sent again and is not run a second time"
    )
    return result


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one subjob in a fresh work directory; its outcome, files included."""
    key: str = payload["key"]
    result: dict[str, Any] = {
        "state": "failed",
        "exit_code": None,
        "start": None,
        "end": None,
        "reason": "",
        "stdout": b"",
        "stderr": b"",
        "outputs": {},
        "usage": None,
    }
    # Its work directory is made while the claim is on its way.
    answer = _claim(key, time.time())
    work = tempfile.mkdtemp(prefix="ganga_like-")
    try:
        for name, data in payload["inputs"]:
            with open(os.path.join(work, name), "wb") as handle:
                handle.write(data)
        env = _environment(payload)
        out_path, err_path = (os.path.join(work, name) for name in OWN_FILES)
        tasks = _tasks_of(None)
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            earlier = answer()
            if earlier is not None:
                return _not_again(result, earlier)
            proc = _start(payload, work, env, (out, err), tasks, result)
        if proc is None:
            return result
        result["start"] = time.time()
        code, result["usage"] = _reap(proc)
        result["end"] = time.time()
        with tasks.lock:
            tasks.running.pop(key, None)
            tasks.watch(proc.pid, started=False)
            killed = key in tasks.killed
        result["exit_code"] = code
        result["stdout"] = _read(out_path)
        result["stderr"] = _read(err_path)
        if killed:
            _signal(proc, signal.SIGKILL)  # what outlived the SIGTERM, the program gone
            result["state"] = "killed"
        elif code != 0:
            note = _failure_note(work) if code == 1 else None
            if note is not None:  # the program's wrapper failed (a transfer): its reason
                result["reason"], result["exit_code"] = note
            else:
                result["reason"] = f"exit code {code}"
        else:
            problem = _collect(work, payload["output_patterns"], result["outputs"])
            result["state"] = "failed" if problem else "completed"
            result["reason"] = problem or ""
        return result
    finally:
        remove_work(work, [name for name, _ in payload["inputs"]])


def _start(
    payload: dict[str, Any],
    work: str,
    env: dict[str, str],
    outputs: tuple[Any, Any],
    tasks: WorkerTasks,
    result: dict[str, Any],
) -> subprocess.Popen[bytes] | None:
    """Start the program, known to the watchdog and to a kill; None when it is not
    started (killed before, or it cannot be), with why in ``result``."""
    key: str = payload["key"]
    with tasks.lock:
        if key in tasks.killed:
            result["state"] = "killed"
            return None
        tasks.guard()
        env[MARK_VARIABLE] = tasks.mark
        try:
            # Its own process group, so a kill reaches the program's children too;
            # nothing run in the child before the exec, so that it is spawned, not
            # forked from the whole worker.
            proc = subprocess.Popen(
                payload["argv"],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=outputs[0],
                stderr=outputs[1],
                start_new_session=True,
            )
        except FileNotFoundError:
            result["reason"] = f"program not found: {payload['argv'][0]}"
            return None
        except PermissionError:
            result["reason"] = f"program is not executable: {payload['argv'][0]}"
            return None
        tasks.running[key] = proc
        tasks.watch(proc.pid, started=True)
    return proc


# What a work directory holds besides the inputs when the program left nothing there.
OWN_FILES = (".ganga_like.stdout", ".ganga_like.stderr")


def remove_work(work: str, inputs: list[str]) -> None:
    """Remove the work directory: its own files and the inputs, then the directory (a few
    calls, where ``rmtree`` makes several for each file); whatever the program left there
    besides, or a file it took away, by ``rmtree``."""
    try:
        for name in (*OWN_FILES, *inputs):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    except OSError:
        shutil.rmtree(work, ignore_errors=True)


def _reap(proc: subprocess.Popen[bytes]) -> tuple[int, list[float] | None]:
    """Wait for the program: its exit code (``-N`` for signal N, as Popen says it) and
    what it used, ``[peak resident KiB, user CPU s, system CPU s]`` of it and of the
    descendants it waited for (``wait4``'s rusage, free with the reaping). None when a
    kill's wait reaped it first."""
    while True:
        try:
            _pid, status, used = os.wait4(proc.pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:  # reaped by a kill's wait: Popen has its code
            return proc.wait(), None
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, [used.ru_maxrss, used.ru_utime, used.ru_stime]


# Left in the work directory by a wrapper around the program that failed (a file transfer):
# the twin of ganga_like.model.workspace.FAILURE_NOTE, which a worker does not import.
FAILURE_NOTE = "__ganga_failure__.json"


def _failure_note(work: str) -> tuple[str, int | None] | None:
    try:
        with open(os.path.join(work, FAILURE_NOTE), encoding="utf-8") as handle:
            note = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict):
        return None
    reason, code = note.get("reason"), note.get("exit_code")
    if not isinstance(reason, str) or not (code is None or isinstance(code, int)):
        return None
    return reason, code


# Beside each worker: kills its programs' process groups when it dies (see that file).
WATCHDOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog.py")


def _start_watchdog(mark: str) -> subprocess.Popen[bytes] | None:
    """The worker's watchdog, fed on its stdin (the worker's end of that pipe closes
    when the worker dies, however); None where it cannot start."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", WATCHDOG, mark],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # out of the programs' groups, which a kill signals
        )
    except OSError:
        return None


def _environment(payload: dict[str, Any]) -> dict[str, str]:
    """The worker's environment, changed to the submitting session's where the payload
    says how (the gangadir's own cluster), plus the application's variables."""
    env = dict(os.environ)
    change = payload.get("environment")
    if change:
        for name in change["unset"]:
            env.pop(name, None)
        env.update(change["set"])
    env.update(payload["env"])
    return env


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _collect(work: str, patterns: list[str], outputs: dict[str, bytes]) -> str | None:
    """Read the files matching ``patterns`` (relative path -> bytes); why it fails, if so."""
    problem: str | None = None
    for pattern in patterns:
        matches = [m for m in glob.glob(pattern, root_dir=work) if not m.startswith(".ganga")]
        if not matches:
            problem = problem or f"output pattern '{pattern}' matched no file"
        for match in matches:
            path = os.path.join(work, match)
            if os.path.isfile(path):
                outputs[match] = _read(path)
    return problem


def kill_keys(keys: list[str], dask_worker: Any = None) -> list[str]:
    """Kill the programs of ``keys`` running in this worker (SIGTERM to the process
    group, SIGKILL after a grace); the keys it found running. Run by ``client.run``,
    which passes the worker as ``dask_worker``."""
    tasks = _tasks_of(dask_worker)
    with tasks.lock:
        tasks.killed.update(keys)
        procs = [(k, tasks.running[k]) for k in keys if k in tasks.running]
    for _key, proc in procs:
        _signal(proc, signal.SIGTERM)
    if procs:
        threading.Thread(target=_finish, args=([p for _, p in procs],), daemon=True).start()
    return [k for k, _ in procs]


def kill_all(dask_worker: Any = None) -> list[str]:
    """Kill every program this worker runs and wait until they are gone (its cluster is
    closing: the programs, in process groups of their own, would otherwise outlive it);
    the keys killed. Run by ``client.run``, which passes the worker."""
    tasks = _tasks_of(dask_worker)
    with tasks.lock:
        keys = list(tasks.running)
        procs = [tasks.running[k] for k in keys]
    killed = kill_keys(keys, dask_worker)
    _finish(procs)
    return killed


def _finish(procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + KILL_GRACE
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, deadline - time.monotonic()))
        # The group, the program ended or not: a child that outlived the SIGTERM goes too.
        _signal(proc, signal.SIGKILL)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
