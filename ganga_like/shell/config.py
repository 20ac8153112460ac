"""Configuration: every setting is a ``config=True`` trait of one section class.

=============  ==============================  ==========================================
section        options                         feeds
=============  ==============================  ==========================================
Repository     gangadir, mode                  Settings.gangadir, Settings.repository_mode
Monitor        enabled, min_interval,          Settings.monitoring,
               max_interval                    Settings.monitor_min/max_interval
Local          max_concurrent, idle_exit       Settings.local_max_concurrent,
                                               Settings.local_idle_exit
Jobs           master_status_order             Settings.master_status_order
Display        columns, colours, ...           the shell's and notebook's tables
Shell          banner, prompt, toolbar, ...    the interactive shell
=============  ==============================  ==========================================

Values are layered, each layer overriding the ones before it:

1. the defaults declared here;
2. the config file, ``$XDG_CONFIG_HOME/ganga_like/ganga_config.py`` (or ``.json``;
   ``~/.config`` when XDG_CONFIG_HOME is unset). A missing file means defaults;
3. the environment: ``GANGA_DIR`` and ``GANGA_REPOSITORY_MODE`` (a one-off
   ``GANGA_DIR=/tmp/x ganga`` must win over the file);
4. the command line, ``--Section.option=value``;
5. at runtime, assignments through the GPI ``config`` object
   (``config.Monitor.max_interval = 5``), validated like everything else.

Scripts and notebooks get the same settings as the ``ganga`` command: the session opened on
first use takes them from here (see :func:`install`).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, validate
from traitlets.config import Config, Configurable
from traitlets.config.loader import DeferredConfig, LazyConfigValue

from ganga_like.errors import ConfigError
from ganga_like.gpi.display import COLUMNS
from ganga_like.model.status import MASTER_STATUS_ORDERS, Status
from ganga_like.repository.storage import MODES
from ganga_like.runtime import session as _session
from ganga_like.runtime.settings import Settings

__all__ = [
    "SECTIONS",
    "SETTINGS_FIELDS",
    "ConfigSection",
    "ConfigStore",
    "Display",
    "GPIConfig",
    "Jobs",
    "Local",
    "Monitor",
    "Repository",
    "Shell",
    "config",
    "config_dir",
    "default_config_file",
    "install",
    "store",
]

CONFIG_NAME = "ganga_config"


# -- the sections ---------------------------------------------------------------------


def _default(field: str, fallback: Any) -> Any:
    """The runtime default of a Settings field, so the two never drift apart (``fallback``
    while a field is not there yet, or is computed at run time)."""
    found = Settings.__dataclass_fields__.get(field)
    default = getattr(found, "default", dataclasses.MISSING)
    return fallback if default is dataclasses.MISSING else default


class Repository(Configurable):
    """Where jobs are stored and how the repository is opened (fixed while it is open)."""

    gangadir = Unicode(
        "~/gangadir",
        help="Directory of the job repository and the job workspaces. Environment: "
             "GANGA_DIR.",
    ).tag(config=True, runtime=False)
    mode = Enum(
        MODES, default_value="shared",
        help="How the repository is opened; the default needs no choosing: 'shared' (any "
             "number of shells, scripts, notebooks and the monitor daemon at once, through "
             "the repository's own server, started on demand; 'auto' is the same), "
             "'embedded' (this process alone, a little faster; another one gets a clear "
             "error) or 'readonly' (a snapshot, allowed beside the others). Environment: "
             "GANGA_REPOSITORY_MODE.",
    ).tag(config=True, runtime=False)
    server_address = Unicode(
        _default("zeo_address", ""),
        help="Where the shared-mode server listens: empty for a private Unix socket in "
             "the gangadir, or HOST:PORT for TCP.",
    ).tag(config=True, runtime=False)
    server_idle_exit = Float(
        _default("zeo_idle_exit", 60.0), min=0.0,
        help="Seconds the shared-mode server stays up with no session.",
    ).tag(config=True, runtime=False)
    client_cache_mb = Float(
        _default("zeo_cache_mb", 100.0), min=0.0,
        help="Size in MB of each session's persistent client cache in shared mode.",
    ).tag(config=True, runtime=False)
    pack_threshold_mb = Float(
        _default("pack_threshold_mb", 256.0), min=0.0,
        help="Pack the repository when it is opened, once its file is this large (MB) and "
             "has grown by half since the last pack; 0: never.",
    ).tag(config=True, runtime=False)
    pack_keep_days = Float(
        _default("pack_keep_days", 7.0), min=0.0,
        help="Days of history a pack keeps.",
    ).tag(config=True, runtime=False)


class Monitor(Configurable):
    """The monitoring thread that keeps job statuses current."""

    enabled = Bool(
        True, help="Run the monitoring thread (at runtime: starts or stops it).",
    ).tag(config=True)
    min_interval = Float(
        0.05, min=0.001,
        help="Seconds between polls while statuses are changing (less, down to 0.01, when "
             "the jobs still followed are expected to end sooner).",
    ).tag(config=True)
    max_interval = Float(
        2.0, min=0.001,
        help="Longest wait, in seconds, between polls when nothing changes (the wait "
             "doubles from min_interval up to this).",
    ).tag(config=True)
    lease_timeout = Float(
        _default("monitor_lease_timeout", 2.0), min=0.01,
        help="Longest, in seconds, a monitor lease left by a session that died stays "
             "untaken before another session's monitor takes over.",
    ).tag(config=True)


class Local(Configurable):
    """The Local backend: jobs on this machine."""

    max_concurrent = Int(
        os.cpu_count() or 1, min=1,
        help="How many Local subjobs run at once (default: the number of cores). Takes "
             "effect at the next submission.",
    ).tag(config=True)
    idle_exit = Float(
        30.0, min=0.0,
        help="Seconds the detached Local runner stays alive with nothing to do.",
    ).tag(config=True)


class Jobs(Configurable):
    """How jobs behave."""

    master_status_order = Enum(
        MASTER_STATUS_ORDERS, default_value=_default("master_status_order", "running_first"),
        help="How a split job's status follows its subjobs while some wait and others run: "
             "'running_first' (any running or completing subjob makes the master running, "
             "else any submitted one makes it submitted) or 'submitted_first' (the splitting "
             "design's order: any submitting or submitted subjob keeps the master submitted "
             "until the last one starts). Set it for every session alike (config file): "
             "the status index is written by whichever session sees the change.",
    ).tag(config=True, runtime=False)


DEFAULT_STATUS_COLOURS = {
    "new": "default",
    "submitting": "yellow",
    "submitted": "yellow",
    "running": "green",
    "completing": "green",
    "completed": "bright_blue",
    "failed": "red",
    "killed": "magenta",
}


def _is_colour(text: str) -> bool:
    # rich is imported only when someone actually sets colours.
    from rich.color import Color, ColorParseError

    try:
        Color.parse(text)
    except ColorParseError:
        return False
    return True


class Display(Configurable):
    """Job tables, job trees and progress in the shell and in notebooks."""

    columns = List(
        Enum(COLUMNS), default_value=list(COLUMNS), minlen=1,
        help=f"Columns of job tables, in order; any of: {', '.join(COLUMNS)}.",
    ).tag(config=True)
    colours = Bool(
        True, help="Colour statuses in tables, job trees and the toolbar.",
    ).tag(config=True)
    status_colours = Dict(
        value_trait=Unicode(), default_value=dict(DEFAULT_STATUS_COLOURS),
        help="Colour of each status: a colour name (green, bright_blue, ...), color(N) or "
             "#rrggbb. Statuses left out keep their default colour.",
    ).tag(config=True)
    max_rows = Int(
        100, min=4,
        help="Longest table shown in full; a longer one shows its first and last rows.",
    ).tag(config=True)

    @validate("status_colours")
    def _check_colours(self, proposal: Any) -> dict[str, str]:
        value: dict[str, str] = proposal["value"]
        labels = {s.label for s in Status}
        for key, colour in value.items():
            if key not in labels:
                raise TraitError(f"unknown status {key!r}; expected one of "
                                 f"{', '.join(sorted(labels))}")
            if not _is_colour(colour):
                raise TraitError(f"{colour!r} (for {key}) is not a colour name, color(N) "
                                 "or #rrggbb")
        return {**DEFAULT_STATUS_COLOURS, **value}


class Shell(Configurable):
    """The interactive ``ganga`` shell."""

    banner = Bool(
        True, help="Show the banner (version, gangadir, jobs by status) at start.",
    ).tag(config=True)
    prompt = Unicode(
        "ganga", help="The word in the input prompt: 'ganga [3]: '.",
    ).tag(config=True)
    confirm_exit = Bool(
        False, help="Ask before leaving on Ctrl-D. Jobs keep running after exit either way.",
    ).tag(config=True)
    toolbar = Bool(
        True, help="A bottom toolbar with live job counts by status and the monitor state.",
    ).tag(config=True)
    toolbar_interval = Float(
        1.0, min=0.1, help="Seconds between toolbar refreshes while the prompt waits.",
    ).tag(config=True)
    progress = Bool(
        True, help="Show the progress of long operations (submitting a split job, wait(), "
                   "bulk actions on slices): bars on a terminal, a live display in "
                   "notebooks.",
    ).tag(config=True)


SECTIONS: tuple[type[Configurable], ...] = (Repository, Monitor, Local, Jobs, Display, Shell)
_BY_NAME: dict[str, type[Configurable]] = {cls.__name__: cls for cls in SECTIONS}

# Which Settings field each option feeds (the others are read by the shell directly).
SETTINGS_FIELDS: dict[tuple[str, str], str] = {
    ("Repository", "gangadir"): "gangadir",
    ("Repository", "mode"): "repository_mode",
    ("Monitor", "enabled"): "monitoring",
    ("Monitor", "min_interval"): "monitor_min_interval",
    ("Monitor", "max_interval"): "monitor_max_interval",
    ("Monitor", "lease_timeout"): "monitor_lease_timeout",
    ("Repository", "server_address"): "zeo_address",
    ("Repository", "server_idle_exit"): "zeo_idle_exit",
    ("Repository", "client_cache_mb"): "zeo_cache_mb",
    ("Repository", "pack_threshold_mb"): "pack_threshold_mb",
    ("Repository", "pack_keep_days"): "pack_keep_days",
    ("Local", "max_concurrent"): "local_max_concurrent",
    ("Local", "idle_exit"): "local_idle_exit",
    ("Jobs", "master_status_order"): "master_status_order",
}

# Environment variables, in the layer between the file and the command line.
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "GANGA_DIR": ("Repository", "gangadir"),
    "GANGA_REPOSITORY_MODE": ("Repository", "mode"),
}


def options(cls: type[Configurable]) -> dict[str, Any]:
    """The config traits of a section, in declaration order."""
    traits: dict[str, Any] = cls.class_traits(config=True)
    order = [n for n in vars(cls) if n in traits]
    return {n: traits[n] for n in order}


# -- where the file is ----------------------------------------------------------------


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/ganga_like``; the XDG spec says to ignore a relative value."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "ganga_like"


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
    return loaded


def environment_config() -> Config:
    cfg = Config()
    for variable, (section, option) in ENVIRONMENT.items():
        value = os.environ.get(variable)
        if value:
            cfg[section][option] = value
    return cfg


# -- the store ------------------------------------------------------------------------


class ConfigStore:
    """The layered configuration of this process and the section objects built from it."""

    def __init__(self) -> None:
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
        self._listeners: list[Callable[[str, str, Any], None]] = []

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
                    cfg.merge(load_file(path))
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
        key = (self._version, id(self.file_config()), id(self._command_line),
               tuple(os.environ.get(v) for v in ENVIRONMENT))
        if self._built is None or self._built[0] != key:
            built = {name: self._build(cls) for name, cls in _BY_NAME.items()}
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
                value = raw
                if isinstance(value, DeferredConfig):
                    value = value.get_value(trait)
                elif isinstance(value, LazyConfigValue):
                    value = value.get_value(getattr(section, option))
                try:
                    setattr(section, option, value)
                except TraitError as exc:
                    raise ConfigError(f"{source}: {name}.{option}: {_short(exc)}") from None
        return section

    @staticmethod
    def _check_together(sections: dict[str, Any]) -> None:
        monitor = sections["Monitor"]
        if monitor.min_interval > monitor.max_interval:
            raise ConfigError(f"Monitor.min_interval ({monitor.min_interval}) is larger than "
                              f"Monitor.max_interval ({monitor.max_interval})")

    def section(self, name: str) -> Any:
        """The section object (``store.section("Monitor").max_interval``)."""
        return self.sections()[name]

    def value(self, section: str, option: str) -> Any:
        return getattr(self.section(section), option)

    # -- Settings --------------------------------------------------------------------

    def settings(self) -> Settings:
        """The runtime Settings these values describe."""
        sections = self.sections()
        known = {f.name for f in dataclasses.fields(Settings)}
        values: dict[str, Any] = {
            field: getattr(sections[section], option)
            for (section, option), field in SETTINGS_FIELDS.items() if field in known}
        values["gangadir"] = Path(values["gangadir"]).expanduser()
        return Settings(**values)

    # -- runtime changes -------------------------------------------------------------

    def set(self, section: str, option: str, value: Any) -> None:
        """Validate and apply ``section.option = value`` now (the GPI ``config``)."""
        cls = _BY_NAME.get(section)
        if cls is None:
            raise ConfigError(unknown_section(section))
        known = options(cls)
        if option not in known:
            raise ConfigError(unknown_option(section, option))
        live = _session.existing_session()
        if live is not None and known[option].metadata.get("runtime") is False:
            raise ConfigError(
                f"{section}.{option} cannot change while the repository is open; start "
                f"ganga with --{section}.{option}=... (or set it in "
                f"{default_config_file()})")
        trial = self.sections()[section]
        probe = cls()
        for name in known:
            probe.set_trait(name, getattr(trial, name))
        try:
            setattr(probe, option, value)
        except TraitError as exc:
            raise ConfigError(f"{section}.{option}: {_short(exc)}") from None
        previous = self._runtime[section].get(option, _UNSET)
        self._runtime[section][option] = getattr(probe, option)
        self._version += 1
        try:
            new_settings = self.settings()
        except ConfigError:
            if previous is _UNSET:
                del self._runtime[section][option]
            else:
                self._runtime[section][option] = previous
            self._version += 1
            raise
        if live is not None:
            _apply_to_session(live, new_settings, section, option)
        for listener in list(self._listeners):
            listener(section, option, getattr(probe, option))

    def on_change(self, listener: Callable[[str, str, Any], None]) -> None:
        """Call ``listener(section, option, value)`` after each runtime change."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str, str, Any], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)


_UNSET: Any = object()


def _apply_to_session(session: _session.Session, settings: Settings, section: str,
                      option: str) -> None:
    field = SETTINGS_FIELDS.get((section, option))
    if field is None or not hasattr(session.settings, field):
        return
    # The monitor and the backends read session.settings each time: updating the
    # object is enough for the next poll or submission to use the new value.
    setattr(session.settings, field, getattr(settings, field))
    if field == "monitoring":
        if settings.monitoring:
            session.monitor.start()
        else:
            session.monitor.stop()
    session.poke_monitor()


def unknown_section(name: str) -> str:
    close = difflib.get_close_matches(name, list(_BY_NAME), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no configuration section {name!r}{hint} (sections: {', '.join(_BY_NAME)})"


def unknown_option(section: str, option: str) -> str:
    known = list(options(_BY_NAME[section]))
    close = difflib.get_close_matches(option, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{section} has no option {option!r}{hint}"


def _short(exc: TraitError) -> str:
    # traitlets says "The 'x' trait of a Monitor instance expected a float, not ..."; the
    # option is named by the caller, so keep what follows "instance".
    text = str(exc)
    found = re.search(r" instance (.*)$", text, re.S)
    return found.group(1).rstrip(".") if found else text


store = ConfigStore()


# -- the GPI object -------------------------------------------------------------------


class ConfigSection:
    """One section of the configuration: read and assign its options (validated)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, option: str) -> Any:
        name = object.__getattribute__(self, "_name")
        if option not in options(_BY_NAME[name]):
            raise ConfigError(unknown_option(name, option))
        value = store.value(name, option)
        # A copy: changing a returned list in place must not bypass validation.
        if isinstance(value, list):
            return tuple(value)
        if isinstance(value, dict):
            return dict(value)
        return value

    def __setattr__(self, option: str, value: Any) -> None:
        store.set(object.__getattribute__(self, "_name"), option, value)

    def __dir__(self) -> list[str]:
        return list(options(_BY_NAME[object.__getattribute__(self, "_name")]))

    def __repr__(self) -> str:
        return describe(object.__getattribute__(self, "_name"))


class GPIConfig:
    """The settings of this session: ``config.Monitor.max_interval = 5``.

    Sections: Repository, Monitor, Local, Jobs, Display, Shell. Every assignment is validated
    and takes effect at once (Repository options only before the repository is opened).
    ``config`` alone lists every option with its value and help.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> ConfigSection:
        if name not in _BY_NAME:
            raise ConfigError(unknown_section(name))
        return ConfigSection(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise ConfigError(f"set an option, not a section: config.{name}.<option> = value")

    def __dir__(self) -> list[str]:
        return list(_BY_NAME)

    def __repr__(self) -> str:
        return "\n\n".join(describe(name) for name in _BY_NAME)


def describe(section: str) -> str:
    """A section's options, values and help, as text."""
    cls = _BY_NAME[section]
    lines = [f"[{section}] {cls.__doc__}"]
    for option, trait in options(cls).items():
        lines.append(f"  {option} = {store.value(section, option)!r}")
        lines.append(f"      {trait.help}")
    return "\n".join(lines)


config = GPIConfig()


def install() -> None:
    """Sessions opened on first use take their settings from this configuration."""
    _session.set_settings_factory(store.settings)
