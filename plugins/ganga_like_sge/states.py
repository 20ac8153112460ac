"""Grid Engine's words for a job, read into the batch base's
:class:`~ganga_like.batch.tracker.Observation`: qstat's state letters (the queue) and
qacct's ``failed`` and ``exit_status`` (the history). The only place where they get a
meaning."""

from __future__ import annotations

from ganga_like.batch.tracker import Observation

__all__ = ["finished", "queued"]


def queued(state: str) -> Observation | None:
    """A qstat state (``qw``, ``hqw``, ``r``, ``Eqw``, ``dr``...); None for one not known."""
    if "E" in state:
        # Grid Engine could not start it (an output path it cannot write...) and keeps it
        # queued in error until someone clears it: qacct has the reason.
        return Observation("failed", f"Grid Engine could not start it ({state})")
    if "d" in state:
        return Observation("killed", f"being deleted ({state})")
    if any(letter in state for letter in "sST"):
        return Observation("running", f"suspended ({state})")
    if "r" in state or "t" in state or "R" in state:
        return Observation("running", "running")
    if "h" in state:
        return Observation("submitted", f"held ({state}): it starts once released (qrls)")
    if "w" in state or "q" in state:
        return Observation("submitted", "waiting in the queue")
    return None


# qacct's `failed` codes after which the job did not run (see sge_status(5), "before job").
_NEVER_RAN = frozenset(range(1, 28))
_WALLTIME = 37  # "qmaster enforced h_rt, h_cpu, or h_vmem limit"


def finished(failed: str, exit_status: int | None, started: bool) -> Observation:
    """A qacct record: ``failed`` as qacct prints it (``0``, ``100 : assumedly after
    job``), the exit status (128 + signal for a signal), whether it started."""
    code_text, _, text = failed.partition(":")
    code_text, text = code_text.strip(), text.strip()
    code = int(code_text) if code_text.isdigit() else -1
    if code == 0 and exit_status == 0:
        return Observation("completed", "finished with exit code 0", 0)
    signal = exit_status - 128 if exit_status is not None and exit_status > 128 else 0
    if code == 0:
        if signal:
            return Observation("failed", f"ended by a signal (signal {signal})", exit_status)
        return Observation("failed", f"finished with exit code {exit_status}", exit_status)
    said = f"{text} (failed {code})" if text else f"failed {code}"
    if code == _WALLTIME:
        return Observation(
            "failed", f"Grid Engine ended it: {said}", exit_status or None, cause="timeout"
        )
    if code in _NEVER_RAN or not started:
        return Observation("failed", f"Grid Engine could not start it: {said}")
    if signal:
        # qdel, or a kill from outside Grid Engine: qacct tells them apart by nothing.
        return Observation("failed", f"ended by a signal (signal {signal}): {said}", exit_status)
    return Observation("failed", f"Grid Engine: {said}, exit status {exit_status}", exit_status)
