"""Slurm job states mapped to the job statuses of the job model.

One table, :data:`STATE_TABLE`, is the only place where a Slurm state gets a
meaning; everything else looks it up through :func:`classify`, which gives the batch
base's :class:`~ganga_like.batch.tracker.Observation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from ganga_like.batch.tracker import Observation

__all__ = [
    "STATE_TABLE",
    "Observation",
    "Status",
    "UnknownStateError",
    "cause_of_reason",
    "classify",
    "normalise_state",
    "parse_exit_code",
]

Status = Literal["submitted", "running", "completing", "completed", "failed", "killed"]

# state -> (status, human reason).  Long names as printed by squeue %T,
# scontrol JobState and sacct State.
STATE_TABLE: Final[Mapping[str, tuple[Status, str]]] = {
    "PENDING": ("submitted", "waiting in the queue"),
    "CONFIGURING": ("submitted", "allocated, nodes are being configured"),
    "RUNNING": ("running", "running"),
    "COMPLETING": ("completing", "finished, Slurm is cleaning up its processes"),
    "COMPLETED": ("completed", "finished with exit code 0"),
    "FAILED": ("failed", "finished with a non-zero exit code"),
    "CANCELLED": ("killed", "cancelled"),
    "TIMEOUT": ("failed", "walltime exceeded"),
    "OUT_OF_MEMORY": ("failed", "memory limit exceeded"),
    "NODE_FAIL": ("failed", "a node of the job failed"),
    "PREEMPTED": ("submitted", "preempted and requeued"),
    "BOOT_FAIL": ("failed", "a node failed to boot"),
    "DEADLINE": ("failed", "deadline reached before the job could finish"),
    "REQUEUED": ("submitted", "requeued"),
    "REQUEUE_HOLD": ("submitted", "requeued and held"),
    "REQUEUE_FED": ("submitted", "requeued by the federation"),
    "RESV_DEL_HOLD": ("submitted", "held because its reservation was deleted"),
    "SUSPENDED": ("running", "suspended (keeps its allocation)"),
    "STOPPED": ("running", "stopped by a signal (keeps its allocation)"),
    "RESIZING": ("running", "changing size"),
    "SIGNALING": ("running", "being signalled"),
    "STAGE_OUT": ("completing", "staging out files"),
    "REVOKED": ("killed", "revoked: a sibling cluster runs it"),
    "SPECIAL_EXIT": ("failed", "requeued held after a special exit code"),
    "LAUNCH_FAILED": ("failed", "the batch script could not be launched"),
    "POWER_UP_NODE": ("submitted", "waiting for a node to power up"),
    "UPDATE_DB": ("completing", "being recorded in the accounting database"),
}

# The machine-readable cause of the failed states that have a more precise one than
# "failed" (a retry may grow what ran out).
_CAUSES: Final[Mapping[str, str]] = {"TIMEOUT": "timeout", "OUT_OF_MEMORY": "out_of_memory"}

# squeue %t prints these two- or three-letter codes.
_SHORT_CODES: Final[Mapping[str, str]] = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "CA": "CANCELLED",
    "TO": "TIMEOUT",
    "OOM": "OUT_OF_MEMORY",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "RF": "REQUEUE_FED",
    "RD": "RESV_DEL_HOLD",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "RS": "RESIZING",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
    "RV": "REVOKED",
    "SE": "SPECIAL_EXIT",
}

# Pending reasons after which the job will not start unless someone changes
# limits: with EnforcePartLimits=NO, sbatch accepts such jobs and they wait forever.
_BLOCKED_REASONS: Final[Mapping[str, str]] = {
    "PartitionTimeLimit": "walltime above the partition's MaxTime",
    "PartitionNodeLimit": "more nodes than the partition allows",
    "PartitionConfig": "more resources than the partition has",
    "BadConstraints": "constraints no node can satisfy",
    "PartitionDown": "partition is down",
    "PartitionInactive": "partition is inactive",
    "JobHeldUser": "held by the user",
    "JobHeldAdmin": "held by an administrator",
    "DependencyNeverSatisfied": "a dependency can never be satisfied",
}


_ENDED: frozenset[Status] = frozenset({"completing", "completed", "failed", "killed"})

# Slurm ends an out-of-memory job with a pseudo-signal of its own (SIG_OOM, 253), which
# the 7-bit signal field of an exit code shows as 125: no signal was sent by that name,
# and the job has no exit code of its own.
_SLURM_OOM_SIGNAL = 253 & 0x7F


class UnknownStateError(ValueError):
    """A state this table does not know; the caller decides what to do."""


def normalise_state(state: str) -> str:
    """``"CANCELLED by 0"`` -> ``"CANCELLED"``; ``"CA"`` -> ``"CANCELLED"``."""
    word = state.strip().split(" ", 1)[0].rstrip("+").upper()
    return _SHORT_CODES.get(word, word)


def parse_exit_code(text: str | None) -> tuple[int, int] | None:
    """Slurm's ``status:signal`` (``"3:0"``) -> ``(3, 0)``; ``None`` when absent."""
    if text is None:
        return None
    text = text.strip()
    if not text or text.upper() in {"N/A", "NONE", "UNKNOWN"}:
        return None
    status, _, signal = text.partition(":")
    try:
        return int(status), int(signal or 0)
    except ValueError:
        return None


def classify(state: str, reason: str | None, exit_code: str | None) -> Observation:
    """Map a Slurm state (plus its reason and ``N:S`` exit code) to an :class:`Observation`."""
    name = normalise_state(state)
    try:
        status, text = STATE_TABLE[name]
    except KeyError:
        raise UnknownStateError(f"unknown Slurm job state {state!r}") from None

    # Slurm prints "0:0" for jobs that have not finished; only an ended job has a code.
    parsed = parse_exit_code(exit_code) if status in _ENDED else None
    code: int | None = None
    if parsed is not None:
        status_code, signal = parsed
        if name == "OUT_OF_MEMORY" and signal == _SLURM_OOM_SIGNAL:
            signal = 0
        code = 128 + signal if signal else status_code
        if code == 0 and status != "completed":
            # A cancelled or timed-out allocation reports 0:0; zero would read as success.
            code = None
        if signal:
            text += f" (signal {signal})"
        elif name == "FAILED":
            text = f"finished with exit code {status_code}"

    # "CANCELLED by 0": keep who cancelled, it tells a user from an admin (uid 0).
    words = state.strip().split(" ")
    if name == "CANCELLED" and len(words) >= 3 and words[1] == "by":
        text += f" by uid {words[2]}"

    reason = (reason or "").strip()
    if name == "PENDING" and reason and reason != "None":
        blocked = _BLOCKED_REASONS.get(reason)
        text = f"pending ({reason}: {blocked})" if blocked else f"pending ({reason})"
    # Finished and running states keep our text: sacct repeats the last pending
    # reason (e.g. JobArrayTaskLimit) even on COMPLETED rows, which would mislead.
    cause = _CAUSES.get(name, "")  # empty: "failed", or no failure
    return Observation(status=status, reason=text, exit_code=code, cause=cause)


def cause_of_reason(reason: str) -> str:
    """The cause (``"timeout"``, ``"out_of_memory"``) of a failure :func:`classify` gave
    ``reason`` for; "failed" for any other."""
    for name, cause in _CAUSES.items():
        if reason.startswith(STATE_TABLE[name][1]):
            return cause
    return "failed"
