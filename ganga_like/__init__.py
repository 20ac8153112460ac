"""ganga_like: describe a job once, split it, run it anywhere, find everything later.

``from ganga_like import *`` gives the GPI: ``Job``, ``jobs``, and every installed plugin
class (``Executable``, ``ArgSplitter``, ``Local``, ...). The repository opens on first use.
"""

from __future__ import annotations

from typing import Any

from ganga_like import excepthook as _excepthook
from ganga_like.errors import (
    BackendError as BackendError,
)
from ganga_like.errors import (
    BrokenObjectError as BrokenObjectError,
)
from ganga_like.errors import (
    ConfigError as ConfigError,
)
from ganga_like.errors import (
    GangaError as GangaError,
)
from ganga_like.errors import (
    JobError as JobError,
)
from ganga_like.errors import (
    PluginError as PluginError,
)
from ganga_like.errors import (
    RepositoryBusyError as RepositoryBusyError,
)
from ganga_like.errors import (
    RepositoryConflictError as RepositoryConflictError,
)
from ganga_like.errors import (
    RepositoryError as RepositoryError,
)
from ganga_like.errors import (
    SchemaError as SchemaError,
)
from ganga_like.gpi.job import Job as Job
from ganga_like.gpi.job import JobSlice as JobSlice
from ganga_like.gpi.job import jobs as jobs
from ganga_like.gpi.proxy import plugin as plugin
from ganga_like.model import plugin_registry as _plugin_registry
from ganga_like.shell import config as _config
from ganga_like.shell.config import config as config

__version__ = "0.1.0"

# The core names, declared statically. Plugin classes (Executable, Local, ...) come from the
# ``ganga_like.plugins`` entry points and are resolved on first access by __getattr__ below.
_CORE = [
    "BackendError",
    "BrokenObjectError",
    "ConfigError",
    "GangaError",
    "Job",
    "JobError",
    "JobSlice",
    "PluginError",
    "RepositoryBusyError",
    "RepositoryConflictError",
    "RepositoryError",
    "SchemaError",
    "config",
    "jobs",
    "plugin",
]

__all__ = [*_CORE, *_plugin_registry.known_names()]

# A session opened on first use (scripts, notebooks) gets the same settings as the ganga
# command: config file, environment, runtime ``config`` changes.
_config.install()

# A GPI error a plain ``python script.py`` does not catch is one line, not a traceback.
_excepthook.install()


def __getattr__(name: str) -> Any:
    if name in _plugin_registry.known_names():
        try:
            return plugin(name)
        except PluginError as exc:
            # The name stays importable; using it says why the plugin is unavailable.
            return _plugin_registry.Unavailable(name, exc)
    raise AttributeError(f"module 'ganga_like' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext ganga_like``: the GPI names, monitoring, per-cell transactions, one-line
    errors, magics and rich/HTML displays in this IPython shell or notebook kernel."""
    from ganga_like.shell.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext ganga_like``: back to committing every change at once."""
    from ganga_like.shell.extension import unload

    unload(ipython)
