"""The GPI side of the configuration: sections read and assigned as attributes.

``ganga_like.config`` itself is the object users touch (``config.Monitor.max_interval = 5``);
it hands out the :class:`ConfigSection` views defined here.
"""

from __future__ import annotations

from typing import Any

from ganga_like.config.plugins import failures
from ganga_like.config.store import options, section_class, section_names, store, unknown_option
from ganga_like.errors import ConfigError

__all__ = ["ConfigSection", "describe", "describe_all", "section"]


class ConfigSection:
    """One section of the configuration: read and assign its options (validated)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, option: str) -> Any:
        name = object.__getattribute__(self, "_name")
        if option not in options(section_class(name)):
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

    # ``section["option"]`` is the same as ``section.option``, for names held in variables.
    def __getitem__(self, option: str) -> Any:
        return self.__getattr__(option)

    def __setitem__(self, option: str, value: Any) -> None:
        self.__setattr__(option, value)

    def __dir__(self) -> list[str]:
        return list(options(section_class(object.__getattribute__(self, "_name"))))

    def __repr__(self) -> str:
        return describe(object.__getattribute__(self, "_name"))


def section(name: str) -> ConfigSection:
    """The view of section ``name``; a ConfigError when there is none (with a hint)."""
    section_class(name)
    return ConfigSection(name)


def describe(name: str) -> str:
    """A section's options, values and help, as text."""
    cls = section_class(name)
    lines = [f"[{name}] {cls.__doc__}"]
    for option, trait in options(cls).items():
        lines.append(f"  {option} = {store.value(name, option)!r}")
        lines.append(f"      {trait.help}")
    return "\n".join(lines)


def describe_all() -> str:
    """Every section, then the plugins' sections that could not be loaded."""
    parts = [describe(name) for name in section_names()]
    parts += [f"[{name}] could not be loaded: {why}" for name, why in failures().items()]
    return "\n\n".join(parts)
