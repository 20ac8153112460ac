"""`ganga` subcommands, as real processes, act on exactly the jobs they name, and answer
bad input with one line and the documented exit status."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .test_commands import ganga


def make_jobs(env: dict[str, str], code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from ganga_like import *\n" + textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def ids(env: dict[str, str], *query: str) -> list[int]:
    listed = ganga(["jobs", *query, "--json"], env)
    assert listed.returncode in (0, 3), listed.stderr
    return [row["id"] for row in json.loads(listed.stdout)]


def info(env: dict[str, str]) -> dict[int, tuple[str, int]]:
    """Job id -> (status, times submitted), read by a separate process."""
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ganga_like import *\nimport json\n"
            "print(json.dumps({j.id: [j.status, j.info['submit_count']] for j in jobs}))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    return {int(k): (v[0], v[1]) for k, v in json.loads(listed.stdout).items()}


@pytest.fixture
def twelve(env_for: dict[str, str]) -> dict[str, str]:
    make_jobs(env_for, "for i in range(12):\n    Job(name=f'j{i}')\n")
    return env_for


@pytest.fixture
def runner_stopped(gangadir: Path) -> Iterator[None]:
    yield
    runner_client.stop(runner_dir(gangadir))


def test_removing_an_id_list_removes_exactly_those_jobs(twelve: dict[str, str]) -> None:
    removed = ganga(["remove", "--yes", "id=1,3"], twelve)
    assert removed.returncode == 0, removed.stderr
    assert "remove: 2 of 2 job(s) done" in removed.stdout
    assert ids(twelve) == [0, 2, *range(4, 12)]
    assert ganga(["remove", "--yes", "5", "7.0"], twelve).returncode == 3  # 7 has no subjobs
    assert ids(twelve) == [0, 2, *range(4, 12)]  # nothing done when an id is missing
    assert ganga(["remove", "--yes", "5", "7"], twelve).returncode == 0
    assert ganga(["remove", "--yes", "id=8,10..11"], twelve).returncode == 0
    assert ids(twelve) == [0, 2, 4, 6, 9]


def test_a_query_selecting_every_job_needs_all(twelve: dict[str, str]) -> None:
    refused = ganga(["remove", "--yes", "name~j*"], twelve)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "ganga: 'name~j*' selects every job in the repository (12: 0, 1, 2, 3, 4, 5, 6, 7, "
        "8, 9, ... (2 more)); add --all to remove them all"
    ]
    assert ganga(["remove", "--yes"], twelve).returncode == 2
    assert ids(twelve) == list(range(12))
    asked = ganga(["remove", "id<=10"], twelve, stdin="n\n")
    assert asked.returncode == 4
    assert "remove 11 job(s) (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (1 more))? [y/N]" in asked.stdout
    assert ganga(["remove", "--yes", "--all", "name~j*"], twelve).returncode == 0
    assert ids(twelve) == []
    make_jobs(twelve, "Job(name='a'); Job(name='b')\n")
    assert ganga(["remove", "--all"], twelve, stdin="y\n").returncode == 0
    assert ids(twelve) == []


def test_kill_and_resubmit_touch_only_the_jobs_named(
    env_for: dict[str, str], runner_stopped: None
) -> None:
    make_jobs(
        env_for,
        """
        config.Local.max_concurrent = 4  # all three sleeps at once, whatever the cores
        quick = [Job(name=f"quick{i}", application=Executable(exe="false")) for i in range(3)]
        slow = [Job(name=f"slow{i}", application=Executable(exe="sleep", args=["60"]))
                for i in range(3)]
        for j in quick + slow:
            j.submit()
        for j in quick:
            j.wait(timeout=60)
        for j in slow:
            j.wait(timeout=60, until="running")
    """,
    )
    before = info(env_for)
    assert [before[i][0] for i in range(6)] == ["failed"] * 3 + ["running"] * 3
    killed = ganga(["kill", "--yes", "id=3,5"], env_for)
    assert killed.returncode == 0, killed.stderr
    resubmitted = ganga(["resubmit", "--yes", "1"], env_for)
    assert resubmitted.returncode == 0, resubmitted.stderr
    after = info(env_for)
    assert [after[i][0] for i in (3, 4, 5)] == ["killed", "running", "killed"]
    assert [after[i][1] for i in range(6)] == [1, 2, 1, 1, 1, 1]
    assert ganga(["kill", "--yes", "4"], env_for).returncode == 0
    assert info(env_for)[4][0] == "killed"
    again = ganga(["kill", "--yes", "4"], env_for)
    assert again.returncode == 1
    assert again.stderr == "ganga: job 4 is killed: nothing to kill\n"


def test_each_exit_status_of_the_table(twelve: dict[str, str]) -> None:
    assert ganga(["jobs"], twelve).returncode == 0
    assert ganga(["jobs", "3"], twelve).returncode == 0
    nothing_to_kill = ganga(["kill", "--yes", "0"], twelve)  # a new job
    assert nothing_to_kill.returncode == 1
    assert nothing_to_kill.stderr == "ganga: job 0 is new: nothing to kill\n"
    for usage in (
        ["jobs", "status=>x"],
        ["jobs", "id > 1e3"],
        ["jobs", "subjobs.nwe>0"],
        ["jobs", "stauts=new"],
        ["show", "abc"],
        ["show"],
        ["kill", "--yes"],
        ["kill", "--nope", "1"],
        ["jbos"],
    ):
        bad = ganga(usage, twelve)
        assert bad.returncode == 2, (usage, bad.stderr)
        assert "Traceback" not in bad.stderr and "ganga" in bad.stderr, usage
    for nothing in (
        ["jobs", "name=nobody"],
        ["jobs", "99"],
        ["show", "99"],
        ["kill", "--yes", "99"],
        ["remove", "--yes", "name=nobody"],
    ):
        assert ganga(nothing, twelve).returncode == 3, nothing
    assert ganga(["remove", "0"], twelve, stdin="n\n").returncode == 4


def test_a_huge_id_is_one_line_not_a_traceback(twelve: dict[str, str]) -> None:
    huge = ganga(["jobs", "id > 99999999999999999999"], twelve)
    assert huge.returncode == 3
    assert huge.stderr == "ganga: no job matches 'id > 99999999999999999999'\n"
    assert huge.stdout == ""  # the one line alone, no empty table
    missing = ganga(["jobs", "99"], twelve)
    assert (missing.returncode, missing.stdout, missing.stderr) == (3, "", "ganga: no job 99\n")
    assert ganga(["jobs", "99", "--json"], twelve).stdout == "[]\n"
    partly = ganga(["jobs", "3", "99", "3.1"], twelve)
    assert partly.returncode == 3  # not "done": two of the jobs named are not there
    assert partly.stderr.splitlines() == ["ganga: no job 99", "ganga: no job 3.1"]
    assert [line.split(" ")[0] for line in partly.stdout.splitlines()[3:]] == ["3"]
    assert ids(twelve, "id < 99999999999999999999; id>=10") == [10, 11]
    assert ganga(["show", "99999999999999999999"], twelve).returncode == 3


def test_a_closed_output_pipe_ends_quietly(twelve: dict[str, str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ganga_like.cli", "jobs"],
        env=twelve,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nobody reads: as `ganga jobs | head -1` once head has exited
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert stderr == b""
    head = subprocess.run(
        f"{sys.executable} -m ganga_like.cli jobs | head -1",
        shell=True,
        env=twelve,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert head.stdout == "jobs: 12\n" and head.stderr == ""


def test_help_lists_the_subcommands_and_a_typo_gets_a_hint(env_for: dict[str, str]) -> None:
    helped = ganga(["--help"], env_for)
    assert helped.returncode == 0
    for name in (
        "jobs",
        "show",
        "log",
        "status",
        "kill",
        "resubmit",
        "remove",
        "export",
        "import",
        "monitor",
        "repository",
    ):
        assert f"  ganga {name} " in helped.stdout
    typo = ganga(["jbos"], env_for)
    assert typo.returncode == 2
    assert typo.stderr == (
        "ganga: no subcommand 'jbos'; did you mean `jobs`? (ganga --help lists them)\n"
    )
    unknown = ganga(["frobnicate"], env_for)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1


def test_show_shortens_long_values_and_full_shows_them(env_for: dict[str, str]) -> None:
    make_jobs(
        env_for,
        """
        Job(name="n" * 5000, application=Executable(exe="echo"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(20000)]))
    """,
    )
    shown = ganga(["show", "0"], env_for)
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout) < 3000
    assert max(len(line) for line in shown.stdout.splitlines()) < 330
    assert "ganga show 0 --full shows them whole" in shown.stdout
    splitter = next(line for line in shown.stdout.splitlines() if "splitter" in line)
    assert splitter.endswith("…") and "ArgSplitter(args=[['0'], ['1']" in splitter
    full = ganga(["show", "0", "--full"], env_for)
    assert len(full.stdout) > 200_000 and "['19999']" in full.stdout
    assert "--full shows" not in full.stdout


def test_an_odd_name_keeps_one_row_per_job(env_for: dict[str, str]) -> None:
    make_jobs(
        env_for,
        """
        Job(name="first line\\nsecond line\\r\\tthird")
        Job(name="x" * 5000)
        Job(name="plain")
    """,
    )
    for listing in (
        ganga(["jobs"], env_for).stdout,
        subprocess.run(
            [sys.executable, "-c", "from ganga_like import *\nprint(jobs)"],
            env=env_for,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout,
    ):
        lines = listing.splitlines()
        assert len(lines) == 3 + 3, listing
        assert max(len(line) for line in lines) < 120
        assert "first line⏎second line  third" in lines[3]
        assert "xxxxx…" in lines[4] and "plain" in lines[5]


def test_removing_a_subjob_says_nothing_was_removed_and_fails(env_for: dict[str, str]) -> None:
    make_jobs(
        env_for,
        """
        j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"]]))
        j.submit()
        j.wait(timeout=120)
        Job(name="plain")
    """,
    )
    alone = ganga(["remove", "--yes", "0.1"], env_for)
    assert alone.returncode == 1
    assert alone.stderr == (
        "ganga: subjob 0.1 cannot be removed on its own (nothing removed); remove its "
        "master with: ganga remove 0\n"
    )
    assert alone.stdout == "remove: 0 of 1 job(s) done\n"
    with_another = ganga(["remove", "--yes", "0.1", "1"], env_for)
    assert with_another.returncode == 1
    assert with_another.stdout == "remove: 1 of 2 job(s) done\n"
    assert ids(env_for) == [0]
    assert info(env_for)[0] == ("completed", 1)


def test_a_status_in_a_query_is_a_word_of_any_case_as_in_select(
    twelve: dict[str, str],
) -> None:
    every = list(range(12))
    assert ids(twelve, "status=New") == ids(twelve, "status=NEW,failed") == every
    assert ids(twelve, "status<>New") == []
    make_jobs(
        twelve, "assert len(jobs.select(status='New')) == len(jobs.query('status=New')) == 12\n"
    )


def test_a_query_naming_an_unknown_status_says_so_with_a_suggestion(
    twelve: dict[str, str],
) -> None:
    for query, word, suggestion in (
        ("status=complete", "complete", "completed"),
        ("status<>runing", "runing", "running"),
        ("status=new,FAILD", "FAILD", "failed"),
    ):
        listed = ganga(["jobs", query], twelve)
        assert listed.returncode == 2, listed
        first = listed.stderr.splitlines()[0]
        assert first == f"ganga: unknown status '{word}'; did you mean '{suggestion}'?", first
        refused = ganga(["remove", "--yes", query], twelve)
        assert refused.returncode == 2
    assert len(ids(twelve)) == 12
    assert ids(twelve, "status=new,failed") == list(range(12))
