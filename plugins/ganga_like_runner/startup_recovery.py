"""Start-up recovery of a Local runner: finish what a previous runner accepted.

A batch is moved to ``accepted/`` when read and deleted once all its tasks have ended and
their final events are written.  On start-up a runner goes through ``accepted/`` and reads
each task's ``__run__`` record: a final record of that batch means done (its final event is
appended if the journal lacks it), a start record of that batch means interrupted (reported
failed, its process group killed), and an empty or missing record means never started
(queued again).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from ganga_like_runner import batch_kills
from ganga_like_runner.protocol import (
    RUN_FILE,
    TAKEN_OVER_NAME,
    TERMINAL_EVENTS,
    read_events,
    valid_usage,
)
from ganga_like_runner.spawn import signal_group
from ganga_like_runner.task_engine import KILL_GRACE_SECONDS, Engine
from ganga_like_runner.task_files import read_json
from ganga_like_runner.tasks import Task, check_batch, newer

# A process counts as part of an orphaned task only if it started after the task did,
# give or take this much (clock ticks and boot time are coarse).
ORPHAN_START_SLACK_SECONDS = 2.0

JournalCache = dict[str, set[tuple[str, str, float]]]


def recover(runner: Engine) -> None:
    """Resume the batches a previous runner accepted but did not finish."""
    try:
        names = sorted(
            n for n in os.listdir(runner.accepted_dir) if n.endswith(".json") and n[0] != "."
        )
    except FileNotFoundError:
        return
    journal_cache: JournalCache = {}
    groups: dict[int, list[float]] | None = None
    # Taken over from a runner of another host: its tasks' pids are that host's, and no
    # process group here can be one of them.
    elsewhere = read_taken_over(runner.dir)
    if elsewhere:
        groups = {}
    for name in names:
        path = runner.accepted_dir / name
        try:
            data = json.loads(path.read_bytes())
            check_batch(data)
        except (OSError, ValueError) as exc:
            runner.reject(path, exc)
            continue
        tasks = runner.add_batch(data, path, recovering=True)
        killed = batch_kills.killed_in(path)
        for task in tasks:
            record = read_json(os.path.join(task.output_dir, RUN_FILE))
            batch_id = task.batch.id
            if record.get("batch") != batch_id and task.key in killed:
                record = {**killed[task.key], "batch": batch_id}  # killed while queued
            if record.get("batch") == batch_id and "state" in record:
                replay_final_event(runner, task, record, journal_cache)
                runner.retire(task)
            elif record.get("batch") == batch_id:
                if groups is None:
                    groups = process_groups()
                fail_interrupted(runner, task, record, groups, elsewhere)
            elif newer(record, batch_id):
                runner.retire(task)  # a later resubmission of the key took over
            else:
                runner.pending.append(task)
                runner.active.setdefault(task.key, []).append(task)
    if runner.pending or names:
        runner.log(f"recovered {len(names)} batch(es), {len(runner.pending)} task(s) queued")
    if elsewhere:
        (runner.dir / TAKEN_OVER_NAME).unlink(missing_ok=True)


def read_taken_over(runner_dir: Path) -> str:
    """The host named by ``taken-over`` (see ``protocol``), or ""."""
    try:
        return (runner_dir / TAKEN_OVER_NAME).read_text().strip()
    except OSError:
        return ""


def replay_final_event(
    runner: Engine, task: Task, record: dict[str, Any], cache: JournalCache
) -> None:
    """Append the final event of a finished task if the crash came before it."""
    seen = cache.get(task.events)
    if seen is None:
        events, _ = read_events(Path(task.events), 0)
        seen = {(e.key, e.event, e.time) for e in events if e.event in TERMINAL_EVENTS}
        cache[task.events] = seen
    state, end = record.get("state"), record.get("end")
    if not isinstance(state, str) or not isinstance(end, int | float):
        return
    if (task.key, state, end) not in seen:
        start = record.get("start")
        usage = record.get("usage")
        runner.emit(
            task,
            state,
            float(end),
            record.get("exit_code"),
            record.get("reason"),
            float(start) if isinstance(start, int | float) else None,
            usage if valid_usage(usage) else None,
        )


def fail_interrupted(
    runner: Engine,
    task: Task,
    record: dict[str, Any],
    groups: dict[int, list[float]],
    elsewhere: str = "",
) -> None:
    """A task that was running when the previous runner died: kill it (on this host),
    report it."""
    pid = record.get("pid")
    started = record.get("time")
    task.start = float(started) if isinstance(started, int | float) else None
    if isinstance(pid, int) and task.start is not None:
        members = groups.get(pid, [])
        # Only a group whose processes all started after the task is the task's;
        # anything else is a reused pid.
        if members and min(members) >= task.start - ORPHAN_START_SLACK_SECONDS:
            signal_group(pid, signal.SIGTERM)
            runner.kill_deadlines[pid] = time.monotonic() + KILL_GRACE_SECONDS
    shown = pid if isinstance(pid, int) else "unknown"
    on = f" on host {elsewhere}" if elsewhere else ""
    reason = f"the runner died{on} while it ran (pid {shown})"
    runner.finish(task, "failed", None, reason)


def process_groups() -> dict[int, list[float]]:
    """Live processes by process group, as unix start times (from /proc)."""
    groups: dict[int, list[float]] = {}
    try:
        boot = boot_time()
        ticks = os.sysconf("SC_CLK_TCK")
        entries = os.listdir("/proc")
    except (OSError, ValueError):
        return groups
    for entry in entries:
        if entry.isdigit():
            info = proc_stat(entry)
            if info is not None and info[0] not in "ZX":
                groups.setdefault(info[1], []).append(boot + info[2] / ticks)
    return groups


def proc_stat(pid: str) -> tuple[str, int, int] | None:
    """State, process group and start time in clock ticks of a process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def boot_time() -> float:
    with open("/proc/stat", "rb") as handle:
        for line in handle:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")
