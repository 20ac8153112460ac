"""Tunables of the Slurm backend, read from the session's backend settings.

Every key is optional: the defaults suit a production cluster.  Tests and impatient
users shorten the waits through the same mapping (``SubmitContext.settings`` /
``PollContext.settings``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .commands import DEFAULT_TIMEOUT

__all__ = ["SETTING_KEYS", "SlurmSettings"]


@dataclass(frozen=True)
class SlurmSettings:
    """Waits and limits; each field is read from the key ``slurm_<field>``."""

    # sbatch against a controller that does not answer: this many attempts in all,
    # the first retry after ``submit_backoff`` seconds, each next one twice as late,
    # and no new attempt once ``submit_patience`` seconds have gone by.
    submit_attempts: int = 4
    submit_backoff: float = 2.0
    submit_patience: float = 20.0
    # Longest any single Slurm command may take (the client retries internally for
    # about MessageTimeout before it gives up on a dead controller).
    command_timeout: float = DEFAULT_TIMEOUT
    # The monitor may be woken often (wait() pokes it); the controller is asked at
    # most once per this many seconds, whoever asks.
    poll_interval: float = 5.0
    # Partitions and limits change rarely; a loop of submissions asks once per this many
    # seconds.
    partition_cache_seconds: float = 60.0
    # Most subjobs in one array; 0: as many as the cluster's MaxArraySize allows (a
    # smaller value also applies when it is below that).
    max_array_size: int = 0
    # A job squeue shows as finished is reported as soon as sacct confirms it (with its
    # exit code); if sacct has not confirmed it after this long, squeue's word is taken.
    final_grace_seconds: float = 60.0
    # A job neither squeue nor sacct lists is only concluded gone (cancelled while
    # pending, or lost) after being missing this long AND for this many poll cycles:
    # sacct lags right after a job ends.
    vanish_seconds: float = 30.0
    vanish_cycles: int = 3

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> SlurmSettings:
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = f"slurm_{f.name}"
            if key in settings and settings[key] is not None:
                kind = int if f.type in ("int", int) else float
                values[f.name] = kind(settings[key])
        return cls(**values)


SETTING_KEYS = tuple(f"slurm_{f.name}" for f in fields(SlurmSettings))
