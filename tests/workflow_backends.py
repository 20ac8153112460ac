"""Workflows (a streaming map, a callback, an Iterate) on a backend other than Local,
submitted by `ganga script.py`, which exits at once, and driven by the monitor daemon
alone: what the Slurm and Dask tests of workflows share."""

from __future__ import annotations

import json
from pathlib import Path

from .test_cli import ganga
from .test_iterate import FITLIB
from .test_job_callbacks_daemon import FUNCTIONS, callback_lines
from .test_workflow_daemon import statuses, submits
from .waiting import wait_for

# The module the daemon imports for the callback and the Iterate's test.
MODULE = "wfmods"
MODULE_TEXT = FUNCTIONS + FITLIB

PIECES = 3


def stream_script(backend: str) -> str:
    """``PIECES`` upstream subjobs each writing a file, and a streaming map over them."""
    return f"""\
a = Job(name="sim", application=Executable(exe="/bin/sh"), outputfiles=[LocalFile("*.root")],
        splitter=ArgSplitter(args=[["-c", f"echo {{i}} > part.root"] for i in range({PIECES})]),
        backend={backend})
b = Job(name="reco", application=Executable(exe="/bin/sh", args=["-c", "cat $GANGA_INPUTDATA"]),
        inputdata=JobOutput(a, "*.root", each=True), backend={backend})
for j in (a, b):
    j.submit()
print(a.id, b.id)
"""


def callback_script(backend: str) -> str:
    return f"""\
j = Job(application=Executable(exe="/bin/true"), backend={backend})
j.on("completed", "{MODULE}:mark")
j.submit()
print(j.id)
"""


def iterate_script(backend: str) -> str:
    count = "n=$(cat n.txt 2>/dev/null || echo 0); echo $((n+1)) > n.txt"
    return f"""\
fit = Job(name="fit", application=Executable(exe="sh", args=["-c", {count!r}]),
          outputfiles=[LocalFile("n.txt")], backend={backend})
fit = Iterate(fit, until="{MODULE}:converged", max_iterations=10)
fit.submit()
print(fit.id)
"""


def submitted(env: dict[str, str], tmp_path: Path, text: str, args: list[str]) -> list[int]:
    """Run ``text`` as a script of ``ganga args``; the ids it prints."""
    script = tmp_path / "workflow.py"
    script.write_text(text)
    done = ganga([*args, str(script)], env, timeout=180)
    assert done.returncode == 0, done.stderr
    return [int(word) for word in done.stdout.split()]


def start_daemon(env: dict[str, str], args: list[str]) -> None:
    started = ganga([*args, "monitor", "start"], env)
    assert started.returncode == 0, started.stderr


def check_stream(env: dict[str, str], a: int, b: int, patience: float) -> None:
    """The daemon closes the stream: one subjob per upstream subjob, each submitted once
    and naming the subjob and file it read."""
    wait_for(lambda: statuses(env)[b] == "completed", patience, "the daemon to end the stream")
    assert statuses(env) == {a: "completed", b: "completed"}
    fqids = [f"{b}.{i}" for i in range(PIECES)]
    listed = ganga(["jobs", "--json", *fqids], env)
    assert listed.returncode == 0, listed.stderr
    assert {row["status"] for row in json.loads(listed.stdout)} == {"completed"}
    sources = []
    for fqid in fqids:
        shown = ganga(["show", fqid], env).stdout
        source = shown.split("source='", 1)[1].split("'", 1)[0]
        assert f"/{source.replace('.', '/')}/output/part.root" in shown
        sources.append(source)
        log = ganga(["log", fqid], env).stdout
        assert log.count("-> submitting") == 1
    assert sorted(sources) == [f"{a}.{i}" for i in range(PIECES)]


def check_callback(env: dict[str, str], tmp_path: Path, job_id: int, patience: float) -> None:
    done = f"on completed: {MODULE}:mark: done"
    wait_for(lambda: done in callback_lines(env, job_id), patience, "the daemon to call it")
    assert callback_lines(env, job_id) == [f"on completed: {MODULE}:mark: calling", done]
    assert (tmp_path / "marks").read_text() == f"{job_id} completed\n"


def check_iterate(env: dict[str, str], fit: int, patience: float) -> None:
    """Three iterations (the count reaches 3), each submitted once, and no more."""
    wait_for(lambda: statuses(env)[fit] == "completed", patience, "the Iterate to converge")
    shown = statuses(env)
    assert len(shown) == 3 and set(shown.values()) == {"completed"}
    assert [submits(env, job_id) for job_id in sorted(shown)] == [1, 1, 1]
