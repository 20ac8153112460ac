"""A frozen, validated view of the configuration: one section object per section class.

Sessions and every plugin context carry one. A plugin reads its options by its section
class, ``ctx.config[Local].max_concurrent``, typed as the section declares them; a context
holds only the sections its plugin declared (``config_sections``), so no plugin sees
another's options. A runtime change never alters a snapshot: the store makes a new one,
and whoever follows the store (an open session) puts it in place of the old.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from traitlets import TraitError
from traitlets.config import Configurable

from ganga_like.errors import ConfigError

__all__ = ["ConfigSnapshot", "freeze", "trait_refusal"]

S = TypeVar("S", bound=Configurable)


class ConfigSnapshot:
    """Section class -> its validated, frozen section object."""

    __slots__ = ("_narrowed", "_sections")

    def __init__(self, sections: Mapping[type[Configurable], Configurable]) -> None:
        self._sections: dict[type[Configurable], Configurable] = {
            cls: freeze(section) for cls, section in sections.items()
        }
        # ``only`` is asked for the same few plugins' sections at every poll and submit.
        self._narrowed: dict[tuple[type[Configurable], ...], ConfigSnapshot] = {}

    @classmethod
    def defaults(cls, sections: Iterable[type[Configurable]]) -> ConfigSnapshot:
        """``sections`` at their declared defaults."""
        return cls({section: section() for section in sections})

    @classmethod
    def of(cls, values: Mapping[type[Configurable], Mapping[str, Any]]) -> ConfigSnapshot:
        """The sections of ``values`` at their defaults but for the values given
        (section class -> option -> value), validated: a context built by hand."""
        return cls.defaults(values).replaced(values)

    def __getitem__(self, section: type[S]) -> S:
        found = self._sections.get(section)
        if found is None:
            held = ", ".join(c.__name__ for c in self._sections) or "none"
            name = getattr(section, "__name__", repr(section))
            raise ConfigError(
                f"config[{name}]: not a section this configuration holds (it holds: {held}); "
                "a plugin names the sections it reads in its config_sections"
            )
        assert isinstance(found, section)
        return found

    def __contains__(self, section: object) -> bool:
        return section in self._sections

    def __iter__(self) -> Iterator[type[Configurable]]:
        return iter(self._sections)

    def __len__(self) -> int:
        return len(self._sections)

    def __repr__(self) -> str:
        return f"ConfigSnapshot({', '.join(c.__name__ for c in self._sections)})"

    def only(self, sections: Iterable[type[Configurable]]) -> ConfigSnapshot:
        """The part of this snapshot a plugin declaring ``sections`` is given: those of
        them this snapshot holds, and nothing else."""
        key = tuple(sections)
        found = self._narrowed.get(key)
        if found is None:
            found = ConfigSnapshot({c: self._sections[c] for c in key if c in self._sections})
            self._narrowed[key] = found
        return found

    def replaced(self, values: Mapping[type[Configurable], Mapping[str, Any]]) -> ConfigSnapshot:
        """A new snapshot: this one with ``values`` (section class -> option -> value)
        put in, each validated by its section as an assignment would be."""
        sections = dict(self._sections)
        for cls, changes in values.items():
            if not changes:
                continue
            old = self._sections.get(cls)
            section = cls()
            if old is not None:
                for option in cls.class_trait_names(config=True):
                    section.set_trait(option, getattr(old, option))
            for option, value in changes.items():
                if not cls.class_traits(config=True).get(option):
                    raise ConfigError(f"{cls.__name__} has no option {option!r}")
                try:
                    setattr(section, option, value)
                except TraitError as exc:
                    raise ConfigError(f"{cls.__name__}.{option}: {trait_refusal(exc)}") from None
            sections[cls] = section
        return ConfigSnapshot(sections)


def freeze(section: S) -> S:
    """``section``, from now on refusing assignments to its options (one line saying how
    the configuration is changed instead)."""
    cls: type[Configurable] = type(section)
    if not getattr(cls, "_frozen_section", False):
        changed: Any = section  # the class becomes a subclass: typed as ``cls`` still
        changed.__class__ = _frozen_class(cls)
    return section


@functools.cache
def _frozen_class(cls: type[Configurable]) -> type[Configurable]:
    def __setattr__(self: Configurable, name: str, value: Any) -> None:
        if name.startswith("_"):  # traitlets' own bookkeeping
            object.__setattr__(self, name, value)
            return
        raise ConfigError(
            f"config[{cls.__name__}] is a snapshot and does not change; set "
            f"config.{cls.__name__}.{name} = ... instead"
        )

    # Named as the section: messages, reprs and traitlets' config lookups see no difference.
    frozen = type(
        cls.__name__,
        (cls,),
        {"__setattr__": __setattr__, "_frozen_section": True, "__module__": cls.__module__},
    )
    frozen.__qualname__ = cls.__qualname__
    return frozen


def trait_refusal(exc: TraitError) -> str:
    """What traitlets' refusal says after naming the trait: it says "The 'x' trait of a
    Monitor instance expected a float, not ..."; the option is named by the caller."""
    text = str(exc)
    found = re.search(r" instance (.*)$", text, re.S)
    return found.group(1).rstrip(".") if found else text
