"""Whether two glob patterns can match one name, decided on the patterns alone, agrees
with trying every short name against both (``fnmatch``)."""

from __future__ import annotations

import itertools
from fnmatch import fnmatchcase

from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like.model.glob_overlap import globs_overlap
from ganga_like.model.job_output import pattern_can_match

_TOKENS = ["a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-c]"]
_patterns = st.lists(st.sampled_from(_TOKENS), max_size=3).map("".join)


def _some_name_matches_both(first: str, second: str) -> bool:
    # A shortest common name takes at most one character per non-star token of each.
    longest = sum(1 for p in (first, second) for t in _split(p) if t != "*")
    for length in range(longest + 1):
        for chars in itertools.product("ab.cz", repeat=length):
            name = "".join(chars)
            if fnmatchcase(name, first) and fnmatchcase(name, second):
                return True
    return False


def _split(pattern: str) -> list[str]:
    tokens, i = [], 0
    while i < len(pattern):
        end = pattern.find("]", i) + 1 if pattern[i] == "[" else i + 1
        tokens.append(pattern[i:end])
        i = end
    return tokens


@settings(max_examples=300, deadline=None)
@given(_patterns, _patterns)
def test_two_globs_overlap_exactly_when_some_short_name_matches_both(
    first: str, second: str
) -> None:
    assert globs_overlap(first, second) == _some_name_matches_both(first, second)


def test_what_a_job_output_can_read_of_a_jobs_output_files() -> None:
    assert pattern_can_match("*.root", ["out/*.root"]) is True
    assert pattern_can_match("part-*.root", ["*.root"]) is True
    assert pattern_can_match("*.root", ["*.txt"]) is False
    assert pattern_can_match("stdout", []) is True  # every run writes it
    assert pattern_can_match("std*", []) is True
    assert pattern_can_match("[!s]*", []) is False
