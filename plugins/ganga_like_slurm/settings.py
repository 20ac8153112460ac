"""Tunables of the Slurm backend: the ``Slurm`` configuration section.

The section is registered under the ``ganga_like.config`` entry points, so its options are
set like any other: ``c.Slurm.poll_interval = 10`` in the config file,
``--Slurm.poll_interval=10`` on the command line, ``config.Slurm.poll_interval = 1`` at
runtime, and ``ganga --help-all`` / ``--generate-config`` show them. The backend reads the
frozen section its context carries (``ctx.config[Slurm].max_array_size``).

The waits every batch backend has are the batch base's
(:class:`~ganga_like.batch.settings.BatchSection`); Slurm adds how long the partitions are
reused and the size of its arrays. Every option is optional: the defaults suit a production
cluster. Tests and impatient users shorten the waits the same way, or in a context built
by hand (``ConfigSnapshot.of({Slurm: {"poll_interval": 0.3}})``).
"""

from __future__ import annotations

from traitlets import Float, Int

from ganga_like.batch.settings import BatchSection

__all__ = ["Slurm"]


class Slurm(BatchSection):
    """The Slurm backend: how often the cluster is asked, how patiently, and how much."""

    # Partitions and limits change rarely; a loop of submissions asks once per this many
    # seconds.
    partition_cache_seconds = Float(
        60.0,
        min=0.0,
        help="Seconds the partitions and MaxArraySize read from the cluster are reused.",
    ).tag(config=True)
    # Most subjobs in one array; 0: as many as the cluster's MaxArraySize allows (a
    # smaller value also applies when it is below that).
    max_array_size = Int(
        0,
        min=0,
        help="Most subjobs in one job array; 0: what the cluster's MaxArraySize allows "
        "(a smaller value applies too when the cluster's is smaller).",
    ).tag(config=True)
