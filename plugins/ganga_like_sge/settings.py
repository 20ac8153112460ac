"""Tunables of the Grid Engine backend: the ``SGE`` configuration section.

The batch base's waits and limits (:class:`~ganga_like.batch.settings.BatchSection`), and
the size of its arrays. Set like any other option: ``c.SGE.poll_interval = 10`` in the
config file, ``config.SGE.poll_interval = 1`` at runtime; the backend reads the frozen
section its context carries (``ctx.config[SGE].max_array_size``).
"""

from __future__ import annotations

from traitlets import Float, Int

from ganga_like.batch.settings import BatchSection

__all__ = ["SGE"]


class SGE(BatchSection):
    """The Grid Engine backend: how often the qmaster is asked, how patiently, how much."""

    # Most subjobs in one array; 0: as many as the cluster's max_aj_tasks allows (a smaller
    # value also applies when it is below that).
    max_array_size = Int(
        0,
        min=0,
        help="Most subjobs in one array job; 0: what the cluster's max_aj_tasks allows "
        "(a smaller value applies too when the cluster's is smaller).",
    ).tag(config=True)
    # The cluster's max_aj_tasks changes rarely: a loop of submissions reads it once per
    # this many seconds.
    limits_cache_seconds = Float(
        60.0,
        min=0.0,
        help="Seconds the cluster's max_aj_tasks, once read, is reused.",
    ).tag(config=True)
