"""The compact stored form of job records: what goes in comes out, older records (plain
attribute dicts) still read, and a record from a newer version is refused, not misread."""

from __future__ import annotations

import pickle

import pytest

from ganga_like import ArgSplitter, Executable, Job, Local
from ganga_like.gpi.proxy import unwrap
from ganga_like.model.compact_state import pack_state, unpack_state
from ganga_like.model.job import Job as JobImpl
from ganga_like.runtime.session import Session

FIELDS = ("a", "b", "c")


def test_present_fields_round_trip_and_absent_ones_stay_absent() -> None:
    packed = pack_state({"a": 1, "c": [3]}, FIELDS)
    assert packed == (0b1010, 1, [3])
    assert unpack_state(packed, FIELDS) == {"a": 1, "c": [3]}


def test_attributes_not_in_the_field_list_travel_in_an_extras_dict() -> None:
    state = {"b": "x", "_v_other": 2, "zzz": None}
    packed = pack_state(state, FIELDS)
    assert packed[0] & 1
    assert unpack_state(packed, FIELDS) == state


def test_a_plain_attribute_dict_is_read_as_it_is() -> None:
    assert unpack_state({"a": 1, "unknown": 2}, FIELDS) == {"a": 1, "unknown": 2}


def test_a_state_with_more_fields_than_known_is_refused() -> None:
    packed = pack_state({"a": 1, "d": 4}, (*FIELDS, "d"))
    with pytest.raises(ValueError, match="more fields than this version knows"):
        unpack_state(packed, FIELDS)


def test_an_unreadable_state_is_refused_with_its_type() -> None:
    with pytest.raises(ValueError, match="unreadable object state: str"):
        unpack_state("junk", FIELDS)


def test_the_compact_form_is_smaller_than_the_attribute_dict(session: Session) -> None:
    j = Job(
        application=Executable(exe="/bin/true"), splitter=ArgSplitter(args=[["1"]]), backend=Local()
    )
    impl: JobImpl = unwrap(j)
    state = impl.__getstate__()
    assert isinstance(state, tuple)
    plain = dict(unpack_state(state, JobImpl._state_fields))
    assert len(pickle.dumps(state, 3)) < len(pickle.dumps(plain, 3))


def test_a_job_stored_as_an_attribute_dict_still_loads(session: Session) -> None:
    j = Job(name="older", application=Executable(exe="/bin/echo", args=["hi"]))
    impl: JobImpl = unwrap(j)
    plain = unpack_state(impl.__getstate__(), JobImpl._state_fields)
    fresh = JobImpl.__new__(JobImpl)
    fresh.__setstate__(plain)
    assert fresh.name == "older" and fresh.id == j.id
    assert list(fresh.application.args) == ["hi"]
