"""Configuration sections that plugins declare, through the ``ganga_like.config`` group.

Each entry point names one ``traitlets.config.Configurable`` class; its name is the
section's name (``Slurm = "ganga_like_slurm.settings:Slurm"`` gives ``c.Slurm.poll_interval``
in the config file and ``config.Slurm.poll_interval`` at runtime). The core names no plugin:
deleting a plugin removes its section with it.

A section that fails to import, or is not a section, is remembered with its error and
reported (once, as a warning, and whenever someone asks for it); the other sections and the
start-up carry on, and the config file's values for it are left unread.
"""

from __future__ import annotations

import functools
import logging

from traitlets.config import Configurable

from ganga_like.config import installed
from ganga_like.config.sections import AFTER_PLUGINS, BEFORE_PLUGINS

__all__ = ["ENTRY_POINT_GROUP", "failures", "plugin_sections", "reset"]

ENTRY_POINT_GROUP = "ganga_like.config"

log = logging.getLogger("ganga_like")

_failed: dict[str, str] = {}
_CORE_NAMES = {cls.__name__ for cls in (*BEFORE_PLUGINS, *AFTER_PLUGINS)}


@functools.cache
def plugin_sections() -> tuple[type[Configurable], ...]:
    """Every plugin section that loads, ordered by name."""
    found: dict[str, type[Configurable]] = {}
    for ep in sorted(installed.entry_points(ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        if ep.name in found or ep.name in _failed:
            continue  # the first registration of a name wins, as for plugins
        if ep.name in _CORE_NAMES:
            _fail(ep.name, f"{ep.value}: a core section has this name")
            continue
        try:
            cls = ep.load()
        except Exception as exc:  # any import-time failure is the plugin's, not ours
            _fail(ep.name, f"{ep.value}: {type(exc).__name__}: {exc}")
            continue
        if not (isinstance(cls, type) and issubclass(cls, Configurable)):
            _fail(ep.name, f"{ep.value} is not a traitlets Configurable class")
        elif cls.__name__ != ep.name:
            # traitlets reads c.<class name>: another name would never be configured.
            _fail(ep.name, f"{ep.value} is a class named {cls.__name__!r}, not {ep.name!r}")
        else:
            found[ep.name] = cls
    return tuple(found.values())


def _fail(name: str, reason: str) -> None:
    _failed[name] = reason
    log.warning(
        "ganga: configuration section %s could not be loaded (%s); its settings are ignored",
        name,
        reason,
    )


def failures() -> dict[str, str]:
    """Plugin sections that could not be loaded: name -> why."""
    plugin_sections()
    return dict(_failed)


def reset() -> None:
    """Look for plugin sections again (e.g. after installing a plugin at runtime)."""
    installed.reset()
    plugin_sections.cache_clear()
    _failed.clear()
