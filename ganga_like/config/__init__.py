"""The settings of this session: ``config.Monitor.max_interval = 5``.

Sections: Repository, Monitor, Jobs, Display, Shell, and those the installed plugins add
(Local, Slurm, ...). Every assignment is validated and takes effect at once (Repository
options only before the repository is opened). ``config`` alone lists every option with its
value and help; ``ganga --help-all`` and ``ganga --generate-config`` show the same.

This package is the lowest layer but the errors: importing it imports no shell, runtime,
GPI or repository module, nor even traitlets until a section is used. The module itself is
the GPI ``config`` object (so ``from ganga_like import config`` and ``import
ganga_like.config`` are one thing); the code's own entry points are its submodules:
``choices`` (closed sets of values), ``sections`` (the core sections), ``plugins`` (the
sections plugins declare through the ``ganga_like.config`` entry-point group),
``installed`` (the entry points of the installed distributions, read once for that group
and the plugin classes'), ``environment`` (the environment variables, read only there),
``lists`` (list options written as text, ``fqid,status``, and the one line that refuses a
bad one), ``store`` (the layers and the validated section objects), ``snapshot`` (those
objects frozen and keyed by class: what sessions and plugin contexts carry) and ``gpi``
(the section views).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ganga_like.errors import ConfigError

# The code's own entry points; never sections (section names are class names).
_SUBMODULES = frozenset(
    {
        "choices",
        "environment",
        "gpi",
        "installed",
        "lists",
        "plugins",
        "sections",
        "snapshot",
        "store",
    }
)


class _ConfigModule(types.ModuleType):
    """This module, behaving as the GPI ``config`` object."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in _SUBMODULES:
            # Not a section: ``from ganga_like.config import store`` asks for submodules
            # this way before importing them.
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        from ganga_like.config.gpi import section

        return section(name)

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system records submodules here; everything else is a user's mistake.
        if name.startswith("_") or isinstance(value, types.ModuleType):
            super().__setattr__(name, value)
            return
        raise ConfigError(f"set an option, not a section: config.{name}.<option> = value")

    def __getitem__(self, name: str) -> Any:
        # ``config["Monitor"]`` is ``config.Monitor``, for section names held in variables.
        from ganga_like.config.gpi import section

        return section(name)

    def __setitem__(self, name: str, value: Any) -> None:
        raise ConfigError(f"set an option, not a section: config[{name!r}][<option>] = value")

    def __dir__(self) -> list[str]:
        from ganga_like.config.store import section_names

        return sorted(section_names())

    def __repr__(self) -> str:
        from ganga_like.config.gpi import describe_all

        return describe_all()


sys.modules[__name__].__class__ = _ConfigModule
