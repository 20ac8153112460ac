"""The configuration as one frozen snapshot of sections keyed by their classes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode
from traitlets.config import Config, Configurable

from ganga_like import config
from ganga_like.config.choices import DEFAULT_STATUS_COLOURS
from ganga_like.config.environment import ENVIRONMENT
from ganga_like.config.plugins import plugin_sections
from ganga_like.config.sections import Monitor, Repository
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import all_sections, options, store
from ganga_like.errors import ConfigError
from ganga_like.runtime.settings import Settings
from ganga_like_local.settings import Local
from ganga_like_std.notifier_settings import Notifier


def _values_of(trait: Any) -> st.SearchStrategy[Any]:
    """Values ``trait`` accepts (every kind of trait the sections declare)."""
    if isinstance(trait, Bool):
        return st.booleans()
    if isinstance(trait, Enum):
        return st.sampled_from(sorted(trait.values))
    if isinstance(trait, Int):
        low = trait.min if trait.min is not None else -(2**31)
        high = trait.max if trait.max is not None else 2**31 - 1
        return st.integers(low, high)
    if isinstance(trait, Float):
        low = trait.min if trait.min is not None else -1e9
        return st.floats(low, 1e9, allow_nan=False)
    if isinstance(trait, Unicode):
        return st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
    if isinstance(trait, List):
        return st.lists(_values_of(trait._trait), min_size=max(trait._minlen, 1), max_size=5)
    if isinstance(trait, Dict):
        colours = st.sampled_from(["red", "green", "bright_blue", "color(5)", "#a0b0c0"])
        return st.dictionaries(st.sampled_from(sorted(DEFAULT_STATUS_COLOURS)), colours)
    raise AssertionError(f"no strategy for {type(trait).__name__}")


def _chosen_values() -> st.SearchStrategy[dict[str, dict[str, Any]]]:
    """For each section, some of its options with a value each."""
    per_section = {
        cls.__name__: st.fixed_dictionaries(
            {}, optional={option: _values_of(trait) for option, trait in options(cls).items()}
        )
        for cls in all_sections()
    }
    return st.fixed_dictionaries(per_section)


def _through_flat_keys(cls: type[Configurable], flat: Mapping[str, Any]) -> Configurable:
    """The way a plugin used to receive its section: every plugin option under a flat
    ``<section>_<option>`` key, then a new section rebuilt from the keys of its own."""
    section = cls()
    for option in options(cls):
        value = flat.get(f"{cls.__name__.lower()}_{option}")
        if value is not None:
            setattr(section, option, value)
    return section


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_chosen_values())
def test_a_snapshot_holds_every_option_as_the_configuration_reads_it(
    chosen: dict[str, dict[str, Any]],
) -> None:
    monitor = {**{"min_interval": 0.05, "max_interval": 2.0}, **chosen["Monitor"]}
    assume(monitor["min_interval"] <= monitor["max_interval"])
    store.reset()
    store.use_command_line(Config(chosen))
    snapshot = store.snapshot()
    assert list(snapshot) == list(all_sections())
    flat = {
        f"{cls.__name__.lower()}_{option}": getattr(snapshot[cls], option)
        for cls in plugin_sections()
        for option in options(cls)
    }
    for cls in all_sections():
        for option in options(cls):
            held = getattr(snapshot[cls], option)
            # What the GPI shows (a list shown as a tuple)...
            shown = getattr(config[cls.__name__], option)
            assert (tuple(held) if isinstance(held, list) else held) == shown
            # ...and what a plugin was given through the flat keys, for plugin sections.
            if cls in plugin_sections():
                assert held == getattr(_through_flat_keys(cls, flat), option)
            if option in chosen[cls.__name__] and not isinstance(held, dict):
                assert held == chosen[cls.__name__][option]
    store.reset()


def test_a_snapshot_is_the_same_object_until_the_configuration_changes() -> None:
    first = store.snapshot()
    assert store.snapshot() is first
    config.Local.max_concurrent = 3
    second = store.snapshot()
    assert second is not first
    assert second[Local].max_concurrent == 3
    assert first[Local].max_concurrent != 3 or first[Local] is not second[Local]


def test_a_snapshot_refuses_assignments_and_a_change_leaves_it_as_it_was() -> None:
    first = store.snapshot()
    before = first[Local].max_concurrent
    with pytest.raises(ConfigError) as err:
        first[Local].max_concurrent = before + 1  # type: ignore[misc]
    assert str(err.value) == (
        "config[Local] is a snapshot and does not change; set config.Local.max_concurrent = "
        "... instead"
    )
    config.Local.max_concurrent = before + 1
    assert first[Local].max_concurrent == before
    assert store.snapshot()[Local].max_concurrent == before + 1


def test_part_of_a_snapshot_holds_only_the_sections_asked_for() -> None:
    config.Notifier.password = "secret"
    part = store.snapshot().only((Local,))
    assert list(part) == [Local]
    assert Notifier not in part
    with pytest.raises(ConfigError, match=r"config\[Notifier\]: not a section this "):
        part[Notifier]
    assert store.snapshot().only((Local,)) is part  # asked again: the same part


def test_a_replaced_snapshot_validates_and_keeps_the_rest() -> None:
    first = store.snapshot()
    second = first.replaced({Monitor: {"max_interval": 9.0}})
    assert second[Monitor].max_interval == 9.0
    assert second[Local] is first[Local]
    assert first[Monitor].max_interval == 2.0
    with pytest.raises(ConfigError, match=r"Monitor\.max_interval"):
        first.replaced({Monitor: {"max_interval": "soon"}})
    with pytest.raises(ConfigError, match="Monitor has no option 'max_intervl'"):
        first.replaced({Monitor: {"max_intervl": 1.0}})


def test_defaults_of_sections_are_their_declared_defaults() -> None:
    snapshot = ConfigSnapshot.defaults((Local, Monitor))
    assert snapshot[Monitor].max_interval == 2.0
    assert snapshot[Local].idle_exit == 30.0


def test_the_configuring_environment_variables_are_read_in_one_module() -> None:
    root = Path(__file__).resolve().parents[1]
    reading = re.compile(r"(environ|getenv)\W*(get\W*)?[\"'](GANGA_DIR|GANGA_REPOSITORY_MODE|XDG_)")
    readers = sorted(
        str(path.relative_to(root))
        for folder in ("ganga_like", "plugins")
        for path in (root / folder).rglob("*.py")
        if reading.search(path.read_text()) and path.name != "environment.py"
    )
    assert readers == [], "read them through ganga_like.config.environment"
    assert set(ENVIRONMENT) == {"GANGA_DIR", "GANGA_REPOSITORY_MODE", "GANGA_REPOSITORY"}


def test_settings_and_the_configuration_take_the_gangadir_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GANGA_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("GANGA_REPOSITORY_MODE", "embedded")
    assert store.snapshot()[Repository].gangadir == str(tmp_path / "env")
    assert store.snapshot()[Repository].mode == "embedded"
    assert (Settings().gangadir, Settings().repository_mode) == (tmp_path / "env", "embedded")
