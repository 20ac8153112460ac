"""A streaming map submitted by `ganga script.py`, which exits at once, carried on by the
monitor daemon alone: its subjobs start while the upstream still runs, and the daemon
killed -9 mid-stream (at the worst moments too) and started again loses none and submits
none twice (counted in each subjob's event log)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon_stops import kill_daemon_at
from .test_cli import ganga
from .test_workflow_daemon import env as env  # the daemon's environment, a fixture
from .waiting import wait_for

PIECES = 4

STREAM = f"""\
import sys
gates = sys.argv[1]
def piece(i):
    wait = f"while ! test -e {{gates}}/gate-{{i}}; do sleep 0.05; done"
    return ["-c", f"{{wait}}; echo {{i}} > part-{{i}}.root"]
a = Job(name="sim", application=Executable(exe="/bin/sh"), outputfiles=[LocalFile("*.root")],
        splitter=ArgSplitter(args=[piece(i) for i in range({PIECES})]))
b = Job(name="reco", application=Executable(exe="/bin/sh", args=["-c", "cat $GANGA_INPUTDATA"]),
        inputdata=JobOutput(a, "*.root", each=True))
for j in (a, b):
    j.submit()
print(a.id, b.id)
"""


@pytest.fixture
def room(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """Room on the Local runner for every gated upstream subjob and the downstream's."""
    config = Path(env["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"c.Local.max_concurrent = {2 * PIECES}\n")
    yield env


def _subjobs(env: dict[str, str], job_id: int) -> dict[str, str]:
    """The subjobs job ``job_id`` has now (at most one per piece), by fqid."""
    listed = ganga(["jobs", "--json", *(f"{job_id}.{i}" for i in range(PIECES))], env)
    assert listed.returncode in (0, 3), listed.stderr  # 3: not all of them made yet
    return {row["fqid"]: row["status"] for row in json.loads(listed.stdout or "[]")}


def _status(env: dict[str, str], job_id: int) -> str:
    listed = ganga(["jobs", "--json"], env)
    return {int(r["fqid"]): r["status"] for r in json.loads(listed.stdout)}[job_id]


def _submits(env: dict[str, str], fqid: str) -> int:
    log = ganga(["log", fqid], env)
    assert log.returncode == 0, log.stderr
    return sum(1 for line in log.stdout.splitlines() if "-> submitting" in line)


def _submit_stream(env: dict[str, str], tmp_path: Path) -> tuple[int, int]:
    script = tmp_path / "stream.py"
    script.write_text(STREAM)
    done = ganga([str(script), str(tmp_path)], env)
    assert done.returncode == 0, done.stderr
    a, b = (int(word) for word in done.stdout.split())
    return a, b


def _open(tmp_path: Path, *pieces: int) -> None:
    for piece in pieces:
        (tmp_path / f"gate-{piece}").touch()


def _each_submitted_once(env: dict[str, str], b: int) -> None:
    fqids = sorted(_subjobs(env, b))
    assert len(fqids) == PIECES
    assert [_submits(env, fqid) for fqid in fqids] == [1] * PIECES


def test_a_script_submits_a_stream_and_exits_and_the_daemon_streams_it(
    room: dict[str, str], tmp_path: Path
) -> None:
    env = room
    a, b = _submit_stream(env, tmp_path)
    assert _status(env, b) == "waiting"
    assert ganga(["monitor", "start"], env).returncode == 0
    _open(tmp_path, 2)  # one upstream subjob ends; the others run on
    wait_for(lambda: _subjobs(env, b) == {f"{b}.0": "completed"}, 120, "the first piece")
    assert sorted(_subjobs(env, a).values()) == ["completed", "running", "running", "running"]
    assert _status(env, b) == "running"
    shown = ganga(["show", f"{b}.0"], env).stdout
    assert f"source='{a}.2'" in shown and f"/{a}/2/output/part-2.root" in shown
    _open(tmp_path, *range(PIECES))
    wait_for(lambda: _status(env, b) == "completed", 120, "the daemon to close the stream")
    _each_submitted_once(env, b)


@pytest.mark.parametrize("point", ["stream-subjobs-made", "stream-subjobs-submitted"])
def test_the_daemon_killed_while_streaming_and_started_again_submits_each_once(
    room: dict[str, str], tmp_path: Path, point: str
) -> None:
    env = room
    _a, b = _submit_stream(env, tmp_path)
    kill_daemon_at(env, tmp_path, point, lambda: _open(tmp_path, 0))
    _open(tmp_path, 1)  # ends with no daemon: noted by the next one
    assert ganga(["monitor", "start"], env).returncode == 0
    _open(tmp_path, *range(PIECES))
    wait_for(lambda: _status(env, b) == "completed", 120, "the new daemon to close the stream")
    _each_submitted_once(env, b)


def test_the_daemon_killed_mid_stream_and_started_again_loses_nothing(
    room: dict[str, str], tmp_path: Path
) -> None:
    env = room
    _a, b = _submit_stream(env, tmp_path)
    assert ganga(["monitor", "start"], env).returncode == 0
    _open(tmp_path, 0)
    wait_for(lambda: _subjobs(env, b).get(f"{b}.0") == "completed", 120, "the first piece")
    pid = int((Path(env["GANGA_DIR"]) / "monitor-daemon.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    _open(tmp_path, 1, 2)  # end while nobody watches
    wait_for(lambda: ganga(["monitor", "status"], env).stdout.count("not running"), 30, "exit")
    assert ganga(["monitor", "start"], env).returncode == 0
    _open(tmp_path, 3)
    wait_for(lambda: _status(env, b) == "completed", 120, "the new daemon to close the stream")
    _each_submitted_once(env, b)


# More pieces than the Local backend's first slice of a batch (its ``early_start_batch``),
# so that a pass hands its batch over in two calls, and a kill between them interrupts it
# mid-way.
BATCH = 66

BATCH_STREAM = f"""\
a = Job(name="sim", application=Executable(exe="/bin/sh"), outputfiles=[LocalFile("*.root")],
        splitter=ArgSplitter(args=[["-c", f"echo {{i}} > part.root"] for i in range({BATCH})]))
b = Job(name="reco", application=Executable(exe="/bin/sh", args=["-c", "cat $GANGA_INPUTDATA"]),
        inputdata=JobOutput(a, "*.root", each=True))
for j in (a, b):
    j.submit()
print(a.id, b.id)
"""

HISTORIES = """\
import sys
b = jobs(int(sys.argv[1]))
for sj in b.subjobs:
    causes = [e.cause for e in sj.history if e.new == "submitting"]
    print(sj.fqid, sj.status, sj.inputdata.source, len(causes), causes[0].split(":")[0])
"""


def test_a_batch_of_streamed_subjobs_interrupted_mid_hand_over_is_completed_once(
    room: dict[str, str], tmp_path: Path
) -> None:
    """The upstream ends while no monitor runs: the daemon's first pass makes every
    subjob in one batch, and is killed once the backend received the first slice of it.
    The next daemon records those as submitted and submits the rest: each once."""
    env = room
    script = tmp_path / "batch.py"
    script.write_text(BATCH_STREAM)
    done = ganga([str(script)], env)
    assert done.returncode == 0, done.stderr
    a, b = (int(word) for word in done.stdout.split())
    outputs = Path(env["GANGA_DIR"]) / "workspace" / str(a)
    wait_for(
        lambda: len(list(outputs.glob("*/output/part.root"))) == BATCH, 120, "a's subjobs to end"
    )
    kill_daemon_at(env, tmp_path, "handed-over#1")
    assert ganga(["monitor", "start"], env).returncode == 0
    wait_for(lambda: _status(env, b) == "completed", 180, "the new daemon to close the stream")
    histories = tmp_path / "histories.py"
    histories.write_text(HISTORIES)
    shown = ganga([str(histories), str(b)], env)
    assert shown.returncode == 0, shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines()]
    assert sorted(row[2] for row in rows) == sorted(f"{a}.{i}" for i in range(BATCH))
    assert {row[1] for row in rows} == {"completed"}
    assert {row[3] for row in rows} == {"1"}  # each submitted once
    causes = [row[4] for row in rows]
    # The first slice's were recorded from what the backend had; the rest submitted anew.
    assert causes.count("recovered") == 64 and causes.count("monitor") == BATCH - 64
