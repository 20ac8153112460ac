"""The job query language: parsing, canonical text, errors, evaluation and index hints."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from fnmatch import fnmatchcase

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like.errors import GangaError
from ganga_like.query import (
    Condition,
    Query,
    QueryError,
    QuerySyntaxError,
    Range,
    RelativeTime,
    Value,
    index_hints,
    matches,
    parse,
)

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
OPS_MESSAGE = "expected an operator (=, <>, <, <=, >, >=, ~, !~) after 'status'"

Record = dict[tuple[str, ...], object]


def getter_for(record: Record) -> Callable[[tuple[str, ...]], object]:
    def getter(path: tuple[str, ...]) -> object:
        return record[path]  # KeyError is a LookupError: the attribute is missing

    return getter


def match(text: str, record: Record, now: datetime = NOW) -> bool:
    return matches(parse(text), getter_for(record), now=now)


def single(text: str) -> Condition:
    (condition,) = parse(text).conditions
    return condition


# --- valid queries -------------------------------------------------------------------


def test_example_from_the_manual() -> None:
    query = parse("status=failed; backend.partition=short; time.submitted>2026-11-01")
    assert query.conditions == (
        Condition(("status",), "=", "failed"),
        Condition(("backend", "partition"), "=", "short"),
        Condition(("time", "submitted"), ">", datetime(2026, 11, 1, tzinfo=UTC)),
    )
    assert [c.position for c in query.conditions] == [0, 15, 40]


@pytest.mark.parametrize("text", ["", "   ", ";", ";;", " ; ; ", "\n"])
def test_empty_queries_match_everything(text: str) -> None:
    assert parse(text) == Query(())
    assert match(text, {})


def test_trailing_and_doubled_semicolons_are_skipped() -> None:
    assert parse("a=1;") == parse("a=1")
    expected = parse("a=1; b=2")
    assert parse("a=1;;b=2;") == expected
    assert parse(";a=1 ;\t; b=2") == expected


@pytest.mark.parametrize(
    ("text", "op"),
    [
        ("x=1", "="),
        ("x<>1", "<>"),
        ("x!=1", "<>"),
        ("x<1", "<"),
        ("x<=1", "<="),
        ("x>1", ">"),
        ("x>=1", ">="),
        ("x~1", "~"),
        ("x!~1", "!~"),
    ],
)
def test_every_operator(text: str, op: str) -> None:
    assert single(text).op == op


def test_whitespace_around_tokens() -> None:
    assert parse("  status = failed ;  id >= 3 ") == parse("status=failed;id>=3")
    assert parse("status = failed , killed") == parse("status=failed,killed")


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("status=1", ("status",)),
        ("application.exe=1", ("application", "exe")),
        ("backend.id=1", ("backend", "id")),
        ("time.submitted=1", ("time", "submitted")),
        ("subjobs.failed=1", ("subjobs", "failed")),
        ("_a.b_2.C=1", ("_a", "b_2", "C")),
    ],
)
def test_paths(text: str, path: tuple[str, ...]) -> None:
    assert single(text).path == path


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("42", 42),
        ("-7", -7),
        ("+7", 7),
        ("007", 7),
        ("2.5", 2.5),
        ("-0.125", -0.125),
        ("failed", "failed"),
        ("short", "short"),
        ("/bin/echo", "/bin/echo"),
        ("a-b_c.d:e+f", "a-b_c.d:e+f"),
        ("1.", "1."),  # no digit after the point: text
        (".5", ".5"),
        ("1e5", "1e5"),  # no exponent form: text
        ("NOW", "NOW"),
        ("foo-ago", "foo-ago"),
        ("café", "café"),
    ],
)
def test_bare_values_are_typed(word: str, value: object) -> None:
    parsed = single(f"x={word}").value
    assert parsed == value
    assert type(parsed) is type(value)


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("2026-11-01", datetime(2026, 11, 1, tzinfo=UTC)),
        ("2026-11-01T12:30", datetime(2026, 11, 1, 12, 30, tzinfo=UTC)),
        ("2026-11-01T12:30:15", datetime(2026, 11, 1, 12, 30, 15, tzinfo=UTC)),
        ("2026-11-01T12:30:15.25", datetime(2026, 11, 1, 12, 30, 15, 250000, tzinfo=UTC)),
        ("2026-11-01T12:30Z", datetime(2026, 11, 1, 12, 30, tzinfo=UTC)),
        ("2026-11-01T12:30+02:00", datetime(2026, 11, 1, 10, 30, tzinfo=UTC)),
        ("2026-11-01T23:30-01:00", datetime(2026, 11, 2, 0, 30, tzinfo=UTC)),
    ],
)
def test_dates_are_aware_utc(word: str, value: datetime) -> None:
    parsed = single(f"time.submitted>{word}").value
    assert parsed == value
    assert isinstance(parsed, datetime)
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("word", "ago"),
    [
        ("now", timedelta(0)),
        ("30s-ago", timedelta(seconds=30)),
        ("30m-ago", timedelta(minutes=30)),
        ("3h-ago", timedelta(hours=3)),
        ("2d-ago", timedelta(days=2)),
        ("1w-ago", timedelta(weeks=1)),
    ],
)
def test_relative_times(word: str, ago: timedelta) -> None:
    assert single(f"t>{word}").value == RelativeTime(ago)


def test_relative_times_resolve_against_the_given_now() -> None:
    record: Record = {("time", "submitted"): NOW - timedelta(hours=5)}
    assert match("time.submitted>1d-ago", record)
    assert not match("time.submitted>3h-ago", record)
    assert match("time.submitted<now", record)
    later = NOW + timedelta(days=2)
    assert not match("time.submitted>1d-ago", record, now=later)


def test_ranges() -> None:
    assert single("id=10..20").value == Range(10, 20)
    assert single("x<>1.5..2").value == Range(1.5, 2)
    assert single("x=-5..-1").value == Range(-5, -1)
    assert single("x=5..5").value == Range(5, 5)
    day = single("t=2026-11-01..2026-11-02T06:00").value
    assert day == Range(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, 6, tzinfo=UTC))
    assert single("t=2d-ago..now").value == Range(
        RelativeTime(timedelta(days=2)), RelativeTime(timedelta(0))
    )


def test_lists() -> None:
    assert single("status=failed,killed").value == ("failed", "killed")
    assert single("status<>failed,'a b'").value == ("failed", "a b")
    assert single("id=1,5..7,10").value == (1, Range(5, 7), 10)
    assert single("name~a*,b*").value == ("a*", "b*")


def test_quoted_strings_and_escapes() -> None:
    assert single('name="a b"').value == "a b"
    assert single("name='a b'").value == "a b"
    assert single(r'name="say \"hi\""').value == 'say "hi"'
    assert single(r"name='it\'s'").value == "it's"
    assert single(r'name="back\\slash"').value == "back\\slash"
    assert single(r'name="t\tn\nr\r"').value == "t\tn\nr\r"
    assert single('name="\'"').value == "'"
    assert single('name=""').value == ""
    assert single("name='a;b,c=d'").value == "a;b,c=d"


def test_quoting_always_means_text() -> None:
    assert single('id="42"').value == "42"
    assert single("t='2026-11-01'").value == "2026-11-01"
    assert single("x='10..20'").value == "10..20"
    assert single("x='now'").value == "now"


def test_glob_values_are_always_patterns() -> None:
    assert single("name~10").value == "10"
    assert single("name~*..*").value == "*..*"
    assert single("name!~2026-11-*").value == "2026-11-*"
    assert single("name~now").value == "now"


def test_known_roots() -> None:
    roots = {"status", "backend", "time"}
    assert parse("status=a; backend.id=3", known_roots=roots)
    with pytest.raises(QuerySyntaxError) as info:
        parse("status=a; stauts=failed", known_roots=roots)
    assert info.value.position == 10
    assert "unknown attribute 'stauts'; did you mean 'status'?" in info.value.message
    with pytest.raises(QuerySyntaxError) as info:
        parse("zzz.y=1", known_roots=roots)
    assert info.value.message == "unknown attribute 'zzz'; expected one of: backend, status, time"


# --- canonical text ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("status = failed ;", "status=failed"),
        ("a!=1;b=2", "a<>1; b=2"),
        ("name='a b'", 'name="a b"'),
        ("name='42'", 'name="42"'),
        ("name=''", 'name=""'),
        ('name="x\\ny"', 'name="x\\ny"'),
        ("name~10", "name~10"),
        ("t>2026-11-01T00:00:00", "t>2026-11-01"),
        ("t>2026-11-01T12:30+01:00", "t>2026-11-01T11:30"),
        ("t>168h-ago", "t>1w-ago"),
        ("t>0d-ago", "t>now"),
        ("x=+5", "x=5"),
        ("x=1.50", "x=1.5"),
        ("id=1,3..4", "id=1,3..4"),
    ],
)
def test_canonical_text(text: str, canonical: str) -> None:
    assert str(parse(text)) == canonical
    assert parse(canonical) == parse(text)


def test_floats_print_without_exponent() -> None:
    for number in (1e16, 1.5e-7, 1e300, -2.0, 0.1):
        query = Query((Condition(("x",), "=", number),))
        assert "e" not in str(query)
        assert parse(str(query)) == query


def test_position_does_not_affect_equality() -> None:
    assert Condition(("a",), "=", 1, position=5) == Condition(("a",), "=", 1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Condition((), "=", 1),
        lambda: Condition(("a.b",), "=", 1),
        lambda: Condition(("a",), "!=", 1),
        lambda: Condition(("a",), "=", True),
        lambda: Condition(("a",), "=", float("nan")),
        lambda: Condition(("a",), "=", datetime(2026, 1, 1)),
        lambda: Condition(("a",), "=", ("x",)),
        lambda: Condition(("a",), "<", (1, 2)),
        lambda: Condition(("a",), "<", Range(1, 2)),
        lambda: Condition(("a",), "~", 5),
        lambda: Range(2, 1),
        lambda: Range("a", "b"),
        lambda: Range(1, datetime(2026, 1, 1, tzinfo=UTC)),
        lambda: RelativeTime(timedelta(seconds=-1)),
    ],
)
def test_invalid_objects_are_refused(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        make()


# --- syntax errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("status failed", 7, OPS_MESSAGE),
        ("status", 6, OPS_MESSAGE),
        ("status:failed", 6, OPS_MESSAGE),
        ("status=", 7, "expected a value after '=', found the end of the query"),
        ("status=;id=1", 7, "expected a value after '=', found ';'"),
        ("id>=  ", 6, "expected a value after '>=', found the end of the query"),
        ("id!=", 4, "expected a value after '!=', found the end of the query"),
        ("status=>failed", 6, "unknown operator '=>' (did you mean '>='?)"),
        ("status==failed", 6, "unknown operator '==' (did you mean '='?)"),
        ("a=1; b=~x", 6, "unknown operator '=~' (did you mean '~'?)"),
        ("name='abc", 5, "unterminated string: expected a closing ' for the quote opened here"),
        ('name="abc\\"', 5, 'unterminated string: expected a closing "'),
        ('name="a\\q"', 7, "unknown escape '\\q' in a quoted string"),
        ("id=10..", 7, "bad range '10..': expected a number or a date after '..'"),
        ("id=..10", 3, "bad range '..10': expected a number or a date before '..'"),
        ("id=1..x", 6, "bad range '1..x': expected a number or a date after '..', found 'x'"),
        ("id=a..1", 3, "bad range 'a..1': expected a number or a date before '..'"),
        ("id=1..2..3", 6, "bad range '1..2..3'"),
        ("id=20..10", 3, "empty range '20..10'"),
        ("t=1..2026-01-01", 5, "both ends must be numbers or both dates"),
        ("id<1..5", 3, "a range such as 1..5 can only be used with = or <>, not '<'"),
        ("id<1,2", 4, "'<' takes a single value; a list of values needs =, <>, ~ or !~"),
        ("status=a,", 9, "expected a value after ',', found the end of the query"),
        ("status=a,,b", 9, "expected a value after ',', found ','"),
        ("t>2x-ago", 2, "bad relative time '2x-ago': expected a whole number, a unit"),
        ("t>1.5d-ago", 2, "bad relative time '1.5d-ago'"),
        ("t>2026-13-01", 2, "bad date '2026-13-01': no such date or time"),
        ("t>2026-11-1", 2, "bad date '2026-11-1': expected YYYY-MM-DD"),
        ("t>2026-11-01T25:00", 2, "bad date"),
        ("=failed", 0, "expected an attribute name such as 'status' or 'backend.id'"),
        ("1abc=2", 0, "expected an attribute name such as 'status' or 'backend.id'"),
        ("'status'=2", 0, "found a quoted string"),
        ("backend.=1", 8, "expected an attribute name after 'backend.'"),
        ("backend..id=1", 8, "expected an attribute name after 'backend.'"),
        ("a=b c", 4, "expected ',', ';' or the end of the query after the value of 'a'"),
        ("id>1 2", 5, "expected ';' or the end of the query after the value of 'id'"),
        ("a=(b)", 2, "expected a value after '=', found '('"),
        ("a=b & c=d", 4, "found '&'"),
        ("x=" + "9" * 2000, 2, "is too long"),
        ("x=" + "9" * 400 + ".0", 2, "is too large"),
        ("t>99999999999999w-ago", 2, "too far in the past"),
    ],
)
def test_syntax_errors(text: str, position: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    error = info.value
    assert error.position == position
    assert error.text == text
    assert message in error.message


def test_error_display_shows_a_caret_under_the_offending_character() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("status failed")
    assert str(info.value) == f"{OPS_MESSAGE}\n  status failed\n         ^"


def test_error_display_for_multiline_and_tabbed_queries() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("status=failed;\n\tid>>3")
    assert str(info.value).splitlines()[1:] == ["   id>>3", "     ^"]


def test_the_first_error_from_the_left_is_reported() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("status failed; name='unterminated")
    assert info.value.position == 7


def test_syntax_error_is_a_ganga_error_and_pickles() -> None:
    with pytest.raises(GangaError):
        parse("a")
    error = QuerySyntaxError("expected x", "a b", 2)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.text, copy.position) == ("expected x", "a b", 2)


# --- evaluation ----------------------------------------------------------------------


class Colour(Enum):
    RED = "red"


class Labelled(Enum):
    """Like the core's Status: a tuple value and a str() that is the label."""

    FAILED = ("failed", 5)

    def __str__(self) -> str:
        return str(self.value[0])


JOB: Record = {
    ("status",): "failed",
    ("name",): "analysis-7",
    ("id",): 12,
    ("backend", "partition"): "short",
    ("backend", "id"): None,
    ("time", "submitted"): datetime(2026, 11, 2, 8, 0, tzinfo=UTC),
    ("subjobs",): 40,
    ("subjobs", "failed"): 3,
    ("application", "args"): ["--fast", "input.txt"],
    ("score",): 2.5,
    ("flag",): True,
    ("colour",): Colour.RED,
    ("label",): Labelled.FAILED,
    ("naive",): datetime(2026, 11, 2, 8, 0),
    ("epoch",): datetime(2026, 11, 2, 8, 0, tzinfo=UTC).timestamp(),
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status=failed", True),
        ("status=completed", False),
        ("status<>failed", False),
        ("status!=completed", True),
        ("status=completed,failed", True),
        ("status<>completed,killed", True),
        ("status<>completed,failed", False),
        ("status<g", True),
        ("status>=failed", True),
        ("name~analysis-*", True),
        ("name~Analysis-*", False),  # case-sensitive
        ("name!~*-7", False),
        ("name~a*,x*", True),
        ("name=analysis-7", True),
        ("id=12", True),
        ("id=12.0", True),
        ("id<>12", False),
        ("id<13", True),
        ("id<=12", True),
        ("id>12", False),
        ("id>=12", True),
        ("id=10..20", True),
        ("id=13..20", False),
        ("id<>13..20", True),
        ("id=1,5..7,12", True),
        ("id~1?", True),
        ("id='12'", True),  # text against a number compares text
        ("subjobs.failed>0", True),
        ("subjobs=40; subjobs.failed<5", True),
        ("backend.partition=short; status=failed", True),
        ("backend.partition=short; status=killed", False),
        ("time.submitted>2026-11-01", True),
        ("time.submitted>2026-11-02T08:00", False),
        ("time.submitted>=2026-11-02T08:00", True),
        ("time.submitted=2026-11-02T09:00+01:00", True),
        ("time.submitted=2026-11-01..2026-11-03", True),
        ("time.submitted>3w-ago", True),  # 18 days before NOW
        ("time.submitted>2w-ago", False),
        ("time.submitted=3w-ago..2w-ago", True),
        ("time.submitted=2w-ago..now", False),
        ("time.submitted=2026-11-02T08:00", True),
        ("application.args=input.txt", True),
        ("application.args=missing", False),
        ("application.args<>missing", True),
        ("application.args<>--fast", False),
        ("application.args~*.txt", True),
        ("application.args!~*.txt", False),
        ("score>2", True),
        ("score=2.5", True),
        ("score=2..3", True),
        ("flag=true", True),
        ("flag=True", False),
        ("colour=red", True),
        ("label=failed", True),
        ("label~fail*", True),
        ("naive=2026-11-02T08:00", True),
        ("epoch=2026-11-02T08:00", True),
        ("epoch<now", True),
        ("epoch>2026-11-03", False),
    ],
)
def test_matches(text: str, expected: bool) -> None:
    assert match(text, JOB) is expected


@pytest.mark.parametrize(
    "text",
    ["nosuch=1", "nosuch<>1", "nosuch!~*", "backend.id=1", "backend.id<>1", "backend.id>1"],
)
def test_missing_or_unset_attributes_make_the_condition_false(text: str) -> None:
    assert match(text, JOB) is False


def test_empty_list_attribute() -> None:
    record: Record = {("args",): []}
    assert not match("args=x", record)
    assert match("args<>x", record)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("id<abc", "the job has a number (12) and the query has text ('abc')"),
        ("name>5", "the job has text ('analysis-7') and the query has a number (5)"),
        ("time.submitted<5", "the job has a date (2026-11-02T08:00) and the query has a number"),
        ("name>now", "the query has a date (now)"),
        ("flag>1", "the job has a boolean (true)"),
        ("status=1..3", "'>=' needs two numbers, two dates or two texts"),
    ],
)
def test_ordering_incompatible_types_is_a_query_error(text: str, fragment: str) -> None:
    with pytest.raises(QueryError) as info:
        match(text, JOB)
    assert fragment in str(info.value)
    assert repr(str(parse(text))) in str(info.value)


def test_evaluation_stops_at_the_first_false_condition() -> None:
    # The second condition cannot be evaluated, but the first already rules the job out.
    assert not match("status=killed; id<abc", JOB)
    with pytest.raises(QueryError):
        match("status=failed; id<abc", JOB)


def test_getter_only_sees_paths() -> None:
    asked: list[tuple[str, ...]] = []

    def getter(path: tuple[str, ...]) -> object:
        asked.append(path)
        return JOB[path]

    assert matches(parse("status=failed; backend.partition=short"), getter, now=NOW)
    assert asked == [("status",), ("backend", "partition")]


def test_naive_now_is_utc() -> None:
    record: Record = {("t",): NOW - timedelta(hours=1)}
    assert match("t>2h-ago", record, now=NOW.replace(tzinfo=None))
    other_zone = NOW.astimezone(timezone(timedelta(hours=5)))
    assert match("t>2h-ago", record, now=other_zone)


def test_relative_time_before_year_one_orders_first() -> None:
    record: Record = {("t",): datetime(2, 1, 1, tzinfo=UTC)}
    assert match("t>999999w-ago", record)


# --- index hints ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hints"),
    [
        ("", {}),
        ("backend.id=3; name<>x; status~f*", {}),
        ("status=failed", {"status": {"failed"}}),
        ("status=failed,killed", {"status": {"failed", "killed"}}),
        ("status=failed,killed; status=killed,new", {"status": {"killed"}}),
        ("status=failed,killed; status<>killed", {"status": {"failed"}}),
        ("status<>failed; status<>killed,new", {"status_not": {"failed", "killed", "new"}}),
        ("name=analysis-7", {"name": "analysis-7"}),
        ("name=10", {"name": "10"}),
        ("name=a,b", {}),
        ("name~ana*; name~x*", {"name_glob": "ana*"}),
        ("id=5", {"id_range": (5, 5)}),
        ("id=10..20", {"id_range": (10, 20)}),
        ("id<10", {"id_range": (None, 9)}),
        ("id<=10", {"id_range": (None, 10)}),
        ("id>10", {"id_range": (11, None)}),
        ("id>=10", {"id_range": (10, None)}),
        ("id>=10; id<20; id=5..15", {"id_range": (10, 15)}),
        ("id<2.5", {"id_range": (None, 2)}),
        ("id>2.5", {"id_range": (3, None)}),
        ("id=2.5", {"id_range": (3, 2)}),
        ("id=1,2", {"id_range": (1, 2)}),
        ("id=1,5,10..20", {"id_range": (1, 20)}),
        ("id=1,abc", {}),
        ('id="7"', {}),
        ("id<>1,2", {}),
        ("id<>5; id=abc; id~1*", {}),
        (
            "status=running; name~j*; id>100; backend.partition=short",
            {"status": {"running"}, "name_glob": "j*", "id_range": (101, None)},
        ),
    ],
)
def test_index_hints(text: str, hints: dict[str, object]) -> None:
    assert index_hints(parse(text)) == hints


# --- properties ----------------------------------------------------------------------

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
paths = st.lists(identifiers, min_size=1, max_size=3).map(tuple)
texts = st.text(max_size=8)
numbers = st.integers(-(10**15), 10**15) | st.floats(allow_nan=False, allow_infinity=False)
offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
moments = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets
)
relatives = st.integers(0, 10**10).map(lambda s: RelativeTime(timedelta(seconds=s)))
times = moments | relatives
scalars = numbers | texts | times


@st.composite
def ranges(draw: st.DrawFn) -> Range:
    if draw(st.booleans()):
        low, high = sorted(draw(st.lists(numbers, min_size=2, max_size=2)))
        return Range(low, high)
    lo, hi = draw(times), draw(times)
    if isinstance(lo, datetime) and isinstance(hi, datetime) and lo > hi:
        lo, hi = hi, lo
    if isinstance(lo, RelativeTime) and isinstance(hi, RelativeTime) and lo.ago < hi.ago:
        lo, hi = hi, lo  # further ago is earlier
    return Range(lo, hi)


@st.composite
def conditions(draw: st.DrawFn) -> Condition:
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "~", "!~"]))
    value: Value
    if op in ("~", "!~"):
        value = draw(texts | st.lists(texts, min_size=2, max_size=3).map(tuple))
    elif op in ("=", "<>"):
        item = scalars | ranges()
        value = draw(item | st.lists(item, min_size=2, max_size=3).map(tuple))
    else:
        value = draw(scalars)
    return Condition(draw(paths), op, value)


queries = st.lists(conditions(), max_size=4).map(lambda cs: Query(tuple(cs)))


@settings(max_examples=200, deadline=None)
@given(queries)
def test_round_trip(query: Query) -> None:
    assert parse(str(query)) == query


query_alphabet = st.sampled_from(list("abst01239.-_:=<>!~;,'\"\\*?[] \tTZ+")) | st.characters()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=query_alphabet, max_size=40))
def test_random_text_raises_only_syntax_errors(text: str) -> None:
    try:
        query = parse(text)
    except QuerySyntaxError as error:
        assert 0 <= error.position <= len(text)
        str(error)
    else:
        assert parse(str(query)) == query


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"[a-c]{1,3} ?(=|<>|<|>=|~|!~) ?[a-c0-9.*,\-]{0,8}(;|$)", fullmatch=True))
def test_query_shaped_text_raises_only_syntax_errors(text: str) -> None:
    with contextlib.suppress(QuerySyntaxError):
        parse(text)


# Reference evaluation: the documented rules, written out case by case for the few types
# generated records hold (int, str, aware datetime, list of str).

REF_PATHS = [("status",), ("id",), ("t",), ("args",)]
STATUSES = ["new", "failed", "killed", "completed"]
BASE = datetime(2026, 11, 1, tzinfo=UTC)
ref_times = st.integers(0, 20).map(lambda d: BASE + timedelta(days=d))
ref_scalars = (
    st.sampled_from([*STATUSES, "1", "a*", "*e*"])
    | st.integers(-3, 3)
    | ref_times
    | st.integers(0, 20).map(lambda d: RelativeTime(timedelta(days=d)))
)


class Incomparable(Exception):
    pass


def ref_text(value: object) -> str:
    if isinstance(value, datetime):
        text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
        return text.removesuffix("T00:00")
    if isinstance(value, RelativeTime):
        days = value.ago.days
        if days == 0:
            return "now"
        return f"{days // 7}w-ago" if days % 7 == 0 else f"{days}d-ago"
    return str(value)


def ref_compare(actual: object, op: str, value: object) -> bool:
    if op == "~":
        return fnmatchcase(ref_text(actual), str(value))
    if isinstance(value, RelativeTime):
        if op == "=" and isinstance(actual, str):
            return actual == ref_text(value)  # text against text: "now", "2d-ago"
        value = NOW - value.ago
    if isinstance(actual, int) and isinstance(value, datetime):
        value = value.timestamp()  # a number against a date is a POSIX timestamp
    kinds = (type(actual), type(value))
    if op == "=":
        if kinds in ((int, int), (int, float), (datetime, datetime)):
            return actual == value
        return ref_text(actual) == ref_text(value)
    if kinds not in ((int, int), (int, float), (str, str), (datetime, datetime)):
        raise Incomparable
    ordered: dict[str, bool] = {
        "<": actual < value,  # type: ignore[operator]
        "<=": actual <= value,  # type: ignore[operator]
        ">": actual > value,  # type: ignore[operator]
        ">=": actual >= value,  # type: ignore[operator]
    }
    return ordered[op]


def ref_item(actual: object, op: str, item: object) -> bool:
    if isinstance(item, Range):
        low = ref_compare(actual, ">=", item.lo)
        high = ref_compare(actual, "<=", item.hi)
        return low and high
    return ref_compare(actual, op, item)


def ref_condition(record: Record, condition: Condition) -> bool:
    actual = record.get(condition.path)
    if actual is None:
        return False
    negated = condition.op in ("<>", "!~")
    op = {"<>": "=", "!~": "~"}.get(condition.op, condition.op)
    items = condition.value if isinstance(condition.value, tuple) else (condition.value,)
    elements = actual if isinstance(actual, list) else [actual]
    results = [ref_item(element, op, item) for element in elements for item in items]
    return any(results) != negated


def ref_matches(record: Record, query: Query) -> bool:
    return all(ref_condition(record, condition) for condition in query.conditions)


ref_records = st.fixed_dictionaries(
    {},
    optional={
        ("status",): st.sampled_from(STATUSES),
        ("id",): st.integers(-3, 3),
        ("t",): ref_times,
        ("args",): st.lists(st.sampled_from(STATUSES), max_size=3),
    },
)


@st.composite
def ref_conditions(draw: st.DrawFn) -> Condition:
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "~", "!~"]))
    value: Value
    if op in ("~", "!~"):
        pattern = st.sampled_from(["*", "f*", "*e*", "1", "?", "2026-11-0*", "-*"])
        value = draw(pattern | st.lists(pattern, min_size=2, max_size=3).map(tuple))
    elif op in ("=", "<>"):
        bounds = st.lists(st.integers(-3, 3), min_size=2, max_size=2).map(sorted)
        int_range = bounds.map(lambda b: Range(b[0], b[1]))
        item = ref_scalars | int_range
        value = draw(item | st.lists(item, min_size=2, max_size=3).map(tuple))
    else:
        value = draw(ref_scalars)
    return Condition(draw(st.sampled_from(REF_PATHS)), op, value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ref_records, st.lists(ref_conditions(), min_size=1, max_size=3))
def test_matches_agrees_with_reference(record: Record, conditions: list[Condition]) -> None:
    query = Query(tuple(conditions))
    try:
        expected: bool | None = ref_matches(record, query)
    except Incomparable:
        expected = None
    try:
        actual: bool | None = matches(query, getter_for(record), now=NOW)
    except QueryError:
        actual = None
    assert actual == expected, str(query)
