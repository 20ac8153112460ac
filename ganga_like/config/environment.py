"""The environment variables that configure ganga, read here and nowhere else.

``XDG_CONFIG_HOME`` says where the config file is (:func:`config_home`), ``XDG_CACHE_HOME``
where this host keeps caches of its own (:func:`cache_home`).

``GANGA_DIR``, ``GANGA_REPOSITORY_MODE`` and ``GANGA_REPOSITORY`` are a layer of the
configuration, between the config file and the command line (a one-off
``GANGA_DIR=/tmp/x ganga`` must win over the file). Sessions built without the
configuration (``Settings()``) take them as their defaults too, so the two never disagree
about where the repository is.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENVIRONMENT", "cache_home", "config_home", "environment_values", "fingerprint"]

# Variable -> the (section, option) it sets.
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "GANGA_DIR": ("Repository", "gangadir"),
    "GANGA_REPOSITORY_MODE": ("Repository", "mode"),
    "GANGA_REPOSITORY": ("Repository", "url"),
}


def environment_values() -> dict[tuple[str, str], str]:
    """(section, option) -> value, for each variable set to something (an empty one
    counts as unset)."""
    found: dict[tuple[str, str], str] = {}
    for variable, where in ENVIRONMENT.items():
        value = os.environ.get(variable)
        if value:
            found[where] = value
    return found


def config_home() -> Path:
    """``$XDG_CONFIG_HOME``, or ``~/.config``: the XDG spec says to ignore a relative
    value."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(base) if base and os.path.isabs(base) else Path.home() / ".config"


def cache_home() -> Path:
    """``$XDG_CACHE_HOME``, or ``~/.cache`` (a relative value is ignored, as above)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"


def fingerprint() -> tuple[str | None, ...]:
    """What the variables say now: the store builds its sections again when it changes."""
    return tuple(os.environ.get(variable) for variable in ENVIRONMENT)
