"""Runtime settings with their defaults, read from the environment where it applies."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Settings"]


def _default_gangadir() -> Path:
    return Path(os.environ.get("GANGA_DIR") or Path.home() / "gangadir")


@dataclass
class Settings:
    gangadir: Path = field(default_factory=_default_gangadir)
    repository_mode: str = field(
        default_factory=lambda: os.environ.get("GANGA_REPOSITORY_MODE", "embedded"))
    # Monitoring: fastest poll while things change, slowest when nothing does.
    monitor_min_interval: float = 0.05
    monitor_max_interval: float = 2.0
    monitoring: bool = True
    # Local backend: how many subjobs run at once (default: the number of cores).
    local_max_concurrent: int = field(default_factory=lambda: os.cpu_count() or 1)
    local_idle_exit: float = 30.0

    def backend_settings(self) -> dict[str, Any]:
        return {
            "local_max_concurrent": self.local_max_concurrent,
            "local_idle_exit": self.local_idle_exit,
        }
