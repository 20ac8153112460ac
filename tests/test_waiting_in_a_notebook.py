"""The awaitable forms of wait() and as_completed() in a real notebook kernel: awaited
in a task, they leave the kernel free to run the next cells meanwhile."""

from __future__ import annotations

from pathlib import Path

import nbformat

from .test_notebook import kernel_env, run_notebook  # noqa: F401  (a fixture)

CELLS = [
    "%load_ext ganga_like",
    "import asyncio, pathlib\n"
    "gate = pathlib.Path('gate').resolve()\n"
    "held = ['-c', f'while [ ! -e {gate} ]; do sleep 0.05; done']\n"
    "j = Job(application=Executable(exe='sh'), splitter=ArgSplitter(args=[held, ['-c', 'true']]))\n"
    "j.submit()\n"
    "async def follow():\n"
    "    return [sj.fqid async for sj in as_completed_async(j.subjobs, timeout=120)]\n"
    "followed = asyncio.ensure_future(follow())\n"
    "waited = asyncio.ensure_future(wait_async(j, timeout=120))",
    "print(j.subjobs[0].status, followed.done(), waited.done())",
    "gate.touch()\nawait followed",
    "[x.fqid for x in await waited], j.status",
    "await wait_async(j, return_when='some')",
]


def test_awaiting_in_a_task_leaves_the_kernel_free(kernel_env: Path) -> None:  # noqa: F811
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nb.cells[-1].metadata["tags"] = ["raises-exception"]
    run_notebook(nb, kernel_env)
    out = [cell.outputs for cell in nb.cells]
    # The tasks wait on a subjob that runs until the gate opens; meanwhile the kernel ran
    # the next cell.
    assert out[2][0]["text"].split()[1:] == ["False", "False"]
    # Each subjob once (in one look when both ended before the task looked again).
    assert sorted(eval(out[3][0]["data"]["text/plain"])) == ["0.0", "0.1"]
    assert out[4][0]["data"]["text/plain"] == "(['0'], 'completed')"
    (error,) = out[5]
    assert error["ename"] == "SchemaError" and len(error["traceback"]) == 1
    assert "wait_async(): return_when expected 'all' or 'any'" in error["traceback"][0]
