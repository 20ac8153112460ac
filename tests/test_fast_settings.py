"""The few settings ``ganga jobs`` reads without the configuration machinery are the ones
the whole configuration gives, from any config file and environment; where the fast
reading cannot be sure it says so and the configuration decides."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ganga_like.config import fast_settings as fast
from ganga_like.config.choices import MASTER_STATUS_ORDERS, MODES
from ganga_like.config.environment import ENVIRONMENT
from ganga_like.config.store import CONFIG_NAME, ConfigStore
from ganga_like.errors import ConfigError
from ganga_like.runtime.settings import Settings, configured_settings

FIELDS = ("gangadir", "repository_mode", "repository_url", "master_status_order", "zeo_idle_exit")

# Text a file or a variable can hold (no NUL, no lone surrogate).
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=6,
)
VALUES: st.SearchStrategy[Any] = st.one_of(
    TEXT,
    st.sampled_from([*MODES, *MASTER_STATUS_ORDERS, "Shared", ""]),
    st.integers(min_value=-3, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
OPTIONS = st.sampled_from(
    [
        ("Repository", "gangadir"),
        ("Repository", "mode"),
        ("Repository", "url"),
        ("Repository", "server_idle_exit"),
        ("Jobs", "master_status_order"),
        ("Repository", "server_address"),
        ("Repository", "nonsense"),
        ("Monitor", "min_interval"),
        ("Display", "columns"),
        ("Repositry", "mode"),
    ]
)
PYTHON_LINE = st.one_of(
    st.tuples(OPTIONS, VALUES).map(lambda ov: f"c.{ov[0][0]}.{ov[0][1]} = {ov[1]!r}"),
    st.sampled_from(
        [
            "c = get_config()",
            '"""my settings"""',
            "# a comment",
            "import os",
            "c.Repository.gangadir = os.environ.get('HOME', '') + '/g'",
            "c.Repository.mode = 'shar' + 'ed'",
            "c.Repository['mode'] = 'shared'",
            "c.Repository.mode =",
        ]
    ),
)
JSON_FILE = st.dictionaries(
    st.sampled_from(["Repository", "Jobs", "Monitor", "version"]),
    st.one_of(st.dictionaries(OPTIONS.map(lambda o: o[1]), VALUES, max_size=3), VALUES),
    max_size=3,
)
ENVIRONMENT_VALUES = st.fixed_dictionaries(
    {},
    optional={
        variable: st.one_of(TEXT, st.sampled_from([*MODES, "bogus"])) for variable in ENVIRONMENT
    },
)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {variable: os.environ.get(variable) for variable in ENVIRONMENT}
    try:
        for variable in ENVIRONMENT:
            os.environ.pop(variable, None)
        os.environ.update(values)
        yield
    finally:
        for variable, value in saved.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value


def _write(path: Path, content: str | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(content, encoding="utf-8")


def _whole_configuration() -> Settings | ConfigError:
    # Every refusal is a ConfigError (one line), a JSON section that is not an object
    # (``{"Repository": ""}``) included: anything else fails the test.
    try:
        return configured_settings(ConfigStore())
    except ConfigError as exc:
        return exc


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    python_file=st.one_of(st.none(), st.lists(PYTHON_LINE, max_size=5).map("\n".join)),
    json_file=st.one_of(st.none(), JSON_FILE.map(json.dumps), st.just("{not json")),
    variables=ENVIRONMENT_VALUES,
)
def test_the_fast_reading_gives_what_the_configuration_gives_or_nothing(
    tmp_path: Path, python_file: str | None, json_file: str | None, variables: dict[str, str]
) -> None:
    directory = Path(os.environ["XDG_CONFIG_HOME"]) / "ganga_like"
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / f"{CONFIG_NAME}.py", python_file)
    _write(directory / f"{CONFIG_NAME}.json", json_file)
    with environment(variables):
        quick = fast.fast_settings()
        whole = _whole_configuration()
    event("read fast" if quick is not None else "left to the configuration")
    if quick is None:
        return
    assert not isinstance(whole, Exception), (quick, whole)
    assert {f: getattr(quick, f) for f in FIELDS} == {f: getattr(whole, f) for f in FIELDS}


@pytest.mark.parametrize(
    ("python_file", "variables"),
    [
        (None, {}),
        (None, {"GANGA_DIR": "/tmp/x", "GANGA_REPOSITORY_MODE": "embedded"}),
        ("c = get_config()\nc.Repository.gangadir = '~/jobs'\n", {}),
        ("c.Jobs.master_status_order = 'submitted_first'\n", {"GANGA_REPOSITORY": ""}),
    ],
)
def test_the_usual_configurations_are_read_fast(
    python_file: str | None, variables: dict[str, str]
) -> None:
    directory = Path(os.environ["XDG_CONFIG_HOME"]) / "ganga_like"
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / f"{CONFIG_NAME}.py", python_file)
    with environment(variables):
        quick = fast.fast_settings()
        whole = _whole_configuration()
    assert quick is not None and not isinstance(whole, Exception)
    assert {f: getattr(quick, f) for f in FIELDS} == {f: getattr(whole, f) for f in FIELDS}


def test_the_file_name_and_defaults_are_the_configurations() -> None:
    assert fast.CONFIG_NAME == CONFIG_NAME
    with environment({}):
        defaults = Settings()
    assert {f: getattr(defaults, f) for f in FIELDS} == {
        **fast.DEFAULTS,
        "gangadir": Path(fast.DEFAULTS["gangadir"]).expanduser(),
    }
