"""The ``Dask`` configuration section, registered under the ``ganga_like.config`` entry
points: ``c.Dask.n_workers = 4`` in the config file, ``--Dask.n_workers=4`` on the command
line, ``config.Dask.n_workers = 4`` at runtime. The backend receives it through its context
(``ctx.config[Dask]``)."""

from __future__ import annotations

import os

from traitlets import Float, Int
from traitlets.config import Configurable

__all__ = ["Dask"]


class Dask(Configurable):
    """The Dask backend: jobs on a ``distributed`` cluster."""

    n_workers = Int(
        min(os.cpu_count() or 1, 4),
        min=1,
        help="Worker processes of the gangadir's own cluster, which Dask() with no address "
        "runs on (default: the number of cores, at most 4); read when it starts.",
    ).tag(config=True)
    threads_per_worker = Int(
        1,
        min=1,
        help="Subjobs each worker of that cluster runs at once; read when it starts.",
    ).tag(config=True)
    idle_exit = Float(
        60.0,
        min=0.0,
        help="Seconds the gangadir's own cluster stays with no task to hold before it exits "
        "(it is started again by the next submission that needs it).",
    ).tag(config=True)
    timeout = Float(
        10.0,
        min=0.1,
        help="Seconds to wait for the scheduler to answer (connecting, and each call).",
    ).tag(config=True)
