"""The interface a batch system implements: its id forms and its commands.

Each operation is one scheduler command (a bulk one: many ids, one call), built and its
output parsed by the implementation, and raises :class:`~.commands.CommandError` when it
fails. Retrying, the submission log and the poll's rules are the base's.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .commands import CommandError
from .retry import RetrySettings, retry, submit_with_retry
from .tracker import Sighting

__all__ = ["BatchScheduler"]


class BatchScheduler(ABC):
    """One batch system (Slurm, PBS, HTCondor) as the batch base drives it."""

    # Names used in messages: "Slurm no longer lists it", "sbatch: <its error>".
    label: ClassVar[str]
    submit_name: ClassVar[str]
    query_name: ClassVar[str]
    history_name: ClassVar[str] = ""  # "": the scheduler keeps no history to ask
    cancel_name: ClassVar[str]
    queue_word: ClassVar[str] = "queue"  # what a queue is called: "partition" for Slurm
    # The directory (under a top-level job's workspace) keeping its scripts and log.
    log_dir_name: ClassVar[str]
    script_suffix: ClassVar[str] = ".sh"
    # Submission failures after which the scheduler cannot have received the job: a blind
    # retry is safe. Anything else is looked up by name before submitting again.
    never_sent: ClassVar[re.Pattern[str]]
    # A longer id list is split over several calls (Linux caps one argument at 128 KiB).
    max_query_chars: ClassVar[int] = 100_000

    # -- ids (pure) ------------------------------------------------------------------

    @abstractmethod
    def valid_id(self, scheduler_id: str) -> bool:
        """True for an id of a job or an array element this scheduler could have given."""

    @abstractmethod
    def split_id(self, scheduler_id: str) -> tuple[str, int | None]:
        """``(job or array id, element index or None)``."""

    @abstractmethod
    def element_id(self, array_id: str, index: int) -> str:
        """The id of element ``index`` of array ``array_id``."""

    @abstractmethod
    def elements_target(self, array_id: str, indices: Sequence[int]) -> str:
        """One cancel argument naming several elements of one array."""

    def id_order(self, job_id: str) -> Any:
        """Sort key of job ids (queries ask in this order)."""
        return job_id

    def shown_submit(self, script_path: str) -> str:
        """The submit command as a user would type it for the kept script."""
        return f"{self.submit_name} < {script_path}"

    def lookup_hint(self, name: str) -> str:
        """How the user finds the job called ``name`` by hand."""
        return f"{self.query_name} ({name})"

    # -- commands (each one call; CommandError on failure) -----------------------------

    @abstractmethod
    def submit(self, script: str, *, timeout: float) -> str:
        """Submit ``script``; its id (an array's id for an array)."""

    @abstractmethod
    def find_by_name(self, names: Sequence[str], *, timeout: float) -> dict[str, str]:
        """Our jobs called one of ``names``: name -> id; names not found are absent."""

    @abstractmethod
    def cancel(self, targets: Sequence[str], *, timeout: float) -> None:
        """Cancel jobs, arrays and elements; ones already ended are not an error."""

    @abstractmethod
    def query(self, job_ids: Sequence[str], *, timeout: float) -> dict[str, Sighting]:
        """The queue's rows for these jobs or arrays (an array's id brings every element),
        by element or job id; ids the queue does not know are absent."""

    def history(self, job_ids: Sequence[str], *, timeout: float) -> dict[str, Sighting]:
        """The history's rows, like :meth:`query`."""
        raise CommandError(f"{self.label} keeps no job history", transient=False)

    def history_unavailable(self, error: CommandError) -> bool:
        """True when ``error`` says the history is switched off (not merely down)."""
        return not self.history_name

    # -- retrying ------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def retry(self, action: Callable[[], Any], settings: RetrySettings) -> Any:
        return retry(action, settings, self.sleep)

    def submit_with_retry(self, script: str, name: str, settings: RetrySettings,
                          timeout: float) -> str:
        return str(submit_with_retry(
            lambda: self.submit(script, timeout=timeout),
            lambda names: self.find_by_name(names, timeout=timeout),
            name, settings, never_sent=self.never_sent, lookup_hint=self.lookup_hint(name),
            sleep=self.sleep))
