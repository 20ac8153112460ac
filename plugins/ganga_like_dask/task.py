"""What runs on a Dask worker: one subjob's program, and the kill of running ones.

Only the standard library and ``distributed`` are used here, so that a worker needs nothing
of ``ganga_like`` but this module. Input files travel in the task's payload and the program's
stdout, stderr and output files travel back in its result: the workers need not share a
file system with the session.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "STARTED_ATTRIBUTE",
    "STARTED_TOPIC",
    "TASKS_ATTRIBUTE",
    "WorkerTasks",
    "claim_start",
    "kill_all",
    "kill_keys",
    "run",
]

# Where the scheduler keeps, per key, when its program started (``claim_start``): the poll
# reads it to tell a running subjob from one still queued on a worker, and a task sent
# again after its worker was lost finds it there and does not run its program twice.
STARTED_ATTRIBUTE = "_ganga_like_started"
# The scheduler event topic a task logs its start under when it could not claim it.
STARTED_TOPIC = "ganga_like-started"
# Longest wait for the scheduler to answer a claim.
CLAIM_TIMEOUT = 30.0
# SIGTERM first; what is still alive this many seconds later gets SIGKILL.
KILL_GRACE = 3.0

# Where a worker keeps its WorkerTasks (as the scheduler keeps the claims on itself).
TASKS_ATTRIBUTE = "_ganga_like_tasks"


class WorkerTasks:
    """Of one worker: key -> the running program, and the keys killed (so that one killed
    just before its program starts never starts it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.killed: set[str] = set()


def _tasks_of(worker: Any) -> WorkerTasks:
    """The worker's WorkerTasks, made on first use (``setdefault`` makes one even when
    two of its threads ask at once); a new one when not called on a worker (directly:
    nothing else can kill what it runs)."""
    if worker is None:
        try:
            from distributed import get_worker

            worker = get_worker()
        except (ImportError, ValueError):
            return WorkerTasks()
    tasks: WorkerTasks = vars(worker).setdefault(TASKS_ATTRIBUTE, WorkerTasks())
    return tasks


def _log_started(key: str, start: float) -> None:
    try:
        from distributed import get_worker

        get_worker().log_event(STARTED_TOPIC, {"key": key, "time": start})
    except (ImportError, ValueError):  # not on a worker (called directly)
        pass


def claim_start(key: str, start: float, dask_scheduler: Any = None) -> float | None:
    """Run in the scheduler: note that the program of ``key`` starts at ``start``; when it
    had started before, that earlier time instead (and nothing is noted)."""
    started: dict[str, float] | None = getattr(dask_scheduler, STARTED_ATTRIBUTE, None)
    if started is None:
        started = {}
        setattr(dask_scheduler, STARTED_ATTRIBUTE, started)
    earlier = started.get(key)
    if earlier is None:
        started[key] = start
    return earlier


def _claim(key: str, start: float) -> float | None:
    """The time an earlier run of ``key`` started, if there was one (its worker was lost
    and the scheduler sent the task again); None: this is its first run."""
    try:
        from distributed import get_client, get_worker

        get_worker()
    except (ImportError, ValueError):  # not on a worker (called directly)
        return None
    try:
        client = get_client()
        earlier: float | None = client.sync(  # type: ignore[no-untyped-call]
            client._run_on_scheduler, claim_start, key, start, callback_timeout=CLAIM_TIMEOUT
        )
    except Exception:  # the scheduler did not answer: run, and say when it started
        _log_started(key, start)
        return None
    return earlier


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
    earlier = _claim(key, time.time())
    if earlier is not None:
        return _not_again(result, earlier)
    work = tempfile.mkdtemp(prefix="ganga_like-")
    try:
        for name, data in payload["inputs"]:
            with open(os.path.join(work, name), "wb") as handle:
                handle.write(data)
        env = _environment(payload)
        out_path = os.path.join(work, ".ganga_like.stdout")
        err_path = os.path.join(work, ".ganga_like.stderr")
        tasks = _tasks_of(None)
        with open(out_path, "wb") as out, open(err_path, "wb") as err, tasks.lock:
            if key in tasks.killed:
                result["state"] = "killed"
                return result
            try:
                # Its own process group, so a kill reaches the program's children too.
                proc = subprocess.Popen(
                    payload["argv"],
                    cwd=work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    preexec_fn=_ends_with_its_worker(),
                )
            except FileNotFoundError:
                result["reason"] = f"program not found: {payload['argv'][0]}"
                return result
            except PermissionError:
                result["reason"] = f"program is not executable: {payload['argv'][0]}"
                return result
            tasks.running[key] = proc
        result["start"] = time.time()
        watchdog = _watch(proc)
        try:
            code, result["usage"] = _reap(proc)
        finally:
            _stop(watchdog)
        result["end"] = time.time()
        with tasks.lock:
            tasks.running.pop(key, None)
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


# prctl(2): the signal a process gets when the thread that started it dies.
PR_SET_PDEATHSIG = 1


def _ends_with_its_worker() -> Callable[[], None] | None:
    """What the program's process does before it starts (Linux): ask for SIGKILL when the
    worker thread that started it, and waits for it, dies. Killed with its worker (or its
    whole cluster), a program in a process group of its own would otherwise run on unseen,
    beside a second attempt of its subjob; its children are the watchdog's (``_watch``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    worker = os.getpid()

    def arrange() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != worker:  # the worker died before the request was in place
            os._exit(137)

    return arrange


# Beside the program: kills its process group when the worker dies (see that file).
WATCHDOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog.py")


def _watch(proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes] | None:
    """Start the program's watchdog: the program's own death signal ends only the program,
    and a worker killed with SIGKILL (or with its whole cluster) can kill nothing, so the
    program's children would outlive it. None where it cannot start (the program runs
    on, as without it)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", WATCHDOG, str(os.getpid()), str(proc.pid)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # out of the program's group, which a kill signals
        )
    except OSError:
        return None


def _stop(watchdog: subprocess.Popen[bytes] | None) -> None:
    if watchdog is not None:
        watchdog.kill()
        watchdog.wait()


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
