"""The ``Local`` configuration section, registered under the ``ganga_like.config`` entry
points: ``c.Local.max_concurrent = 4`` in the config file, ``--Local.max_concurrent=4`` on
the command line, ``config.Local.max_concurrent = 4`` at runtime. The backend receives it
through its context (``ctx.config[Local]``)."""

from __future__ import annotations

import os

from traitlets import Float, Int
from traitlets.config import Configurable

__all__ = ["Local"]


class Local(Configurable):
    """The Local backend: jobs on this machine."""

    max_concurrent = Int(
        os.cpu_count() or 1,
        min=1,
        help="How many Local subjobs run at once (default: the number of cores). Takes "
        "effect at the next submission.",
    ).tag(config=True)
    idle_exit = Float(
        30.0,
        min=0.0,
        help="Seconds the detached Local runner stays alive with nothing to do.",
    ).tag(config=True)
