"""The interface a batch system implements: its id forms and its commands.

An implementation builds each command and parses its output (pure methods); the base
runs them: each operation is one call (a bulk one: many ids, one call) and raises
:class:`~.commands.CommandError` when it fails. An implementation may also override an
operation whole, where its system has quirks. Retrying, the submission log and the poll's
rules are the base's.
"""

from __future__ import annotations

import re
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .command_retry import RetrySettings, retry, submit_with_retry
from .scheduler_commands import CommandError, command_failure, run_command
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
    # True when the history says what an ended job used (:meth:`usage`), maybe some polls
    # after it says the job ended: the poll then follows the job until it does.
    accounts_usage: ClassVar[bool] = False
    # A longer id list is split over several calls (Linux caps one argument at 128 KiB).
    max_query_chars: ClassVar[int] = 100_000
    # A question names an array's elements one by one while it names at most this many in
    # all, so its answer grows with what changed rather than with the array; beyond it (and
    # with 0) an array is asked by its id.
    max_named_elements: ClassVar[int] = 0

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

    # -- commands, built and parsed (pure) ---------------------------------------------

    @abstractmethod
    def submit_command(self) -> list[str]:
        """The command submitting the script it reads on stdin."""

    @abstractmethod
    def parse_submit_output(self, stdout: str) -> str:
        """The id in the submit command's output (an array's id for an array); raise
        :class:`CommandError` when there is none."""

    @abstractmethod
    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        """The queue query for these jobs or arrays (an array's id brings every element)."""

    @abstractmethod
    def parse_query(self, stdout: str) -> dict[str, Sighting]:
        """The queue's rows, read, by element or job id."""

    def history_command(self, job_ids: Sequence[str]) -> list[str]:
        """The history query, when the system keeps one (:attr:`history_name`)."""
        raise CommandError(f"{self.label} keeps no job history", transient=False)

    def parse_history(self, stdout: str) -> dict[str, Sighting]:
        return {}

    @abstractmethod
    def cancel_command(self, targets: Sequence[str]) -> list[str]:
        """Cancelling jobs, arrays and elements in one call."""

    @abstractmethod
    def find_by_name_command(self, names: Sequence[str]) -> list[str]:
        """Listing our jobs called one of ``names``."""

    @abstractmethod
    def parse_found(self, stdout: str, names: Sequence[str]) -> dict[str, str]:
        """name -> id from :meth:`find_by_name_command`'s output."""

    def is_transient(self, message: str) -> bool:
        """True when the failure behind a command's ``message`` may go away by itself;
        unknown messages are permanent (the user sees them instead of endless retries)."""
        return False

    # -- commands run (each one call; CommandError on failure) --------------------------

    def run(
        self, args: Sequence[str], *, timeout: float, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_command(args, timeout=timeout, input_text=input_text)

    def _call(self, args: Sequence[str], timeout: float, input_text: str | None = None) -> str:
        result = self.run(args, timeout=timeout, input_text=input_text)
        if result.returncode != 0:
            raise command_failure(args, result, self.is_transient)
        return result.stdout

    def submit(self, script: str, *, timeout: float) -> str:
        """Submit ``script``; its id (an array's id for an array)."""
        return self.parse_submit_output(self._call(self.submit_command(), timeout, script))

    def find_by_name(self, names: Sequence[str], *, timeout: float) -> dict[str, str]:
        """Our jobs called one of ``names``: name -> id; names not found are absent."""
        if not names:
            return {}
        return self.parse_found(self._call(self.find_by_name_command(names), timeout), names)

    def find_submitted(self, names: Sequence[str], *, timeout: float) -> dict[str, str]:
        """As :meth:`find_by_name`, ended jobs included (as far back as the system
        remembers them): what recovery asks of a script whose outcome nobody saw."""
        return self.find_by_name(names, timeout=timeout)

    def cancel(self, targets: Sequence[str], *, timeout: float) -> None:
        """Cancel jobs, arrays and elements."""
        if targets:
            self._call(self.cancel_command(targets), timeout)

    def query(self, job_ids: Sequence[str], *, timeout: float) -> dict[str, Sighting]:
        """The queue's rows for these jobs or arrays; ids it does not know are absent."""
        if not job_ids:
            return {}
        return self.parse_query(self._call(self.query_command(job_ids), timeout))

    def history(self, job_ids: Sequence[str], *, timeout: float) -> dict[str, Sighting]:
        """The history's rows, like :meth:`query`."""
        if not job_ids:
            return {}
        return self.parse_history(self._call(self.history_command(job_ids), timeout))

    def usage(
        self, job_ids: Sequence[str], *, timeout: float
    ) -> dict[str, tuple[int, float, float, float]]:
        """What the ended jobs ``job_ids`` (elements named one by one) used, for those the
        history has accounted: ``(peak resident KiB, user CPU s, system CPU s, wall s)``,
        in one call per command line's worth of ids (``accounts_usage`` schedulers)."""
        return {}

    def history_unavailable(self, error: CommandError) -> bool:
        """True when ``error`` says the history is switched off (not merely down)."""
        return not self.history_name

    # -- retrying ------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def retry(self, action: Callable[[], Any], settings: RetrySettings) -> Any:
        return retry(action, settings, self.sleep)

    def submit_with_retry(
        self, script: str, name: str, settings: RetrySettings, timeout: float
    ) -> str:
        return str(
            submit_with_retry(
                lambda: self.submit(script, timeout=timeout),
                lambda names: self.find_by_name(names, timeout=timeout),
                name,
                settings,
                never_sent=self.never_sent,
                lookup_hint=self.lookup_hint(name),
                sleep=self.sleep,
            )
        )
