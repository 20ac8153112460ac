"""The stats layer: how jobs are doing, as plain data every view renders (``j.stats()``,
``ganga stats``). ``compute`` reads the repository; ``data`` holds the numbers; ``text``
is their compact summary; ``board`` is the list of active jobs ``ganga top`` refreshes."""

from ganga_like.runtime.stats.compute import job_stats, plain_counts
from ganga_like.runtime.stats.data import JobStats

__all__ = ["JobStats", "job_stats", "plain_counts"]
