"""A hand-over looks up what every subjob's run needs the same (its program) once, with the
answer a lookup per subjob gives; outside a hand-over every lookup is made again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ganga_like_std.applications as applications
from ganga_like import ArgSplitter, Executable, Job, Local
from ganga_like.model.hand_over_memo import one_hand_over, remembered
from ganga_like.runtime.session import Session

PROGRAMS = ["true", "/bin/true", "./missing", "no-such-program-here", "~/nothing", "", "/bin"]


@given(st.lists(st.sampled_from(PROGRAMS), max_size=12))
def test_a_program_found_once_per_hand_over_is_where_each_lookup_finds_it(
    programs: list[str],
) -> None:
    with one_hand_over():
        found = [applications._program(exe) for exe in programs]
    assert found == [applications.resolve_program(exe) for exe in programs]


def test_outside_a_hand_over_each_lookup_is_made_again(tmp_path: Path) -> None:
    program = tmp_path / "prog"
    assert applications._program(str(program)) is None
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert applications._program(str(program)) == str(program)


def test_a_lookup_is_kept_until_its_hand_over_ends_and_nested_ones_share_it() -> None:
    calls: list[int] = []

    def look_up() -> int:
        calls.append(1)
        return len(calls)

    with one_hand_over():
        with one_hand_over():
            assert remembered("k", look_up) == 1
        assert remembered("k", look_up) == 1
    with one_hand_over():
        assert remembered("k", look_up) == 2


def test_a_submission_looks_up_its_subjobs_program_once_per_part(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[str] = []
    real = applications.resolve_program

    def counting(exe: str) -> Any:
        looked_up.append(exe)
        return real(exe)

    monkeypatch.setattr(applications, "resolve_program", counting)
    j = Job(
        application=Executable(exe="true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(100)]),
        backend=Local(),
    )
    j.submit()
    # The check before the submission, then one lookup per hand-over (the first few
    # subjobs are handed over early, the rest after).
    assert 2 <= len(looked_up) <= 3, looked_up
    assert j.wait(timeout=120) and j.status == "completed"
