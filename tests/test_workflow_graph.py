"""``j.graph()``: the jobs linked by what waits for what (masters only), as text in a
script, coloured in the real shell, and as an SVG (drawn offline) in a real notebook."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.runtime.session import Session

from .test_notebook import html_of, kernel_env, run_notebook  # noqa: F401 (the fixture)
from .test_shell import Shell, shell_env  # noqa: F401 (the fixture)

SVG = "{http://www.w3.org/2000/svg}"


def _diamond(tmp_path: Path) -> tuple[Job, Job, Job, Job]:
    """sim (3 subjobs, one fails) -> reco waits for subjob 0, check waits for sim; merge
    waits for both (and is skipped: sim failed)."""
    script = tmp_path / "step.sh"
    script.write_text('#!/bin/sh\ntest "$1" = bad && exit 3\nexit 0\n')
    script.chmod(0o755)
    sim = Job(
        name="sim",
        application=Executable(exe=str(script)),
        splitter=ArgSplitter(args=[["ok"], ["bad"], ["ok"]]),
    )
    sim.submit()
    reco = Job(name="reco", application=Executable(exe=str(script)), after=sim.subjobs[0])
    check = Job(name="check", application=Executable(exe=str(script)), after=sim, when="finished")
    merge = Job(name="merge", application=Executable(exe=str(script)), after=[reco, check, sim])
    for j in (reco, check, merge):
        j.submit()
    for j in (sim, reco, check, merge):
        j.wait(timeout=120)
    return sim, reco, check, merge


def test_the_graph_of_a_workflow_lists_its_masters_and_dependencies(
    session: Session, tmp_path: Path
) -> None:
    sim, reco, check, merge = _diamond(tmp_path)
    lonely = Job(name="lonely")
    graph = merge.graph()
    assert graph.jobs == [sim.id, reco.id, check.id, merge.id]  # not lonely, no subjob
    assert graph.edges == sorted(
        [
            (sim.id, reco.id),
            (sim.id, check.id),
            (sim.id, merge.id),
            (reco.id, merge.id),
            (check.id, merge.id),
        ]
    )
    assert sim.subjobs[1].graph().jobs == graph.jobs  # a subjob stands for its master
    assert lonely.graph().jobs == [lonely.id] and lonely.graph().edges == []
    assert repr(graph).splitlines() == [
        f"workflow of job {merge.id}: 4 jobs, 5 dependencies",
        f"{sim.id} sim failed (completed:2 failed:1)",
        f"└─▶ {reco.id} reco completed",
        f"    └─▶ {merge.id} merge skipped",
        f"└─▶ {check.id} check completed",
        f"    └─▶ {merge.id} merge (above)",
        f"└─▶ {merge.id} merge (above)",
    ]


def _svg(text: str) -> ET.Element:
    match = re.search(r"<svg.*</svg>", text, re.S)
    assert match, text
    return ET.fromstring(match.group())


def test_the_notebook_draws_the_graph_as_an_svg_coloured_by_status(
    kernel_env: Path,  # noqa: F811
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext ganga_like"),
        nbformat.v4.new_code_cell(
            "a = Job(name='sim', application=Executable(exe='sh'),\n"
            "        splitter=ArgSplitter(args=[['-c', 'exit 0'], ['-c', 'exit 3']]))\n"
            "b = Job(name='reco', after=a, allow_failed=1)\n"
            "a.submit(); b.submit(); b.wait(timeout=120)"
        ),
        nbformat.v4.new_code_cell("b.graph()"),
    ]
    run_notebook(nb, kernel_env)
    (shown,) = nb.cells[2].outputs
    assert "workflow of job 1: 2 jobs, 1 dependency" in shown["data"]["text/plain"]
    svg = _svg(html_of(shown))
    boxes = {g.get("data-job"): g for g in svg.iter(f"{SVG}g")}
    assert set(boxes) == {"0", "1"}
    assert (
        boxes["0"].get("data-status") == "failed" and boxes["1"].get("data-status") == "completed"
    )
    mix = {
        r.get("data-status"): r for r in boxes["0"].iter(f"{SVG}rect") if r.get("class") == "mix"
    }
    assert {s: r.get("data-count") for s, r in mix.items()} == {"completed": "1", "failed": "1"}
    assert mix["completed"].get("fill") != mix["failed"].get("fill")  # the status colours
    (edge,) = [e for e in svg.iter(f"{SVG}line") if e.get("class") == "edge"]
    assert (edge.get("data-from"), edge.get("data-to")) == ("0", "1")
    assert "http" not in html_of(shown).replace("http://www.w3.org/2000/svg", "")  # offline


def test_the_shell_prints_the_graph_with_its_statuses(
    shell_env: dict[str, str],  # noqa: F811
) -> None:
    shell = Shell(shell_env)
    try:
        shell.run("a = Job(name='first'); b = Job(name='second', after=a); b.submit()")
        out = shell.run("b.graph()")
        shown = [line.removeprefix("Out[2]: ") for line in out.splitlines()]
        assert [line for line in shown if line.strip()] == [
            "workflow of job 1: 2 jobs, 1 dependency",
            "0 first new",
            "└─▶ 1 second waiting",
        ]
        shell.child.sendline("b.graph()")  # again, read raw: statuses in their colours
        shell.count += 1
        coloured = shell.expect(shell.prompt(shell.count))
        assert re.search(r"\x1b\[[0-9;]*mwaiting", coloured), coloured
    finally:
        shell.exit()
