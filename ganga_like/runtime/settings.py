"""What a session is opened with: where its repository is and how it is opened.

The fields are core sections' options (:data:`SETTINGS_FIELDS` says which feeds which),
with the sections' defaults, so the two never drift apart. A session puts them into the
configuration snapshot it carries (:meth:`Settings.applied_to`), where the monitor and
everything else read them; the plugins' sections are in that snapshot alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traitlets.config import Configurable

from ganga_like.config.environment import environment_values
from ganga_like.config.sections import Jobs, Monitor, Repository, default
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import ConfigStore, store
from ganga_like.repository.options import StorageOptions

__all__ = ["SETTINGS_FIELDS", "Settings", "configured_settings", "settings_of"]

# Which Settings field each core option feeds (the others are read by the shell directly).
SETTINGS_FIELDS: dict[tuple[type[Configurable], str], str] = {
    (Repository, "gangadir"): "gangadir",
    (Repository, "mode"): "repository_mode",
    (Repository, "url"): "repository_url",
    (Monitor, "enabled"): "monitoring",
    (Monitor, "min_interval"): "monitor_min_interval",
    (Monitor, "max_interval"): "monitor_max_interval",
    (Monitor, "lease_timeout"): "monitor_lease_timeout",
    (Repository, "server_address"): "zeo_address",
    (Repository, "server_idle_exit"): "zeo_idle_exit",
    (Repository, "client_cache_mb"): "zeo_cache_mb",
    (Repository, "pack_threshold_mb"): "pack_threshold_mb",
    (Repository, "pack_keep_days"): "pack_keep_days",
    (Jobs, "master_status_order"): "master_status_order",
}


def _default_gangadir() -> Path:
    return Path(environment_values().get(("Repository", "gangadir")) or Path.home() / "gangadir")


def _default_url() -> str:
    return environment_values().get(("Repository", "url")) or str(default(Repository, "url"))


def _default_mode() -> str:
    return environment_values().get(("Repository", "mode")) or str(default(Repository, "mode"))


@dataclass
class Settings:
    """A session's core settings (a dataclass: ``dataclasses.replace`` and ``asdict``
    work)."""

    gangadir: Path = field(default_factory=_default_gangadir)
    # "shared" (default): through the repository's server, started on demand, so any
    # number of sessions use one gangadir at once; "embedded" only when asked for.
    repository_mode: str = field(default_factory=_default_mode)
    # Where the jobs are stored: "" for <gangadir>/repository/Data.fs, or a
    # postgresql:// URI (ganga_like.repository.postgres).
    repository_url: str = field(default_factory=_default_url)
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
    # Not an option: a session of the jobs-table server (StorageOptions.follower).
    repository_follower: bool = False

    def storage_options(self) -> StorageOptions:
        return StorageOptions(
            address=self.zeo_address,
            idle_exit=self.zeo_idle_exit,
            cache_mb=self.zeo_cache_mb,
            pack_threshold_mb=self.pack_threshold_mb,
            pack_keep_days=self.pack_keep_days,
            follower=self.repository_follower,
        )

    def applied_to(self, config: ConfigSnapshot) -> ConfigSnapshot:
        """``config`` with these settings' options in place of its own."""
        values: dict[type[Configurable], dict[str, Any]] = {}
        for (section, option), name in SETTINGS_FIELDS.items():
            value = getattr(self, name)
            values.setdefault(section, {})[option] = (
                str(value) if isinstance(value, Path) else value
            )
        return config.replaced(values)


def settings_of(config: ConfigSnapshot) -> Settings:
    """The settings ``config`` describes."""
    values: dict[str, Any] = {
        name: getattr(config[section], option)
        for (section, option), name in SETTINGS_FIELDS.items()
    }
    values["gangadir"] = Path(values["gangadir"]).expanduser()
    return Settings(**values)


def configured_settings(source: ConfigStore | None = None) -> Settings:
    """The Settings the configuration describes (file, environment, command line, runtime
    changes); ``source`` is the process's store unless given."""
    return settings_of((source or store).snapshot())
