"""The output files a ``JobOutput`` pattern finds in a (sub)job's output directory, read
in one directory listing, are those ``glob`` finds there that are files (hidden names,
directories, links to files and to nothing, patterns with classes and dots)."""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like.runtime.workflow.outputs import matching_files, output_dir

_names = st.text(alphabet="ab.x_", min_size=1, max_size=5).filter(lambda n: n not in (".", ".."))
_entries = st.lists(
    st.tuples(_names, st.sampled_from(["file", "dir", "link", "dangling"])),
    max_size=8,
    unique_by=lambda entry: entry[0],
)
_patterns = st.text(alphabet="ab.x_*?[]!", min_size=1, max_size=5)


def _by_glob(workspace: str, fqid: str, pattern: str) -> list[str]:
    found = glob.glob(os.path.join(glob.escape(output_dir(workspace, fqid)), pattern))
    return sorted(path for path in found if os.path.isfile(path))


@settings(max_examples=300, deadline=None)
@given(_entries, _patterns)
def test_the_files_matched_are_those_glob_finds_that_are_files(
    entries: list[tuple[str, str]], pattern: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(output_dir(tmp, "3.1"))
        out.mkdir(parents=True)
        (out.parent / "target").write_text("x")
        for name, kind in entries:
            path = out / name
            if kind == "file":
                path.write_text(name)
            elif kind == "dir":
                path.mkdir()
            elif kind == "link":
                path.symlink_to(out.parent / "target")
            else:
                path.symlink_to(out.parent / "nothing")
        assert matching_files(tmp, "3.1", pattern) == _by_glob(tmp, "3.1", pattern)


def test_a_run_with_no_output_directory_matches_nothing(tmp_path: Path) -> None:
    assert matching_files(str(tmp_path), "7.2", "*.root") == []
