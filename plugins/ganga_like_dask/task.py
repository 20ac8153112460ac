"""What runs on a Dask worker: one subjob's program, and the kill of running ones.

Only the standard library and ``distributed`` are used here, so that a worker needs nothing
of ``ganga_like`` but this module. Input files travel in the task's payload and the program's
stdout, stderr and output files travel back in its result: the workers need not share a
file system with the session.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any

__all__ = ["STARTED_TOPIC", "kill_all", "kill_keys", "run"]

# The scheduler event topic a task logs its start under (the poll reads it to tell a
# running subjob from one still queued on a worker).
STARTED_TOPIC = "ganga_like-started"
# SIGTERM first; what is still alive this many seconds later gets SIGKILL.
KILL_GRACE = 3.0

# key -> the running program, and the keys killed (so that one killed just before its
# program starts never starts it). One of each per worker process.
_lock = threading.Lock()
_running: dict[str, subprocess.Popen[bytes]] = {}
_killed: set[str] = set()


def _log_started(key: str, start: float) -> None:
    try:
        from distributed import get_worker

        get_worker().log_event(STARTED_TOPIC, {"key": key, "time": start})
    except (ImportError, ValueError):  # not on a worker (called directly)
        pass


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one subjob in a fresh work directory; its outcome, files included."""
    key: str = payload["key"]
    work = tempfile.mkdtemp(prefix="ganga_like-")
    result: dict[str, Any] = {
        "state": "failed",
        "exit_code": None,
        "start": None,
        "end": None,
        "reason": "",
        "stdout": b"",
        "stderr": b"",
        "outputs": {},
    }
    try:
        for name, data in payload["inputs"]:
            with open(os.path.join(work, name), "wb") as handle:
                handle.write(data)
        env = {**os.environ, **payload["env"]}
        out_path = os.path.join(work, ".ganga_like.stdout")
        err_path = os.path.join(work, ".ganga_like.stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err, _lock:
            if key in _killed:
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
                )
            except FileNotFoundError:
                result["reason"] = f"program not found: {payload['argv'][0]}"
                return result
            except PermissionError:
                result["reason"] = f"program is not executable: {payload['argv'][0]}"
                return result
            _running[key] = proc
        result["start"] = time.time()
        _log_started(key, result["start"])
        code = proc.wait()
        result["end"] = time.time()
        with _lock:
            _running.pop(key, None)
            killed = key in _killed
        result["exit_code"] = code
        result["stdout"] = _read(out_path)
        result["stderr"] = _read(err_path)
        if killed:
            result["state"] = "killed"
        elif code != 0:
            result["reason"] = f"exit code {code}"
        else:
            problem = _collect(work, payload["output_patterns"], result["outputs"])
            result["state"] = "failed" if problem else "completed"
            result["reason"] = problem or ""
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


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


def kill_keys(keys: list[str]) -> list[str]:
    """Kill the programs of ``keys`` running in this worker process (SIGTERM to the
    process group, SIGKILL after a grace); the keys it found running."""
    with _lock:
        _killed.update(keys)
        procs = [(k, _running[k]) for k in keys if k in _running]
    for _key, proc in procs:
        _signal(proc, signal.SIGTERM)
    if procs:
        threading.Thread(target=_finish, args=([p for _, p in procs],), daemon=True).start()
    return [k for k, _ in procs]


def kill_all() -> list[str]:
    """Kill every program this worker process runs (its cluster is closing: the programs,
    in process groups of their own, would otherwise outlive it); the keys killed."""
    with _lock:
        keys = list(_running)
    return kill_keys(keys)


def _finish(procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + KILL_GRACE
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
