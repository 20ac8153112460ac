"""Runtime settings: what a session is opened with, built from the configuration.

The core fields are the core sections' options (:data:`SETTINGS_FIELDS` says which feeds
which) with the sections' defaults, so the two never drift apart. The options of the
plugins' sections (``Local.max_concurrent``, ``Slurm.poll_interval``) travel in
``plugin_options`` under flat keys (``local_max_concurrent``): the core names no plugin, and
backends receive them as their typed section (``SubmitContext.config_for``). Such a key is
also accepted as a keyword and read as an attribute (``Settings(local_max_concurrent=2)``,
``settings.local_max_concurrent``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ganga_like.config.environment import environment_values
from ganga_like.config.sections import Jobs, Monitor, Repository, default
from ganga_like.config.store import (
    ConfigStore,
    option_key,
    options,
    store,
)
from ganga_like.repository.options import StorageOptions

__all__ = ["SETTINGS_FIELDS", "Settings", "configured_settings", "plugin_option_keys"]

# Which Settings field each core option feeds (the others are read by the shell directly).
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
    ("Jobs", "master_status_order"): "master_status_order",
}


def _default_gangadir() -> Path:
    return Path(environment_values().get(("Repository", "gangadir")) or Path.home() / "gangadir")


def _default_mode() -> str:
    return environment_values().get(("Repository", "mode")) or str(default(Repository, "mode"))


@dataclass
class _Fields:
    gangadir: Path = field(default_factory=_default_gangadir)
    # "shared" (default): through the repository's server, started on demand, so any
    # number of sessions use one gangadir at once; "embedded" only when asked for.
    repository_mode: str = field(default_factory=_default_mode)
    # Monitoring: fastest poll while things change, slowest when nothing does.
    monitor_min_interval: float = default(Monitor, "min_interval")
    monitor_max_interval: float = default(Monitor, "max_interval")
    monitoring: bool = default(Monitor, "enabled")
    # Shared repository mode (docs/repository.md). The server listens on a private Unix
    # socket in the gangadir; "HOST:PORT" makes it listen on TCP instead (explicit only).
    zeo_address: str = default(Repository, "server_address")
    zeo_idle_exit: float = default(Repository, "server_idle_exit")
    zeo_cache_mb: float = default(Repository, "client_cache_mb")
    # Automatic packing when the repository is opened: at this file size (0: never), once
    # it grew by half since the last pack, keeping this many days of history.
    pack_threshold_mb: float = default(Repository, "pack_threshold_mb")
    pack_keep_days: float = default(Repository, "pack_keep_days")
    # Monitor lease: the longest a lease left by a dead holder stays untaken (seconds).
    monitor_lease_timeout: float = default(Monitor, "lease_timeout")
    # How a master's status is derived while some subjobs wait and others run
    # (config.choices.MASTER_STATUS_ORDERS).
    master_status_order: str = default(Jobs, "master_status_order")
    # The plugins' sections' options, by flat key; absent ones take their section's default.
    plugin_options: dict[str, Any] = field(default_factory=dict)


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(_Fields))


class Settings(_Fields):
    """A session's settings (a dataclass: ``dataclasses.replace`` and ``asdict`` work)."""

    def __init__(self, **values: Any) -> None:
        extra = {k: values.pop(k) for k in list(values) if k not in _FIELD_NAMES}
        keys = plugin_option_keys() if extra else {}
        for key in extra:
            if key not in keys:
                raise TypeError(f"Settings got an unexpected keyword argument {key!r}")
        super().__init__(**values)
        self.plugin_options.update(extra)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields: a plugin option's flat key.
        if name.startswith("_") or name == "plugin_options":
            raise AttributeError(name)
        keys = plugin_option_keys()
        if name not in keys:
            raise AttributeError(f"Settings has no field or plugin option {name!r}")
        found = self.plugin_options.get(name)
        if found is not None:
            return found
        section, option = keys[name]
        return default(section, option)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELD_NAMES and not name.startswith("_") and name in plugin_option_keys():
            self.plugin_options[name] = value
        else:
            object.__setattr__(self, name, value)

    def storage_options(self) -> StorageOptions:
        return StorageOptions(
            address=self.zeo_address,
            idle_exit=self.zeo_idle_exit,
            cache_mb=self.zeo_cache_mb,
            pack_threshold_mb=self.pack_threshold_mb,
            pack_keep_days=self.pack_keep_days,
        )

    def backend_settings(self) -> dict[str, Any]:
        """What backends receive (``SubmitContext.settings``): the plugin options by flat
        key; ``SubmitContext.config_for`` turns them into the backend's typed section."""
        return dict(self.plugin_options)


def plugin_option_keys() -> dict[str, tuple[Any, str]]:
    """Flat key -> (plugin section class, option), for every plugin section's option."""
    from ganga_like.config.plugins import plugin_sections

    return {
        option_key(cls.__name__, option): (cls, option)
        for cls in plugin_sections()
        for option in options(cls)
    }


def configured_settings(source: ConfigStore | None = None) -> Settings:
    """The Settings the configuration describes (file, environment, command line, runtime
    changes); ``source`` is the process's store unless given."""
    from ganga_like.config.plugins import plugin_sections

    sections = (source or store).sections()
    values: dict[str, Any] = {
        fld: getattr(sections[section], option)
        for (section, option), fld in SETTINGS_FIELDS.items()
    }
    values["gangadir"] = Path(values["gangadir"]).expanduser()
    plugin = {
        option_key(cls.__name__, option): getattr(sections[cls.__name__], option)
        for cls in plugin_sections()
        for option in options(cls)
    }
    return Settings(plugin_options=plugin, **values)
