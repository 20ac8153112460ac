"""The documentation's examples run, in order, against a real repository and Local backend."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ganga_like.runtime.session import Session

from .xrootd_server import shared_url

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = [
    "user-guide.md",
    "templates.md",
    "workflows.md",
    "stats.md",
    "seeing-jobs.md",
    "backends/local.md",
    "backends/dask.md",
]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)


@pytest.mark.parametrize("page", PAGES)
def test_every_example_of_the_page_runs(page: str, session: Session) -> None:
    blocks = python_blocks(DOCS / page)
    assert blocks, f"{page} has no python examples"
    namespace: dict[str, object] = {}
    exec("from ganga_like import *", namespace)
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{page}[block {number}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{page}, example {number} failed: {exc!r}\n{block}") from exc


def test_the_files_page_runs_against_the_xrootd_server(session: Session) -> None:
    """docs/files.md's examples need an XRootD server: skipped, saying so, without one."""
    shared_url()
    test_every_example_of_the_page_runs("files.md", session)
