"""The layered configuration of this process: defaults < config file < environment <
command line < runtime changes, validated by the section classes.

1. the defaults the sections declare (:mod:`ganga_like.config.sections`, and each plugin's
   own sections);
2. the config file, ``$XDG_CONFIG_HOME/ganga_like/ganga_config.py`` (or ``.json``;
   ``~/.config`` when XDG_CONFIG_HOME is unset). A missing file means defaults;
3. the environment: ``GANGA_DIR``, ``GANGA_REPOSITORY_MODE``, ``GANGA_REPOSITORY`` (a one-off
   ``GANGA_DIR=/tmp/x ganga`` must win over the file);
4. the command line, ``--Section.option=value`` (given by the ``ganga`` application); a
   list of fixed choices or numbers is written with commas, ``--Display.columns=fqid,status``,
   here and in the other layers alike (:mod:`ganga_like.config.lists`);
5. at runtime, assignments through the GPI ``config`` object
   (``config.Monitor.max_interval = 5``), validated like everything else.

The validated sections are handed on as one frozen :class:`ConfigSnapshot` keyed by
section class (:meth:`ConfigStore.snapshot`). This module knows nothing of sessions: an
open session follows the store (:meth:`ConfigStore.follow`) and is given the new snapshot
after each runtime change.
"""

from __future__ import annotations

import copy
import difflib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from traitlets import TraitError
from traitlets.config import Config, Configurable
from traitlets.config.loader import DeferredConfig, LazyConfigValue

from ganga_like.config import plugins
from ganga_like.config.environment import config_home, environment_values, fingerprint
from ganga_like.config.lists import Where, refusal, split_commas
from ganga_like.config.mistyped import closest_section, mistyped_sections
from ganga_like.config.numbers import accepts, number_problem
from ganga_like.config.sections import AFTER_PLUGINS, BEFORE_PLUGINS
from ganga_like.config.snapshot import ConfigSnapshot, trait_refusal
from ganga_like.errors import ConfigError, safe_repr, shown_failed

__all__ = [
    "CONFIG_NAME",
    "ConfigStore",
    "all_sections",
    "config_dir",
    "default_config_file",
    "environment_config",
    "load_file",
    "options",
    "section_class",
    "section_names",
    "store",
    "unknown_option",
    "unknown_section",
]

CONFIG_NAME = "ganga_config"

log = logging.getLogger("ganga_like")

# Given each new snapshot a runtime change makes, with the section and option changed.
Follower = Callable[[ConfigSnapshot, type[Configurable], str], None]


def all_sections() -> tuple[type[Configurable], ...]:
    """Every section, core and plugins', in the order they are shown."""
    return (*BEFORE_PLUGINS, *plugins.plugin_sections(), *AFTER_PLUGINS)


def section_names() -> list[str]:
    return [cls.__name__ for cls in all_sections()]


def section_class(name: str) -> type[Configurable]:
    """The section class called ``name``; a ConfigError naming the closest one, or why a
    plugin's section could not be loaded."""
    for cls in all_sections():
        if cls.__name__ == name:
            return cls
    raise ConfigError(unknown_section(name))


def options(cls: type[Configurable]) -> dict[str, Any]:
    """The config traits of a section, in declaration order (those a base section
    declares first, as a batch backend's section inherits the batch base's)."""
    traits: dict[str, Any] = cls.class_traits(config=True)
    order = [n for klass in reversed(cls.__mro__) for n in vars(klass) if n in traits]
    return {n: traits[n] for n in dict.fromkeys(order)}


# -- where the file is ----------------------------------------------------------------


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/ganga_like``."""
    return config_home() / "ganga_like"


def default_config_file() -> Path:
    return config_dir() / f"{CONFIG_NAME}.py"


def load_file(path: Path) -> Config:
    """The config in ``path`` (.py or .json); an empty Config if it does not exist."""
    from traitlets.config.loader import (
        ConfigFileNotFound,
        JSONFileConfigLoader,
        PyFileConfigLoader,
    )

    loader_class = JSONFileConfigLoader if path.suffix == ".json" else PyFileConfigLoader
    loader = loader_class(path.name, path=str(path.parent))
    try:
        loaded: Config = loader.load_config()
    except ConfigFileNotFound:
        return Config()
    except Exception as exc:  # the user's file: any error is theirs, reported in one line
        raise ConfigError(f"config file {path}: {type(exc).__name__}: {exc}") from exc
    _refuse_sections_without_options(path, loaded)
    return loaded


def _refuse_sections_without_options(path: Path, loaded: Config) -> None:
    """A section given a value instead of options (``{"Repository": ""}`` in JSON,
    ``c.Repository = 3`` in Python) is one line naming it: read as a section later, it
    would end the command in a traceback."""
    for name, value in loaded.items():
        if name[:1].isupper() and not isinstance(value, dict):
            raise ConfigError(
                f"config file {path}: {name} is a section and holds options "
                f"(e.g. c.{name}.option = value), not {safe_repr(value)}"
            )


def environment_config() -> Config:
    """The environment's layer (:mod:`ganga_like.config.environment`)."""
    cfg = Config()
    for (section, option), value in environment_values().items():
        cfg[section][option] = value
    return cfg


# -- the store ------------------------------------------------------------------------


class ConfigStore:
    """The layered configuration of this process and the section objects built from it."""

    def __init__(self) -> None:
        # Who is given each new snapshot a runtime change makes (open sessions, the
        # shell), and whether it has fixed the options tagged ``runtime=False`` (a
        # session opened its repository with them). Kept across :meth:`reset`.
        self._followers: list[tuple[Follower, bool]] = []
        self.reset()

    def reset(self) -> None:
        """Back to defaults and the user's file (tests; a fresh ``ganga`` command)."""
        self._explicit_file: Path | None = None
        self._file: Config | None = None
        self.files: list[Path] = []
        self._command_line = Config()
        self._runtime = Config()
        self._version = 0
        self._built: tuple[Any, dict[str, Any]] | None = None
        self._snapshot: tuple[dict[str, Any], ConfigSnapshot] | None = None

    def follow(self, follower: Follower, *, fixes_startup_options: bool = False) -> None:
        """Call ``follower(snapshot, section class, option)`` with the new snapshot after
        each runtime change. A follower that ``fixes_startup_options`` (an open session)
        makes the options tagged ``runtime=False`` refuse changes until it leaves."""
        self._followers.append((follower, fixes_startup_options))

    def unfollow(self, follower: Follower) -> None:
        self._followers = [(f, fixes) for f, fixes in self._followers if f != follower]

    def _startup_options_fixed(self) -> bool:
        return any(fixes for _, fixes in self._followers)

    # -- layers ----------------------------------------------------------------------

    def use_command_line(self, command_line: Config, config_file: Path | None = None) -> None:
        """The ``ganga`` command's layer: its ``--Section.option`` values, and the config
        file it was told to use (None: the default place)."""
        self._command_line = command_line
        self._explicit_file = config_file
        self._file = None
        self._built = None

    def file_config(self) -> Config:
        if self._file is None:
            if self._explicit_file is not None:
                if not self._explicit_file.exists():
                    raise ConfigError(f"no config file {self._explicit_file}")
                paths = [self._explicit_file]
            else:
                base = config_dir() / CONFIG_NAME
                paths = [base.with_suffix(".py"), base.with_suffix(".json")]
            cfg = Config()
            self.files = []
            for path in paths:
                if path.exists():
                    loaded = load_file(path)
                    _warn_of_mistyped_sections(path, loaded)
                    cfg.merge(loaded)
                    self.files.append(path)
            self._file = cfg
        return self._file

    def layers(self) -> Iterator[tuple[str, Config]]:
        """(source, config) from lowest to highest precedence."""
        file_cfg = self.file_config()  # also finds out which files there are
        yield "config file " + ", ".join(str(p) for p in self.files), file_cfg
        yield "environment", environment_config()
        yield "command line", self._command_line
        yield "config", self._runtime

    def merged(self) -> Config:
        """Everything, merged: what IPython and the app are configured with."""
        cfg = Config()
        for _source, layer in self.layers():
            # Config.merge adopts sub-sections by reference and merges into them later:
            # without a copy, merging the command line would write into the file's layer.
            cfg.merge(copy.deepcopy(layer))
        return cfg

    # -- sections --------------------------------------------------------------------

    def sections(self) -> dict[str, Any]:
        """One validated object per section (rebuilt when a layer changed)."""
        every = all_sections()
        key = (
            self._version,
            id(self.file_config()),
            id(self._command_line),
            fingerprint(),
            every,
        )
        if self._built is None or self._built[0] != key:
            built = {cls.__name__: self._build(cls) for cls in every}
            self._check_together(built)
            self._built = (key, built)
        return self._built[1]

    def _build(self, cls: type[Configurable]) -> Configurable:
        section = cls()
        name = cls.__name__
        known = options(cls)
        for source, layer in self.layers():
            if name not in layer:
                continue
            for option, raw in layer[name].items():
                if option not in known:
                    raise ConfigError(f"{source}: {unknown_option(name, option)}")
                trait = known[option]
                value = split_commas(trait, raw)  # "fqid,status" is a list of two
                if isinstance(value, DeferredConfig):
                    value = value.get_value(trait)
                elif isinstance(value, LazyConfigValue):
                    value = value.get_value(getattr(section, option))
                problem = number_problem(trait, value)
                if problem is not None:
                    raise ConfigError(f"{source}: {name}.{option}: {problem}")
                try:
                    setattr(section, option, value)
                except TraitError as exc:
                    why = refusal(name, option, trait, value, trait_refusal(exc), _where(source))
                    raise ConfigError(f"{source}: {name}.{option}: {why}") from None
                except Exception as exc:
                    raise ConfigError(
                        f"{source}: {name}.{option}: {_odd(trait, value, exc)}"
                    ) from None
        return section

    @staticmethod
    def _check_together(sections: dict[str, Any]) -> None:
        monitor = sections["Monitor"]
        if monitor.min_interval > monitor.max_interval:
            raise ConfigError(
                f"Monitor.min_interval ({monitor.min_interval}) is larger than "
                f"Monitor.max_interval ({monitor.max_interval})"
            )

    def snapshot(self) -> ConfigSnapshot:
        """Every section, validated and frozen, keyed by its class: what sessions and
        plugin contexts carry. The same object until a layer changes; then a new one."""
        sections = self.sections()
        if self._snapshot is None or self._snapshot[0] is not sections:
            by_class = {cls: sections[cls.__name__] for cls in all_sections()}
            self._snapshot = (sections, ConfigSnapshot(by_class))
        return self._snapshot[1]

    def section(self, name: str) -> Any:
        """The section object (``store.section("Monitor").max_interval``)."""
        return self.sections()[name]

    def value(self, section: str, option: str) -> Any:
        return getattr(self.section(section), option)

    # -- runtime changes -------------------------------------------------------------

    def set(self, section: str, option: str, value: Any) -> None:
        """Validate and apply ``section.option = value`` now (the GPI ``config``)."""
        cls = section_class(section)
        known = options(cls)
        if option not in known:
            raise ConfigError(unknown_option(section, option))
        if self._startup_options_fixed() and known[option].metadata.get("runtime") is False:
            raise ConfigError(
                f"{section}.{option} cannot change while the repository is open; start "
                f"ganga with --{section}.{option}=... (or set it in "
                f"{default_config_file()})"
            )
        trial = self.sections()[section]
        probe = cls()
        for name in known:
            probe.set_trait(name, getattr(trial, name))
        value = split_commas(known[option], value)
        problem = number_problem(known[option], value)
        if problem is not None:
            raise ConfigError(f"{section}.{option}: {problem}")
        try:
            setattr(probe, option, value)
        except TraitError as exc:
            why = refusal(section, option, known[option], value, trait_refusal(exc), "config")
            raise ConfigError(f"{section}.{option}: {why}") from None
        except Exception as exc:
            raise ConfigError(f"{section}.{option}: {_odd(known[option], value, exc)}") from None
        previous = self._runtime[section].get(option, _UNSET)
        self._runtime[section][option] = getattr(probe, option)
        self._version += 1
        try:
            self.sections()  # the options checked together (Monitor's intervals)
        except ConfigError:
            if previous is _UNSET:
                del self._runtime[section][option]
            else:
                self._runtime[section][option] = previous
            self._version += 1
            raise
        snapshot = self.snapshot()
        for follower, _fixes in list(self._followers):
            follower(snapshot, cls, option)


_UNSET: Any = object()


def unknown_section(name: str) -> str:
    if not isinstance(name, str):  # config[3]
        return f"a configuration section is named by a string (e.g. 'Local'), not {safe_repr(name)}"
    failed = plugins.failures()
    if name in failed:
        return f"configuration section {name!r} could not be loaded: {failed[name]}"
    names = section_names()
    close = closest_section(name, names)
    hint = f"; did you mean {close!r}?" if close else ""
    return f"no configuration section {name!r}{hint} (sections: {', '.join(names)})"


def _warn_of_mistyped_sections(path: Path, loaded: Config) -> None:
    """One line for each section of the file that looks like a typo of one of ours: its
    settings would otherwise be ignored without a word. A name in lower case counts too:
    traitlets takes ``c.local.x = 1`` for no section at all and drops it."""
    sections = list(loaded)
    failed = plugins.failures()  # their own warning was given already
    mistyped = mistyped_sections([n for n in sections if n not in failed], section_names())
    for name, meant in mistyped.items():
        log.warning(
            "ganga: config file %s: no configuration section %r; did you mean %r? "
            "(its settings are ignored)",
            path,
            name,
            meant,
        )


def unknown_option(section: str, option: str) -> str:
    if not isinstance(option, str):  # config.Local[3]
        return f"{section}: an option is named by a string, not {safe_repr(option)}"
    known = list(options(section_class(section)))
    close = difflib.get_close_matches(option, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{section} has no option {option!r}{hint}"


def _odd(trait: Any, value: Any, exc: Exception) -> str:
    """The refusal of a value whose own methods raised while it was checked (its repr()
    for traitlets' message, its __eq__...): one line, never its traceback."""
    shown = safe_repr(value)
    if not shown_failed(value):
        shown += f" (checking it raised {type(exc).__name__})"
    return f"expected {accepts(trait)}, got {shown}"


def _where(source: str) -> Where:
    # The environment sets no list or dict option; its values read as the command line's.
    if source.startswith("config file"):
        return "config file"
    return "config" if source == "config" else "command line"


store = ConfigStore()
