"""A real notebook, executed by nbclient on a real ipykernel: ``%load_ext ganga_like``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

KERNEL = "ganga-like-test"

CELLS = [
    "%load_ext ganga_like",
    "j = Job(name='nb', application=Executable(exe='echo', args=['hello']),\n"
    "        splitter=ArgSplitter(args=[['a'], ['b'], ['c']]))\n"
    "j.submit()",
    "j.wait(timeout=60)",
    "jobs",
    "j",
    "j.subjobs",
    "j.nmae = 'x'",
    "%jobs status=completed",
    "from ganga_like.runtime.session import current_session\n"
    "s = current_session()\n"
    "print(s.autocommit, s.monitor.running, len(jobs), Executable.__name__)",
    "j.time",
]


def build_notebook() -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nb.cells[6].metadata["tags"] = ["raises-exception"]  # the GPI error cell
    return nb


def install_kernel(where: Path) -> None:
    """A kernel spec running this very interpreter (whatever the machine has installed)."""
    spec = where / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "ganga_like test",
                "language": "python",
            }
        )
    )


def run_notebook(nb: Any, where: Path) -> Any:
    client = NotebookClient(
        nb, kernel_name=KERNEL, timeout=120, resources={"metadata": {"path": str(where)}}
    )
    client.execute()
    return nb


@pytest.fixture
def kernel_env(
    tmp_path: Path, gangadir: Path, env_for: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Any:
    install_kernel(tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("GANGA_DIR", str(gangadir))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("PYTHONPATH", env_for["PYTHONPATH"])
    yield tmp_path
    runner_client.stop(runner_dir(gangadir))


def html_of(output: dict[str, Any]) -> str:
    return str(output.get("data", {}).get("text/html", ""))


def test_the_extension_in_a_real_notebook(kernel_env: Path) -> None:
    nb = run_notebook(build_notebook(), kernel_env)
    out = [cell.outputs for cell in nb.cells]

    assert out[0] == []  # loading says nothing when all is well

    submitted = [html_of(o) for o in out[1] if o["output_type"] == "display_data"]
    assert submitted and "submitting job 0" in submitted[-1]
    assert "3 subjobs submitted" in submitted[-1]

    # wait(): a live display (one output, updated in place) ending at 3/3, and the result.
    progress = [html_of(o) for o in out[2] if o["output_type"] == "display_data"]
    assert len(progress) == 1 and "ganga-progress" in progress[0]
    assert re.search(r'<progress[^>]*value="3" max="3"', progress[0])
    assert [o["data"]["text/plain"] for o in out[2] if o["output_type"] == "execute_result"] == [
        "'completed'"
    ]

    table = html_of(out[3][0])
    assert '<table class="ganga-jobs"' in table and "jobs: 1" in table
    assert re.search(r"<td[^>]*>0</td>.*completed.*<td[^>]*>nb</td>", table)
    assert "done:3" in table and "Executable" in table and "Local" in table
    assert "jobs: 1" in out[3][0]["data"]["text/plain"]  # the plain repr is kept too

    tree = html_of(out[4][0])
    assert '<div class="ganga-job"' in tree and "Job 0</b> &#x27;nb&#x27;" in tree
    assert "application" in tree and "ArgSplitter" in tree

    assert "subjobs of job 0: 3" in html_of(out[5][0])

    (error,) = out[6]
    assert error["output_type"] == "error" and error["ename"] == "SchemaError"
    assert len(error["traceback"]) == 1
    assert "ERROR: Job has no attribute 'nmae'; did you mean 'name'?" in error["traceback"][0]

    assert "nb" in html_of(out[7][0])

    assert out[8][0]["text"].split() == ["False", "True", "1", "Executable"]

    times = html_of(out[9][0])  # j.time: a table, as details() prints it
    assert '<table class="ganga-times"' in times and "times of job 0" in times
    assert "subjobs (3)" in times and ">running</td>" in times and ">runtime</td>" in times
    assert "subjobs (3)" in out[9][0]["data"]["text/plain"]


def test_plain_import_works_without_the_extension(kernel_env: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from ganga_like import *\n"
            "j = Job(name='plain')\n"
            "from ganga_like.runtime.session import current_session\n"
            "print(len(jobs), j.status, current_session().autocommit, Local.__name__)"
        )
    ]
    run_notebook(nb, kernel_env)
    assert nb.cells[0].outputs[0]["text"].split() == ["1", "new", "True", "Local"]
