"""A Dask task's work directory is removed whatever the program left in it or took away:
the few calls for what the task itself put there, ``rmtree`` for the rest; proven against
``rmtree`` alone."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like_dask.task import OWN_FILES, remove_work

NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


def _filled(root: Path, inputs: list[str], taken: set[str], extra: list[str]) -> str:
    work = tempfile.mkdtemp(dir=root)
    for name in [*OWN_FILES, *inputs]:
        if name not in taken:
            Path(work, name).write_bytes(b"x")
    for name in extra:  # what the program made: files, and a directory with a file
        target = Path(work, "made", name) if name.startswith("a") else Path(work, f"m{name}")
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(b"y")
    return work


@settings(max_examples=30, deadline=None)
@given(
    inputs=st.lists(NAMES.map(lambda n: f"in-{n}"), unique=True, max_size=3),
    taken=st.sets(st.sampled_from([*OWN_FILES, "in-a"])),
    extra=st.lists(NAMES, unique=True, max_size=3),
)
def test_the_work_directory_is_gone_as_after_rmtree(
    inputs: list[str], taken: set[str], extra: list[str]
) -> None:
    root = Path(tempfile.mkdtemp(prefix="work-removal-"))
    try:
        fast = _filled(root, inputs, taken, extra)
        slow = _filled(root, inputs, taken, extra)
        remove_work(fast, inputs)
        shutil.rmtree(slow)
        assert not os.path.exists(fast)
        assert os.listdir(root) == []  # nothing else touched
    finally:
        shutil.rmtree(root, ignore_errors=True)
