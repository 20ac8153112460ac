"""Slurm as the batch base drives it: its id forms, its commands, and its rows read
into the tracker's terms (pure: a row in, a sighting out)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from ganga_like.batch.scheduler import BatchScheduler
from ganga_like.batch.scheduler_commands import CommandError
from ganga_like.batch.tracker import Observation, Sighting

from . import slurm_commands, submission
from .sbatch_script import compress_indices
from .slurm_commands import SacctRow, SqueueRow
from .states import UnknownStateError, classify

__all__ = ["SCHEDULER", "SlurmScheduler", "history_sighting", "queue_sighting"]

log = logging.getLogger("ganga_like.slurm")

_ID_RE = re.compile(r"^\d+(?:_\d+)?$")


def _observe(
    job_id: str, state: str, reason: str | None, exit_code: str | None
) -> Observation | None:
    try:
        return classify(state, reason, exit_code)
    except UnknownStateError as exc:
        log.warning("%s: %s; its status is left as it is", job_id, exc)
        return None


def _timestamp(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def queue_sighting(row: SqueueRow) -> Sighting:
    """An squeue row: its state and pending reason (squeue has no exit codes)."""
    return Sighting(_observe(row.job_id, row.state, row.reason, None))


def history_sighting(row: SacctRow) -> Sighting:
    """An sacct row: state (with who cancelled it), exit code, start and end."""
    return Sighting(
        _observe(row.job_id, row.raw_state, row.reason, row.exit_code),
        started=row.start is not None,
        ended_at=_timestamp(row.end),
    )


def _batches(ids: Sequence[str], limit: int) -> list[list[str]]:
    """``ids`` in lists whose joined length fits ``limit`` characters."""
    batches: list[list[str]] = [[]]
    size = 0
    for job_id in ids:
        if batches[-1] and size + len(job_id) + 1 > limit:
            batches.append([])
            size = 0
        batches[-1].append(job_id)
        size += len(job_id) + 1
    return batches if batches[0] else []


class SlurmScheduler(BatchScheduler):
    """sbatch, squeue, sacct and scancel; ids ``123`` (a job or array) and ``123_4``."""

    label: ClassVar[str] = "Slurm"
    submit_name: ClassVar[str] = "sbatch"
    query_name: ClassVar[str] = "squeue"
    history_name: ClassVar[str] = "sacct"
    cancel_name: ClassVar[str] = "scancel"
    queue_word: ClassVar[str] = "partition"
    log_dir_name: ClassVar[str] = "slurm"
    never_sent: ClassVar[re.Pattern[str]] = slurm_commands.NEVER_SENT
    accounts_usage: ClassVar[bool] = True
    # slurmdbd answers a hundred named elements as fast as a whole array of a thousand; a
    # few hundred more named in one sacct take seconds (500: 6-12 s on the test cluster).
    max_named_elements: ClassVar[int] = 100

    def valid_id(self, scheduler_id: str) -> bool:
        return _ID_RE.match(scheduler_id) is not None

    def split_id(self, scheduler_id: str) -> tuple[str, int | None]:
        base, _, index = scheduler_id.partition("_")
        return base, int(index) if index.isdigit() else None

    def element_id(self, array_id: str, index: int) -> str:
        return f"{array_id}_{index}"

    def elements_target(self, array_id: str, indices: Sequence[int]) -> str:
        return f"{array_id}_[{compress_indices(indices)}]"

    def id_order(self, job_id: str) -> int:
        return int(job_id)

    def shown_submit(self, script_path: str) -> str:
        return f"sbatch --parsable < {script_path}"

    def lookup_hint(self, name: str) -> str:
        return f"squeue --me --name={name}"

    # -- the commands, built and parsed: slurm_commands.py's own functions ---------------

    def submit_command(self) -> list[str]:
        return slurm_commands.sbatch_command()

    def parse_submit_output(self, stdout: str) -> str:
        return slurm_commands.parse_sbatch_output(stdout)

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return slurm_commands.squeue_command(job_ids)

    def parse_query(self, stdout: str) -> dict[str, Sighting]:
        return {
            key: queue_sighting(row) for key, row in slurm_commands.parse_squeue(stdout).items()
        }

    def history_command(self, job_ids: Sequence[str]) -> list[str]:
        return slurm_commands.sacct_command(job_ids)

    def parse_history(self, stdout: str) -> dict[str, Sighting]:
        rows = slurm_commands.parse_sacct(stdout)
        return {key: history_sighting(row) for key, row in rows.items()}

    def cancel_command(self, targets: Sequence[str]) -> list[str]:
        return slurm_commands.scancel_command(targets)

    def find_by_name_command(self, names: Sequence[str]) -> list[str]:
        return slurm_commands.find_by_name_command(names)

    def parse_found(self, stdout: str, names: Sequence[str]) -> dict[str, str]:
        return slurm_commands.parse_names(stdout, names)

    def is_transient(self, message: str) -> bool:
        return slurm_commands.is_transient(message)

    # -- run through slurm_commands.py's wrappers, which know Slurm's quirks (an unknown single
    # id fails squeue; cancelling an ended job is no error) and count the calls. Looked up
    # at each call: tests replace them.

    def submit(self, script: str, *, timeout: float) -> str:
        return slurm_commands.sbatch(script, timeout=timeout)

    def find_by_name(self, names: Sequence[str], *, timeout: float) -> dict[str, str]:
        return submission.find_jobs_by_name(names, timeout=timeout)

    def find_submitted(self, names: Sequence[str], *, timeout: float) -> dict[str, str]:
        found = submission.find_jobs_by_name(names, timeout=timeout)
        rest = [n for n in names if n not in found]
        if rest:
            try:
                found.update(slurm_commands.find_ended_jobs_by_name(rest, timeout=timeout))
            except slurm_commands.SlurmCommandError as exc:
                if not self.history_unavailable(exc):
                    raise
        return found

    def cancel(self, targets: Sequence[str], *, timeout: float) -> None:
        slurm_commands.scancel(targets, timeout=timeout)

    def query(self, job_ids: Sequence[str], *, timeout: float) -> dict[str, Sighting]:
        rows = slurm_commands.squeue(job_ids, timeout=timeout)
        return {key: queue_sighting(row) for key, row in rows.items()}

    def history(self, job_ids: Sequence[str], *, timeout: float) -> dict[str, Sighting]:
        rows = slurm_commands.sacct(job_ids, timeout=timeout)
        return {key: history_sighting(row) for key, row in rows.items()}

    def usage(
        self, job_ids: Sequence[str], *, timeout: float
    ) -> dict[str, tuple[int, float, float, float]]:
        # With the steps' lines (sacct without --allocations, slower than the state's
        # query): asked only for the elements that ended, named one by one.
        used: dict[str, tuple[int, float, float, float]] = {}
        for batch in _batches(job_ids, self.max_query_chars):
            wanted = set(batch)
            for key, row in slurm_commands.sacct(batch, timeout=timeout, usage=True).items():
                if row.usage is not None and key in wanted:
                    u = row.usage
                    used[key] = (u.max_rss_kib, u.user_cpu, u.system_cpu, u.elapsed)
        return used

    def history_unavailable(self, error: CommandError) -> bool:
        return "accounting storage is disabled" in error.message

    def sleep(self, seconds: float) -> None:
        submission.sleep(seconds)


SCHEDULER = SlurmScheduler()
