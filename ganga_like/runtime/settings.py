"""Runtime settings with their defaults, read from the environment where it applies."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ganga_like.repository.storage import StorageOptions

__all__ = ["Settings"]


def _default_gangadir() -> Path:
    return Path(os.environ.get("GANGA_DIR") or Path.home() / "gangadir")


@dataclass
class Settings:
    gangadir: Path = field(default_factory=_default_gangadir)
    # "shared" (default): through the repository's server, started on demand, so any
    # number of sessions use one gangadir at once; "embedded" only when asked for.
    repository_mode: str = field(
        default_factory=lambda: os.environ.get("GANGA_REPOSITORY_MODE", "shared"))
    # Monitoring: fastest poll while things change, slowest when nothing does.
    monitor_min_interval: float = 0.05
    monitor_max_interval: float = 2.0
    monitoring: bool = True
    # Local backend: how many subjobs run at once (default: the number of cores).
    local_max_concurrent: int = field(default_factory=lambda: os.cpu_count() or 1)
    local_idle_exit: float = 30.0
    # Shared repository mode (docs/repository.md). The server listens on a private Unix
    # socket in the gangadir; "HOST:PORT" makes it listen on TCP instead (explicit only).
    zeo_address: str = ""
    zeo_idle_exit: float = 60.0  # seconds the server stays up with no session
    zeo_cache_mb: float = 100.0  # each session's persistent client cache
    # Automatic packing when the repository is opened: at this file size (0: never), once
    # it grew by half since the last pack, keeping this many days of history.
    pack_threshold_mb: float = 256.0
    pack_keep_days: float = 7.0
    # Monitor lease: the longest a lease left by a dead holder stays untaken (seconds).
    monitor_lease_timeout: float = 2.0
    # How a master's status is derived while some subjobs wait and others run
    # (model.status.MASTER_STATUS_ORDERS): "running_first" or the splitting design's
    # "submitted_first".
    master_status_order: str = "running_first"

    def storage_options(self) -> StorageOptions:
        return StorageOptions(
            address=self.zeo_address,
            idle_exit=self.zeo_idle_exit,
            cache_mb=self.zeo_cache_mb,
            pack_threshold_mb=self.pack_threshold_mb,
            pack_keep_days=self.pack_keep_days,
        )

    def backend_settings(self) -> dict[str, Any]:
        return {
            "local_max_concurrent": self.local_max_concurrent,
            "local_idle_exit": self.local_idle_exit,
        }
