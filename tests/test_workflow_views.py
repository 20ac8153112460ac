"""What a waiting job waits for, as the jobs tables show it (``ganga jobs``, the shell's
``jobs``, a notebook's table) and as queries over ``after`` find it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from ganga_like import ArgSplitter, Executable, Job, jobs
from ganga_like.gpi.table_text import render_table
from ganga_like.query.query_errors import QuerySyntaxError
from ganga_like.runtime.search import parse_job_query
from ganga_like.runtime.session import Session

from .test_cli import ganga
from .test_notebook import html_of, kernel_env, run_notebook  # noqa: F401 (the fixture)
from .test_shell import Shell, shell_env  # noqa: F401 (the fixture)

# A job that never runs (never submitted), one waiting for it, one waiting for that one.
CHAIN = """\
a = Job(name="first")
b = Job(name="second", after=a)
c = Job(name="third", after=b, allow_failed=1)
b.submit(); c.submit()
print(a.id, b.id, c.id)
"""


def test_ganga_jobs_shows_what_each_job_waits_for_and_selects_by_it(
    env_for: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "chain.py"
    script.write_text(CHAIN)
    done = ganga([str(script)], env_for)
    assert done.returncode == 0, done.stderr
    a, b, c = (int(word) for word in done.stdout.split())

    table = ganga(["jobs"], env_for).stdout.splitlines()
    assert table[1].split(" | ")[-1].strip() == "after"
    rows = {int(line.split("|")[0]): line for line in table[3:]}
    assert rows[a].rstrip().endswith("|")  # waits for nothing: an empty cell
    assert rows[b].endswith(f"| waits for {a} (completed)")
    assert rows[c].endswith(f"| waits for {b} (completed, allow_failed=1)")

    listed = json.loads(ganga(["jobs", "--json"], env_for).stdout)
    assert [row["after"] for row in listed] == [
        "",
        f"waits for {a} (completed)",
        f"waits for {b} (completed, allow_failed=1)",
    ]
    chosen = json.loads(ganga(["jobs", f"after={a}", "--json"], env_for).stdout)
    assert [row["fqid"] for row in chosen] == [str(b)]
    both = json.loads(ganga(["jobs", f"after={a},{b}", "--json"], env_for).stdout)
    assert [row["fqid"] for row in both] == [str(b), str(c)]
    none = json.loads(ganga(["jobs", f"after<>{a}", "--json"], env_for).stdout)
    assert [row["fqid"] for row in none] == [str(a), str(c)]

    bad = ganga(["jobs", "after=first"], env_for)
    assert bad.returncode != 0 and bad.stdout == ""
    assert "after holds job ids such as 12 or 12.3, not 'first'" in bad.stderr


def test_a_table_of_jobs_waiting_for_nothing_has_no_after_column() -> None:
    row = {"fqid": "1", "status": "new", "after": ""}
    assert render_table([row], ["fqid", "status"]).splitlines()[1].split() == ["id", "|", "status"]


def test_after_is_queried_as_job_ids_written_as_text() -> None:
    (condition,) = parse_job_query("after=12.10").conditions
    assert condition.value == "12.10"  # subjob 10 of job 12, not the number 12.1
    assert parse_job_query(str(parse_job_query("after=12.10"))) == parse_job_query("after=12.10")
    with pytest.raises(
        QuerySyntaxError, match=re.escape("after holds job ids such as 12 or 12.3, not '1.2.3'")
    ):
        parse_job_query("after=1.2.3")
    assert parse_job_query("after~12.*").conditions[0].value == "12.*"  # a pattern as ever


def test_a_query_finds_what_waits_for_a_subjob_among_many(session: Session) -> None:
    a = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[[]] * 11))
    a.submit()
    on_ten = Job(after=a.subjobs[10])
    on_one = Job(after=a.subjobs[1])
    on_ten.submit()
    assert jobs.query(f"after={a.id}.10").ids() == [on_ten.id]  # new ones are found too
    assert jobs.query(f"after={a.id}.1").ids() == [on_one.id]
    assert jobs.query(f"after~{a.id}.*").ids() == [on_ten.id, on_one.id]
    assert a.wait(timeout=120) == "completed"


def test_the_shell_table_shows_what_a_job_waits_for(
    shell_env: dict[str, str],  # noqa: F811
) -> None:
    shell = Shell(shell_env)
    try:
        shell.run("a = Job(); b = Job(after=a); b.submit()")
        table = shell.run("jobs")
        head = next(line for line in table.splitlines() if "status" in line)
        assert head.split()[-1] == "after"
        assert "waits for 0 (completed)" in table
        assert "waits for" not in shell.run("jobs.select(status='new')")
    finally:
        shell.exit()


def test_the_notebook_table_shows_what_a_job_waits_for(
    kernel_env: Path,  # noqa: F811
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext ganga_like"),
        nbformat.v4.new_code_cell("a = Job(); b = Job(after=a); b.submit()"),
        nbformat.v4.new_code_cell("jobs"),
    ]
    run_notebook(nb, kernel_env)
    table = html_of(nb.cells[2].outputs[0])
    assert "<th" in table and ">after</th>" in table
    assert ">waits for 0 (completed)</td>" in table
