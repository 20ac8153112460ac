"""The runner kills every task of a master by the prefix of their keys, and records the
queued ones it kills in one record per batch, from which a restarted runner concludes
them instead of running them."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from ganga_like_runner.client import kill, kills_by_prefix, runner_pid, submit
from ganga_like_runner.protocol import FEATURES_NAME, KILL_BY_PREFIX, event_line

from .test_local_runner import (
    BASE_ENV,
    Journal,
    is_gone,
    journal,  # noqa: F401 (fixture)
    kill_groups,
    make_task,
    out,
    paused_runner,
    runner_dir,  # noqa: F401 (fixture)
    sh,
    start_pid,
    wait_until,
)


def test_a_prefix_kills_every_task_of_a_master_and_no_other(
    tmp_path: Path,
    runner_dir: Path,  # noqa: F811
    journal: Journal,  # noqa: F811
) -> None:
    release = tmp_path / "release"
    wait = sh(f"while [ ! -e {release} ]; do sleep 0.01; done")
    tasks = [make_task(tmp_path, "7.0@1", ["sleep", "100"], journal)]
    tasks += [make_task(tmp_path, f"7.{i}@1", ["/bin/echo", "ran"], journal) for i in (1, 2, 3)]
    others = [make_task(tmp_path, key, wait, journal) for key in ("7@1", "70.1@1")]
    submit(runner_dir, [*tasks, *others], BASE_ENV, max_concurrent=1)
    journal.wait(["7.0@1"], event="started")
    running = start_pid(tmp_path, "7.0@1")
    try:
        kill(runner_dir, ["7."])
        final = journal.wait([task.key for task in tasks])
        assert {final[task.key].event for task in tasks} == {"killed"}
        assert {final[task.key].reason for task in tasks} == {"killed by user"}
        wait_until(lambda: is_gone(running), 10.0)
        release.touch()
        ended = journal.wait(["7@1", "70.1@1"])
        assert ended["7@1"].event == ended["70.1@1"].event == "completed"
        assert not any((out(tmp_path, f"7.{i}@1") / "stdout").exists() for i in (1, 2, 3))
    except BaseException:
        kill_groups([running])
        raise


def test_a_restarted_runner_concludes_queued_tasks_its_batch_record_says_were_killed(
    tmp_path: Path,
    runner_dir: Path,  # noqa: F811
    journal: Journal,  # noqa: F811
) -> None:
    keys = ["killed-unlogged", "killed-logged", "fresh"]
    tasks = [make_task(tmp_path, key, ["/bin/echo", key], journal) for key in keys]
    # The batch accepted, two of its tasks killed while queued and the record of that
    # written, one journal line of the two written: then the runner dies.
    with paused_runner(tmp_path, runner_dir) as paused:
        submit(runner_dir, tasks, BASE_ENV, 2)
        (batch_file,) = (runner_dir / "queue").iterdir()
        (runner_dir / "accepted").mkdir(exist_ok=True)
        accepted = runner_dir / "accepted" / batch_file.name
        batch_file.rename(accepted)
        kills = [{"end": 4.0, "reason": "killed by user", "keys": keys[:2]}]
        Path(f"{accepted}.killed").write_text(json.dumps({"kills": kills}))
        os.kill(paused, signal.SIGKILL)
        wait_until(lambda: is_gone(paused), 5.0)
    journal.path.parent.mkdir()
    journal.path.write_bytes(event_line("killed-logged", "killed", 4.0, None, "killed by user"))
    submit(runner_dir, [make_task(tmp_path, "trigger", ["true"], journal)], BASE_ENV, 2)
    final = journal.wait([*keys, "trigger"])
    assert runner_pid(runner_dir) is not None
    for key in keys[:2]:
        assert journal.of(key) == ["killed"]  # once, never run
        assert final[key].time == 4.0 and final[key].reason == "killed by user"
        assert not (out(tmp_path, key) / "stdout").exists()
    assert final["fresh"].event == "completed"
    wait_until(lambda: not os.listdir(runner_dir / "accepted"), 5.0)  # the record went too


def test_a_kill_names_each_task_to_a_runner_that_has_not_said_it_kills_by_prefix(
    tmp_path: Path,
    runner_dir: Path,  # noqa: F811
    journal: Journal,  # noqa: F811
) -> None:
    assert kills_by_prefix(runner_dir)  # none alive: the one a request starts does
    submit(runner_dir, [make_task(tmp_path, "7.0@1", ["sleep", "100"], journal)], BASE_ENV, 1)
    journal.wait(["7.0@1"], event="started")
    running = start_pid(tmp_path, "7.0@1")
    try:
        assert kills_by_prefix(runner_dir)
        # What a runner started by an earlier version leaves: no word of it (a file of
        # another runner's at most).
        (runner_dir / FEATURES_NAME).write_text(f"1 {KILL_BY_PREFIX}\n")
        assert not kills_by_prefix(runner_dir)
        (runner_dir / FEATURES_NAME).unlink()
        assert not kills_by_prefix(runner_dir)
    finally:
        kill_groups([running])
