"""`ganga` subcommands run as real processes against a real repository."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def ganga(
    args: list[str], env: dict[str, str], stdin: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def populated(env_for: dict[str, str]) -> dict[str, str]:
    code = textwrap.dedent("""
        from ganga_like import *
        a = Job(name="scan-a", application=Executable(exe="echo", args=["hello"]))
        b = Job(name="scan-b", application=Executable(exe="false"))
        m = Job(name="split", application=Executable(exe="sh"),
                splitter=ArgSplitter(args=[["-c", "exit 1"]] * 3 + [["-c", "echo ok"]]))
        n = Job(name="fresh")
        for j in (a, b, m):
            j.submit()
        for j in (a, b, m):
            j.wait(timeout=60)
    """)
    # Filled alone (embedded): no repository server is left running for the commands.
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(env_for, GANGA_REPOSITORY_MODE="embedded"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return env_for


def test_jobs_table_query_and_json(populated: dict[str, str]) -> None:
    table = ganga(["jobs"], populated)
    assert table.returncode == 0, table.stderr
    assert "scan-a" in table.stdout and "4 (done:1 fail:3)" in table.stdout
    failed = ganga(["jobs", "status=failed", "--json"], populated)
    rows = json.loads(failed.stdout)
    assert [r["name"] for r in rows] == ["scan-b", "split"]
    assert rows[1]["counts"] == {"failed": 3, "completed": 1}


def test_show_and_log(populated: dict[str, str]) -> None:
    show = ganga(["show", "0"], populated)
    assert show.returncode == 0, show.stderr
    assert "Executable(exe='echo', args=['hello'], env={})" in show.stdout
    assert "hello" in show.stdout.splitlines()[-2:]
    log = ganga(["log", "2.0"], populated)
    assert [line.split()[2:5] for line in log.stdout.splitlines()] == [
        ["new", "->", "submitted"],
        ["submitted", "->", "running"],
        ["running", "->", "failed"],
    ]
    assert ganga(["show", "99"], populated).returncode == 3


def test_show_gives_a_resubmitted_masters_current_period_in_order(
    populated: dict[str, str],
) -> None:
    assert ganga(["resubmit", "2", "--yes"], populated).returncode == 0
    waited = subprocess.run(
        [sys.executable, "-c", "from ganga_like import *; print(jobs(2).wait(timeout=60))"],
        env=populated,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert waited.stdout.strip() == "failed", waited.stderr
    show = ganga(["show", "2"], populated)
    times = [line.split()[:3] for line in show.stdout.splitlines() if "time." in line]
    # The resubmission's period (the master's own log logs no "submitting" in it), not
    # the first period's submitting beside it; in order.
    labels = [t[0] for t in times]
    assert labels[0] == "time.new" and labels[-1] == "time.failed"
    assert "time.submitting" not in labels
    assert [t[1:] for t in times] == sorted(t[1:] for t in times)


def test_status_summary(populated: dict[str, str]) -> None:
    summary = ganga(["status", "--json"], populated)
    data = json.loads(summary.stdout)
    assert data["Local"]["counts"] == {"completed": 2, "failed": 4, "new": 1}


def test_bulk_actions_ask_first_and_the_monitor_follows(populated: dict[str, str]) -> None:
    declined = ganga(["resubmit", "status=failed"], populated, stdin="n\n")
    assert declined.returncode == 4 and "resubmit 2 job(s) (1, 2)?" in declined.stdout
    done = ganga(["resubmit", "status=failed", "--yes"], populated)
    assert done.returncode == 0, done.stderr
    assert "resubmit: 2 of 2 job(s) done" in done.stdout
    again = ganga(["log", "1"], populated)
    assert "user: resubmit" in again.stdout
    removed = ganga(["remove", "name=fresh"], populated, stdin="y\n")
    assert removed.returncode == 0
    assert "fresh" not in ganga(["jobs"], populated).stdout


def test_errors_have_exit_codes(populated: dict[str, str]) -> None:
    bad = ganga(["jobs", "status=>x"], populated)
    assert bad.returncode == 2 and "^" in bad.stderr
    none = ganga(["kill", "name=nothing", "--yes"], populated)
    assert none.returncode == 3 and "no job matches" in none.stderr
    usage = ganga(["show"], populated)
    assert usage.returncode == 2
    helped = ganga(["kill", "--help"], populated)
    assert helped.returncode == 0 and "exit codes" in helped.stdout


def test_export_and_import_round_trip(populated: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "job.json"
    assert ganga(["export", "2", str(target)], populated).returncode == 0
    document = json.loads(target.read_text())
    assert document["job"]["splitter"]["type"] == "ArgSplitter"
    assert document["job"]["application"] == {"type": "Executable", "exe": "sh"}
    imported = ganga(["import", str(target)], populated)
    assert imported.returncode == 0 and "imported as job 4" in imported.stdout
    assert "split" in ganga(["jobs", "id=4"], populated).stdout
    target.write_text(
        json.dumps(
            {"format": "ganga_like.job/1", "job": {"application": {"type": "Executable", "ex": 1}}}
        )
    )
    broken = ganga(["import", str(target)], populated)
    assert broken.returncode == 1
    assert "Executable has no settable attribute 'ex'" in broken.stderr


def test_read_commands_work_beside_an_embedded_session_that_refuses_writes(
    populated: dict[str, str],
) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ganga_like import *\nlen(jobs)\nimport time\n"
            "print('ready', flush=True)\ntime.sleep(30)\n",
        ],
        env=dict(populated, GANGA_REPOSITORY_MODE="embedded"),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        table = ganga(["jobs"], populated)
        assert table.returncode == 0 and "scan-a" in table.stdout
        refused = ganga(["kill", "status=running", "--yes"], populated)
        assert refused.returncode == 1 and "in use by PID" in refused.stderr
    finally:
        holder.kill()
        holder.wait()


def test_repository_check_and_monitor_status(populated: dict[str, str]) -> None:
    check = ganga(["repository", "check"], populated)
    assert check.returncode == 0 and "repository is sound" in check.stdout
    status = ganga(["monitor", "status"], populated)
    assert status.returncode == 0 and status.stdout.strip()
