"""ganga_like: describe a job once, split it, run it anywhere, find everything later.

``from ganga_like import *`` gives the GPI: ``Job``, ``jobs``, ``config``, and every installed
plugin class (``Executable``, ``ArgSplitter``, ``Local``, ...). The repository opens on first
use, with the settings of the configuration (``ganga_like.config``).

Importing this package is light: the GPI names are looked up in a static table and imported
on first access (module ``__getattr__``), so ``import ganga_like.model.status`` or ``import
ganga_like.config`` loads no repository, runtime, GPI or shell code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    ExportError as ExportError,
)
from ganga_like.errors import (
    GangaError as GangaError,
)
from ganga_like.errors import (
    JobError as JobError,
)
from ganga_like.errors import (
    LoadError as LoadError,
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
from ganga_like.errors import (
    TemplateError as TemplateError,
)
from ganga_like.errors import (
    WaitTimeoutError as WaitTimeoutError,
)

if TYPE_CHECKING:
    from ganga_like.gpi.callbacks import Notify as Notify
    from ganga_like.gpi.callbacks import Resubmit as Resubmit
    from ganga_like.gpi.callbacks import RunCommand as RunCommand
    from ganga_like.gpi.completion import as_completed as as_completed
    from ganga_like.gpi.completion import as_completed_async as as_completed_async
    from ganga_like.gpi.completion import wait as wait
    from ganga_like.gpi.completion import wait_async as wait_async
    from ganga_like.gpi.export import export as export
    from ganga_like.gpi.export import load as load
    from ganga_like.gpi.iterate import Iterate as Iterate
    from ganga_like.gpi.job import Job as Job
    from ganga_like.gpi.job_templates import JobTemplate as JobTemplate
    from ganga_like.gpi.job_templates import templates as templates
    from ganga_like.gpi.jobs_registry import jobs as jobs
    from ganga_like.gpi.proxy import plugin as plugin
    from ganga_like.gpi.slices import JobSlice as JobSlice
    from ganga_like.gpi.stats import job_stats as job_stats
    from ganga_like.gpi.workflow import throttle as throttle
    from ganga_like.gpi.workflow import why as why

__version__ = "0.1.0"

# The GPI names that live above this package's own modules: name -> the module defining
# it, imported on first access. ``config`` is the ``ganga_like.config`` module itself.
_LAZY: dict[str, str] = {
    "Job": "ganga_like.gpi.job",
    "JobSlice": "ganga_like.gpi.slices",
    "jobs": "ganga_like.gpi.jobs_registry",
    "plugin": "ganga_like.gpi.proxy",
    "JobTemplate": "ganga_like.gpi.job_templates",
    "templates": "ganga_like.gpi.job_templates",
    "export": "ganga_like.gpi.export",
    "load": "ganga_like.gpi.export",
    "why": "ganga_like.gpi.workflow",
    "Notify": "ganga_like.gpi.callbacks",
    "Iterate": "ganga_like.gpi.iterate",
    "Resubmit": "ganga_like.gpi.callbacks",
    "RunCommand": "ganga_like.gpi.callbacks",
    "job_stats": "ganga_like.gpi.stats",
    "throttle": "ganga_like.gpi.workflow",
    "wait": "ganga_like.gpi.completion",
    "wait_async": "ganga_like.gpi.completion",
    "as_completed": "ganga_like.gpi.completion",
    "as_completed_async": "ganga_like.gpi.completion",
    # (Not imported for type checkers above: the module imports this package.)
    "runfile": "ganga_like.shell.user_script",
    "config": "ganga_like.config",
}

# The core names, declared statically. Plugin classes (Executable, Local, ...) come from the
# ``ganga_like.plugins`` entry points and are resolved on first access by __getattr__ below.
_CORE = [
    "BackendError",
    "BrokenObjectError",
    "ConfigError",
    "ExportError",
    "GangaError",
    "Iterate",
    "Job",
    "JobError",
    "JobSlice",
    "JobTemplate",
    "LoadError",
    "Notify",
    "PluginError",
    "RepositoryBusyError",
    "RepositoryConflictError",
    "RepositoryError",
    "Resubmit",
    "RunCommand",
    "SchemaError",
    "TemplateError",
    "WaitTimeoutError",
    "as_completed",
    "as_completed_async",
    "config",
    "export",
    "job_stats",
    "jobs",
    "load",
    "plugin",
    "runfile",
    "templates",
    "throttle",
    "wait",
    "wait_async",
    "why",
]

# ``__all__`` (the core names and every installed plugin's) is computed when asked for
# (``from ganga_like import *``): reading the plugins' entry points costs a subcommand
# such as ``ganga jobs`` more than the rest of its start, and it needs none of them.

# A GPI error a plain ``python script.py`` does not catch is one line, not a traceback.
_excepthook.install()


def __getattr__(name: str) -> Any:
    from ganga_like.model import plugin_registry as _plugin_registry

    if name == "__all__":
        return [*_CORE, *_plugin_registry.known_names()]
    module = _LAZY.get(name)
    if module is not None:
        found = importlib.import_module(module)
        return found if module == f"{__name__}.{name}" else getattr(found, name)
    if name in _plugin_registry.known_names():
        from ganga_like.gpi.proxy import plugin

        try:
            return plugin(name)
        except PluginError as exc:
            # The name stays importable; using it says why the plugin is unavailable.
            return _plugin_registry.Unavailable(name, exc)
    raise AttributeError(f"module 'ganga_like' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext ganga_like``: the GPI names, monitoring, per-cell transactions, one-line
    errors, magics and rich/HTML displays in this IPython shell or notebook kernel."""
    from ganga_like.shell.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext ganga_like``: back to committing every change at once."""
    from ganga_like.shell.extension import unload

    unload(ipython)
