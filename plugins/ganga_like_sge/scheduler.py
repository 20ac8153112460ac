"""Grid Engine as the batch base drives it: qsub, qstat, qacct and qdel, their ids, and
their output read into the tracker's terms.

Ids are Grid Engine's own: ``123`` for a job or an array, ``123.5`` for task 5 of array
123. Grid Engine numbers an array's tasks from 1, the base its elements from 0: element
``i`` is task ``i + 1`` (:meth:`SGEScheduler.element_id`), and the batch script dispatches
on ``$SGE_TASK_ID`` accordingly.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import ClassVar

from ganga_like.batch.planning import compress
from ganga_like.batch.scheduler import BatchScheduler
from ganga_like.batch.scheduler_commands import CommandError, command_failure, run_command
from ganga_like.batch.settings import BatchSection
from ganga_like.batch.tracker import Sighting

from .states import finished, queued

__all__ = [
    "SCHEDULER",
    "SGEScheduler",
    "expand_tasks",
    "parse_qacct",
    "parse_qstat",
]

log = logging.getLogger("ganga_like.sge")

_ID_RE = re.compile(r"^\d+(?:\.\d+)?$")
# qsub -terse: "123" for a job, "123.1-20:1" for an array.
_SUBMITTED_RE = re.compile(r"^(\d+)(?:\.\S+)?$")
# Said when qmaster cannot be reached: by qsub before anything is sent, by every client.
_DOWN = re.compile(
    r"unable to contact qmaster|commlib error|can't connect|cannot connect|"
    r"connection refused|timed out|endpoint is not unique|no route to host|"
    r"unable to send message|got select error|unable to receive",
    re.IGNORECASE,
)
# The jobs or tasks named are not (or no longer) known: not an error for a cancel.
_UNKNOWN = re.compile(r"does not exist|not found", re.IGNORECASE)


def expand_tasks(text: str) -> Iterator[int]:
    """qstat's task list (``1-20:1``, ``3``, ``1,4-6:2``) as task ids."""
    for part in text.split(","):
        span, _, step = part.partition(":")
        low, _, high = span.partition("-")
        if low.isdigit():
            yield from range(int(low), int(high or low) + 1, int(step) if step.isdigit() else 1)


def parse_qstat(stdout: str) -> dict[str, Sighting]:
    """``qstat -xml``'s rows by job or task id: a pending array is one row of many
    tasks, each running task a row of its own."""
    rows: dict[str, Sighting] = {}
    for job in ElementTree.fromstring(stdout).iter("job_list"):
        number, state = job.findtext("JB_job_number"), job.findtext("state") or ""
        if not number:
            continue
        observation = queued(state)
        if observation is None:
            log.warning("%s: unknown Grid Engine state %r; its status is left as is", number, state)
        tasks = job.findtext("tasks")
        ids = [f"{number}.{t}" for t in expand_tasks(tasks)] if tasks else [number]
        for key in ids:
            rows[key] = Sighting(observation)
    return rows


def _timestamp(text: str) -> float | None:
    """qacct's ``Sat Nov 28 21:16:25 2026`` (local time); None for ``-/-``."""
    try:
        return time.mktime(time.strptime(text.strip(), "%a %b %d %H:%M:%S %Y"))
    except ValueError:
        return None


def parse_qacct(stdout: str) -> dict[str, Sighting]:
    """qacct -j's records by job or task id (the latest of an id run more than once)."""
    rows: dict[str, Sighting] = {}
    for block in stdout.split("=" * 62):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(" ")
            if name:
                fields[name] = value.strip()
        number = fields.get("jobnumber", "")
        if not number.isdigit():
            continue
        task = fields.get("taskid", "undefined")
        key = f"{number}.{task}" if task.isdigit() else number
        status_word = fields.get("exit_status", "").split(" ", 1)[0]
        started = _timestamp(fields.get("start_time", "-/-")) is not None
        rows[key] = Sighting(
            finished(
                fields.get("failed", ""),
                int(status_word) if status_word.isdigit() else None,
                started,
            ),
            started=started,
            ended_at=_timestamp(fields.get("end_time", "-/-")),
        )
    return rows


class SGEScheduler(BatchScheduler):
    """qsub, qstat, qacct and qdel of (Son of) Grid Engine."""

    label: ClassVar[str] = "Grid Engine"
    submit_name: ClassVar[str] = "qsub"
    query_name: ClassVar[str] = "qstat"
    history_name: ClassVar[str] = "qacct"
    cancel_name: ClassVar[str] = "qdel"
    log_dir_name: ClassVar[str] = "sge"
    never_sent: ClassVar[re.Pattern[str]] = re.compile(
        r"unable to contact qmaster|connection refused|can't connect|cannot connect",
        re.IGNORECASE,
    )
    # qstat lists every job of the user in one call, whatever the ids.
    max_query_chars: ClassVar[int] = 10**12

    # Grid Engine's own default of max_aj_tasks: a cluster that sets none has it.
    default_max_tasks: ClassVar[int] = 75000

    def __init__(self) -> None:
        # The jobs and tasks this process deleted (qdel): the kill() that deleted them
        # records them killed. A monitor cycle between the qdel and that record must leave
        # them as they are: it would record the kill in Grid Engine's words, or as a
        # failure (qacct records a deleted running task as any task a signal ended).
        self._deleted: set[str] = set()
        # Every Grid Engine command run, by program name (what a benchmark counts).
        self.counts: Counter[str] = Counter()

    # -- ids -------------------------------------------------------------------------

    def valid_id(self, scheduler_id: str) -> bool:
        return _ID_RE.match(scheduler_id) is not None

    def split_id(self, scheduler_id: str) -> tuple[str, int | None]:
        base, _, task = scheduler_id.partition(".")
        return base, int(task) - 1 if task.isdigit() else None

    def element_id(self, array_id: str, index: int) -> str:
        return f"{array_id}.{index + 1}"

    def elements_target(self, array_id: str, indices: Sequence[int]) -> str:
        # qdel takes one task range per word (a comma starts another job): the runs of
        # consecutive tasks, separated by spaces that cancel_command splits on.
        runs = compress(i + 1 for i in indices).split(",")
        return " ".join(f"{array_id}.{run}" for run in runs)

    def id_order(self, job_id: str) -> int:
        return int(job_id)

    def lookup_hint(self, name: str) -> str:
        return f"qstat -xml | grep -B1 {name}"

    # -- commands, built and parsed ------------------------------------------------------

    def submit_command(self) -> list[str]:
        return ["qsub", "-terse"]

    def parse_submit_output(self, stdout: str) -> str:
        match = _SUBMITTED_RE.match(stdout.strip().splitlines()[-1] if stdout.strip() else "")
        if match is None:
            raise CommandError(f"qsub gave no job id: {stdout.strip()!r}", transient=False)
        return match.group(1)

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return ["qstat", "-xml"]  # the user's jobs, all of them: filtered by id here

    def parse_query(self, stdout: str) -> dict[str, Sighting]:
        try:
            return self._left_to_the_kill(parse_qstat(stdout))
        except ElementTree.ParseError as exc:
            raise CommandError(f"qstat's XML cannot be read: {exc}", transient=True) from None

    def _left_to_the_kill(self, rows: dict[str, Sighting]) -> dict[str, Sighting]:
        """``rows`` with the ended ones of the tasks this process deleted left as they
        are (observation None): their kill() records them."""
        for key, row in rows.items():
            ended = row.observation
            deleted = key in self._deleted or self.split_id(key)[0] in self._deleted
            if deleted and ended is not None and ended.status in ("killed", "failed"):
                rows[key] = replace(row, observation=None)
        return rows

    def history_command(self, job_ids: Sequence[str]) -> list[str]:
        # qacct takes one job (every task of an array) per call: see history().
        return ["qacct", "-j", job_ids[0]]

    def parse_history(self, stdout: str) -> dict[str, Sighting]:
        return parse_qacct(stdout)

    def cancel_command(self, targets: Sequence[str]) -> list[str]:
        return ["qdel", *(word for target in targets for word in target.split())]

    def find_by_name_command(self, names: Sequence[str]) -> list[str]:
        return ["qstat", "-xml"]

    def parse_found(self, stdout: str, names: Sequence[str]) -> dict[str, str]:
        wanted = set(names)
        found: dict[str, str] = {}
        for job in ElementTree.fromstring(stdout).iter("job_list"):
            name, number = job.findtext("JB_name"), job.findtext("JB_job_number")
            if name in wanted and number:
                found[name] = number
        return found

    def is_transient(self, message: str) -> bool:
        return _DOWN.search(message) is not None

    def max_array_tasks(self, settings: BatchSection) -> int:
        """The cluster's max_aj_tasks (``qconf -sconf``, retried as ``settings`` say);
        Grid Engine's default when it sets none."""
        timeout = settings.command_timeout
        text: str = self.retry(lambda: self._call(["qconf", "-sconf"], timeout), settings)
        found = re.search(r"^max_aj_tasks\s+(\d+)", text, re.MULTILINE)
        limit = int(found.group(1)) if found else 0
        return limit if limit > 0 else self.default_max_tasks

    # -- Grid Engine's quirks ----------------------------------------------------------

    def run(
        self, args: Sequence[str], *, timeout: float, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """As the base runs a command, its messages without the words that say nothing
        (``error:`` before each line, a last ``Exiting.``), so that one reads as a line."""
        result = run_command(args, timeout=timeout, input_text=input_text, counts=self.counts)
        if result.returncode != 0:
            lines = (line.strip() for line in result.stderr.splitlines())
            result.stderr = "\n".join(
                line.removeprefix("error:").strip() for line in lines if line != "Exiting."
            )
        return result

    def history(self, job_ids: Sequence[str], *, timeout: float) -> dict[str, Sighting]:
        """One qacct per job or array asked about (qacct takes one): an array of any
        size is one call. A job qacct does not know (yet) is absent."""
        rows: dict[str, Sighting] = {}
        for base in dict.fromkeys(self.split_id(i)[0] for i in job_ids):
            rows.update(self._qacct(["qacct", "-j", base], timeout))
        return self._left_to_the_kill(rows)

    def _qacct(self, args: list[str], timeout: float) -> dict[str, Sighting]:
        result = self.run(args, timeout=timeout)
        if result.returncode != 0:
            if _UNKNOWN.search(result.stderr) and not result.stdout.strip():
                return {}  # not written to the accounting file yet
            raise command_failure(args, result, self.is_transient)
        return parse_qacct(result.stdout)

    def cancel(self, targets: Sequence[str], *, timeout: float) -> None:
        """qdel; a job or task that has ended already is no error (it is gone)."""
        if not targets:
            return
        args = self.cancel_command(targets)
        marked: set[str] = set()
        for word in args[1:]:
            base, _, tasks = word.partition(".")
            marked.update([f"{base}.{t}" for t in expand_tasks(tasks)] if tasks else [base])
        self._deleted |= marked  # before the qdel: a monitor cycle may run meanwhile
        result = self.run(args, timeout=timeout)
        if result.returncode == 0:
            return
        problems = [
            line
            for line in (result.stderr + "\n" + result.stdout).splitlines()
            if line.strip()
            and not _UNKNOWN.search(line)
            and "registered" not in line
            and "has deleted" not in line
        ]
        if problems:
            self._deleted -= marked  # not killed: the monitor follows them again
            raise command_failure(args, result, self.is_transient)

    def find_submitted(self, names: Sequence[str], *, timeout: float) -> dict[str, str]:
        """As find_by_name, ended jobs included: qstat's zombies (the jobs that ended
        lately, which qacct may not have yet: it is written every flush_time), then qacct
        for the names still not found (one call a name: recovery is rare)."""
        listed = self._call(["qstat", "-xml", "-s", "prsz"], timeout)
        found = self.parse_found(listed, names)
        for name in names:
            if name not in found:
                result = self.run(["qacct", "-j", name], timeout=timeout)
                if result.returncode == 0:
                    numbers = re.findall(r"^jobnumber\s+(\d+)", result.stdout, re.MULTILINE)
                    if numbers:
                        found[name] = numbers[-1]
                elif not _UNKNOWN.search(result.stderr):
                    raise command_failure(["qacct"], result, self.is_transient)
        return found


SCHEDULER = SGEScheduler()
