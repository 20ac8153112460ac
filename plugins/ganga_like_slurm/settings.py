"""Tunables of the Slurm backend: the ``Slurm`` configuration section.

The section is registered under the ``ganga_like.config`` entry points, so its options are
set like any other: ``c.Slurm.poll_interval = 10`` in the config file,
``--Slurm.poll_interval=10`` on the command line, ``config.Slurm.poll_interval = 1`` at
runtime, and ``ganga --help-all`` / ``--generate-config`` show them. The backend receives the
section through its context (``ctx.config_for(Slurm)``) and works from a
:class:`SlurmSettings`, the same values as a frozen dataclass.

Every option is optional: the defaults suit a production cluster. Tests and impatient users
shorten the waits the same way, or through the flat mapping contexts carry
(``slurm_<option>`` keys of ``SubmitContext.settings`` / ``PollContext.settings``), which
:meth:`SlurmSettings.from_mapping` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from traitlets import Float, Int
from traitlets.config import Configurable

__all__ = ["SETTING_KEYS", "Slurm", "SlurmSettings"]

# commands.DEFAULT_TIMEOUT, the commands' own default (tests/test_config_layer.py keeps the
# two equal). Not imported from there: every configuration read loads this module, and
# only work with Slurm needs the commands.
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class SlurmSettings:
    """Waits and limits; each field is the ``Slurm`` section's option of the same name
    (``slurm_<field>`` in a settings mapping)."""

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
    # most once per this many seconds, whoever asks...
    poll_interval: float = 5.0
    # ...and at most once per this many while (sub)jobs change state: the wait between
    # queries starts here after a change and doubles up to poll_interval while none is seen.
    min_poll_interval: float = 1.0
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

    @classmethod
    def from_section(cls, section: Slurm) -> SlurmSettings:
        """The values of a ``Slurm`` configuration section."""
        return cls(**{f.name: getattr(section, f.name) for f in fields(cls)})


SETTING_KEYS = tuple(f"slurm_{f.name}" for f in fields(SlurmSettings))


def _default(name: str) -> Any:
    found = SlurmSettings.__dataclass_fields__[name].default
    assert found is not MISSING
    return found


class Slurm(Configurable):
    """The Slurm backend: how often the cluster is asked, how patiently, and how much."""

    submit_attempts = Int(
        _default("submit_attempts"),
        min=1,
        help="sbatch attempts in all when the controller does not answer.",
    ).tag(config=True)
    submit_backoff = Float(
        _default("submit_backoff"),
        min=0.0,
        help="Seconds before the first sbatch retry; each next one waits twice as long.",
    ).tag(config=True)
    submit_patience = Float(
        _default("submit_patience"),
        min=0.0,
        help="No new sbatch attempt starts later than this many seconds after the first.",
    ).tag(config=True)
    command_timeout = Float(
        _default("command_timeout"),
        min=0.0,
        help="Longest, in seconds, any one Slurm command (sbatch, squeue, sacct, scancel, "
        "scontrol) may take.",
    ).tag(config=True)
    poll_interval = Float(
        _default("poll_interval"),
        min=0.0,
        help="The controller is asked for job statuses at most once per this many "
        "seconds, however often the monitor wakes (more often while jobs change: "
        "min_poll_interval).",
    ).tag(config=True)
    min_poll_interval = Float(
        _default("min_poll_interval"),
        min=0.0,
        help="While (sub)jobs change state the controller is asked once per this many "
        "seconds; with nothing changing the wait doubles, up to poll_interval.",
    ).tag(config=True)
    partition_cache_seconds = Float(
        _default("partition_cache_seconds"),
        min=0.0,
        help="Seconds the partitions and MaxArraySize read from the cluster are reused.",
    ).tag(config=True)
    max_array_size = Int(
        _default("max_array_size"),
        min=0,
        help="Most subjobs in one job array; 0: what the cluster's MaxArraySize allows "
        "(a smaller value applies too when the cluster's is smaller).",
    ).tag(config=True)
    final_grace_seconds = Float(
        _default("final_grace_seconds"),
        min=0.0,
        help="Seconds to wait for sacct to confirm a job squeue shows as finished (with "
        "its exit code) before squeue's word is taken.",
    ).tag(config=True)
    vanish_seconds = Float(
        _default("vanish_seconds"),
        min=0.0,
        help="A job neither squeue nor sacct lists is concluded gone only after being "
        "missing this many seconds (and vanish_cycles polls).",
    ).tag(config=True)
    vanish_cycles = Int(
        _default("vanish_cycles"),
        min=1,
        help="A job neither squeue nor sacct lists is concluded gone only after being "
        "missing this many polls (and vanish_seconds).",
    ).tag(config=True)
