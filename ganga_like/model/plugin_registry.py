"""Finding plugin classes through the ``ganga_like.plugins`` entry-point group.

Built-in plugins register exactly as a third-party package would, so the core never imports
a plugin by name. A plugin that fails to import is remembered with its error and reported
only when someone asks for it: one broken plugin never stops the others from loading.
"""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Any

from ganga_like.config import installed
from ganga_like.errors import PluginError, safe_repr

__all__ = [
    "ENTRY_POINT_GROUP",
    "Unavailable",
    "available",
    "find",
    "known_names",
    "load_failures",
    "register_plugin_base",
    "reset",
]

ENTRY_POINT_GROUP = "ganga_like.plugins"

# The class every plugin derives from (``GangaObject``), registered by ``model.base`` when
# it defines it: that module uses this one, so this one cannot import it.  Loading a plugin
# imports its module, which imports ``model.base``; so once a plugin is loaded, the base
# is known, and a class loaded while it is still unknown cannot be a plugin.
# (Plugin classes are typed ``type[Any]`` here for the same reason.)
_plugin_base: type | None = None


def register_plugin_base(cls: type) -> None:
    """Make ``cls`` the class every plugin must derive from."""
    global _plugin_base
    _plugin_base = cls


@functools.cache
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in installed.entry_points(ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


_loaded: dict[str, type[Any]] = {}
_failed: dict[str, BaseException] = {}


def known_names() -> list[str]:
    """Names of every registered plugin, loaded or not (cheap: reads metadata only)."""
    return sorted(_entry_points())


def find(name: str, category: str | None = None) -> type[Any]:
    """The plugin class called ``name``; with ``category``, it must belong to it."""
    if not isinstance(name, str):
        raise PluginError(f"a plugin is named by a string, got {safe_repr(name)}")
    cls = _loaded.get(name)
    if cls is None:
        cls = _load(name)
    if category is not None and cls._category != category:
        names = ", ".join(available(category)) or "none"
        raise PluginError(
            f"{name} is a plugin of category {cls._category!r}, not {category!r}; "
            f"{category} available: {names}"
        )
    return cls


def _load(name: str) -> type[Any]:
    if name in _failed:
        raise PluginError(f"plugin {name!r} failed to load: {_failed[name]}") from _failed[name]
    ep = _entry_points().get(name)
    if ep is None:
        raise PluginError(_unknown_message(name))
    try:
        cls = ep.load()
    except Exception as exc:  # any import-time failure is the plugin's, not ours
        _failed[name] = exc
        raise PluginError(f"plugin {name!r} failed to load: {exc}") from exc
    if not (isinstance(cls, type) and _plugin_base is not None and issubclass(cls, _plugin_base)):
        err = PluginError(f"plugin {name!r} ({ep.value}) is not a GangaObject class")
        _failed[name] = err
        raise err
    _loaded[name] = cls
    return cls


def _unknown_message(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, known_names(), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no plugin named {name!r}{hint}"


def available(category: str) -> list[str]:
    """Names of the loadable plugins of a category (loads them to read their category)."""
    names = []
    for name in known_names():
        try:
            cls = find(name)
        except PluginError:
            continue
        if cls._category == category:
            names.append(name)
    return names


def load_failures() -> dict[str, BaseException]:
    """Plugins that failed to import, with their errors (for diagnostics)."""
    return dict(_failed)


def reset() -> None:
    """Forget what was discovered, e.g. after installing a plugin at runtime."""
    installed.reset()
    _entry_points.cache_clear()
    _loaded.clear()
    _failed.clear()


class Unavailable:
    """Stands in for a plugin that failed to load: any use raises the reason."""

    def __init__(self, name: str, error: PluginError) -> None:
        self.name = name
        self.error = error

    def __call__(self, *args: object, **kwargs: object) -> None:
        raise PluginError(str(self.error)) from self.error

    def __repr__(self) -> str:
        return f"<unavailable plugin {self.name}: {self.error}>"
