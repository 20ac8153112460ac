"""The few settings ``ganga jobs`` needs to answer from the jobs-table cache or server, read
without the configuration machinery.

The whole configuration (:mod:`ganga_like.config.store`: traitlets, every section and the
plugins' sections from the entry points) costs a fresh process more than the rest of a
cached listing. The listing needs five settings: where the repository is
(``Repository.gangadir``, ``mode``, ``url``), the one its rows depend on
(``Jobs.master_status_order``) and how long the repository's server stays
(``Repository.server_idle_exit``, handed to a jobs-table server it starts). This module
reads them from the same layers -- defaults, the config file (``ganga_config.py`` then
``ganga_config.json``), the environment -- when it can be sure the configuration would give
the same values and raise no error:

* a ``.py`` file only of ``c.Section.option = <literal>`` lines (and ``c = get_config()``,
  comments, a docstring); a ``.json`` file only of sections of options;
* every option set is one of the five, to a value the section accepts as given.

Anything else (another section or option, an expression, a value the configuration would
convert or refuse, an unreadable file) makes :func:`fast_settings` return None, and the
caller reads the whole configuration, which applies it or says what is wrong. A test
checks the two agree over random files and environments.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ganga_like.config.choices import MASTER_STATUS_ORDERS, MODES
from ganga_like.config.environment import ENVIRONMENT, config_home

__all__ = ["FastSettings", "ListingSettings", "fast_settings"]

CONFIG_NAME = "ganga_config"  # the store's (a test checks they agree)


class ListingSettings(Protocol):
    """What the jobs-table cache and its server's client read of a session's settings
    (:class:`ganga_like.runtime.settings.Settings` has them all)."""

    @property
    def gangadir(self) -> Path: ...
    @property
    def repository_mode(self) -> str: ...
    @property
    def repository_url(self) -> str: ...
    @property
    def master_status_order(self) -> str: ...
    @property
    def zeo_idle_exit(self) -> float: ...


@dataclass(frozen=True)
class FastSettings:
    """The five settings, as :class:`~ganga_like.runtime.settings.Settings` holds them."""

    gangadir: Path
    repository_mode: str
    repository_url: str
    master_status_order: str
    zeo_idle_exit: float


# The sections' defaults (the test of this module checks them against the configuration).
DEFAULTS: dict[str, Any] = {
    "gangadir": "~/gangadir",
    "repository_mode": "shared",
    "repository_url": "",
    "master_status_order": "running_first",
    "zeo_idle_exit": 60.0,
}


# (section, option) -> the field it feeds and whether a value is accepted as it is.
def _text(value: Any) -> bool:
    return isinstance(value, str)


def _number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value)) and value >= 0
    except OverflowError:  # an int past any float
        return False


_OPTIONS: dict[tuple[str, str], tuple[str, Any]] = {
    ("Repository", "gangadir"): ("gangadir", _text),
    ("Repository", "mode"): ("repository_mode", lambda v: isinstance(v, str) and v in MODES),
    ("Repository", "url"): ("repository_url", _text),
    ("Repository", "server_idle_exit"): ("zeo_idle_exit", _number),
    ("Jobs", "master_status_order"): (
        "master_status_order",
        lambda v: isinstance(v, str) and v in MASTER_STATUS_ORDERS,
    ),
}


class _Undecided(Exception):
    """The fast reading cannot be sure: the whole configuration decides."""


def fast_settings() -> FastSettings | None:
    """The five settings of the configuration (no command line, no runtime changes), or
    None when only the whole configuration can say."""
    values = dict(DEFAULTS)
    base = config_home() / "ganga_like" / CONFIG_NAME
    try:
        for path, read in (
            (base.with_suffix(".py"), _python_file),
            (base.with_suffix(".json"), _json_file),
        ):
            try:
                text = path.read_bytes()
            except FileNotFoundError:  # as the store's exists(): a dangling link too
                continue
            except OSError:
                raise _Undecided from None
            for where, value in read(text):
                values.update(_accepted(where, value))
        for variable, where in ENVIRONMENT.items():
            value = os.environ.get(variable)
            if value:
                values.update(_accepted(where, value))
    except _Undecided:
        return None
    values["gangadir"] = Path(values["gangadir"]).expanduser()
    return FastSettings(**values)


def _accepted(where: tuple[str, str], value: Any) -> dict[str, Any]:
    known = _OPTIONS.get(where)
    if known is None or not known[1](value):
        raise _Undecided
    field, _check = known
    return {field: float(value) if field == "zeo_idle_exit" else value}


def _python_file(text: bytes) -> list[tuple[tuple[str, str], Any]]:
    """The assignments of a config file of plain ``c.Section.option = literal`` lines."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        raise _Undecided from None
    found: list[tuple[tuple[str, str], Any]] = []
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            raise _Undecided
        target = statement.targets[0]
        if _is_get_config(target, statement.value):
            continue
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Attribute)
            and isinstance(target.value.value, ast.Name)
            and target.value.value.id == "c"
        ):
            raise _Undecided
        try:
            value = ast.literal_eval(statement.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise _Undecided from None
        found.append(((target.value.attr, target.attr), value))
    return found


def _is_get_config(target: Any, value: Any) -> bool:
    import ast

    return (
        isinstance(target, ast.Name)
        and target.id == "c"
        and isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "get_config"
        and not value.args
        and not value.keywords
    )


def _json_file(text: bytes) -> list[tuple[tuple[str, str], Any]]:
    """The options of a config file of sections (no ``version``: the loader's own key)."""
    import json

    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError):
        raise _Undecided from None
    if not isinstance(loaded, dict) or "version" in loaded:
        raise _Undecided
    found: list[tuple[tuple[str, str], Any]] = []
    for section, options in loaded.items():
        if not isinstance(options, dict):
            raise _Undecided
        found.extend(((section, option), value) for option, value in options.items())
    return found
