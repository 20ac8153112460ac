"""The Slurm backend: attributes and validation, submission with retries, the poll's rules
(with the Slurm commands replaced), then end to end against a real Slurm.

Tests marked ``slurm`` need a running cluster (``eval "$(bash scripts/start-slurm.sh)"``)
and skip, saying why, when there is none. They share one session (module scope) so that
the slow waits overlap: the walltime test's job is submitted first and checked last.
"""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ganga_like import (
    ArgSplitter,
    BackendError,
    Executable,
    GenericSplitter,
    Job,
    JobError,
    LocalFile,
    SchemaError,
    Slurm,
    config,
)
from ganga_like.batch.polling import BatchPoller
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import store
from ganga_like.gpi.proxy import unwrap
from ganga_like.model.interfaces import ActiveRef, PollContext
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like.runtime.submission.splitting import build_subjobs
from ganga_like_slurm import slurm_commands, slurm_polling, submission
from ganga_like_slurm.settings import Slurm as SlurmSection
from ganga_like_slurm.slurm_commands import SacctRow, SlurmCommandError, SqueueRow

from .backends import BATCH_WAITS
from .conftest import findings_of
from .slurm_up import slurm_answers
from .waiting import wait_for

# Short waits, so that the rules can be watched within a test's patience.
FAST = BATCH_WAITS  # short waits, so that the rules can be watched within a test's patience


def fast_config(**more: Any) -> ConfigSnapshot:
    """The configuration with the Slurm section's waits short (and ``more`` options)."""
    return store.snapshot().replaced({SlurmSection: {**FAST, **more}})


def slurm_section(**values: Any) -> SlurmSection:
    """The Slurm section at its defaults but for ``values``, as a context carries it."""
    return ConfigSnapshot.of({SlurmSection: values})[SlurmSection]


def script(directory: Path, name: str, body: str) -> str:
    path = directory / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


# --- attributes and validation (no Slurm needed) ---------------------------------------


def test_attributes_and_resources_validate_and_name_the_attribute() -> None:
    b = Slurm(
        partition="short",
        account="physics",
        qos="normal",
        array_throttle=10,
        extra_options=["--constraint=avx2"],
        setup=["module load gcc"],
        resources={
            "process_count": 8,
            "processes_per_node": 4,
            "memory": "2G",
            "walltime": "1:30:00",
        },
    )
    assert b.resources.process_count == 8
    assert b.resources.memory == 2 * 1024**3
    assert b.resources.walltime == timedelta(hours=1, minutes=30)
    assert b.bulk is True and b.id == ""

    with pytest.raises(
        SchemaError,
        match=r"Resources\.process_count: process_count \(6\) "
        r"is not divisible by processes_per_node \(4\)",
    ):
        b.resources.process_count = 6
    assert b.resources.process_count == 8  # nothing changed
    with pytest.raises(SchemaError, match=r"Resources\.memory: expected bytes or a size"):
        b.resources.memory = "lots"
    with pytest.raises(SchemaError, match=r"Resources\.walltime: expected a datetime"):
        b.resources.walltime = -5
    with pytest.raises(
        SchemaError,
        match=r"Resources: processes_per_node \(3\) exceeds "
        r"process_count \(2\)",
    ):
        Slurm(resources={"process_count": 2, "processes_per_node": 3})
    # Given together, attributes are checked together: their order does not matter.
    assert (
        Slurm(resources={"processes_per_node": 4, "process_count": 8}).resources.processes_per_node
        == 4
    )
    with pytest.raises(SchemaError, match=r"Slurm\.extra_options: .*single-line"):
        Slurm(extra_options=["--a\n--b"])
    with pytest.raises(SchemaError, match=r"Slurm\.array_throttle"):
        Slurm(array_throttle=0)
    with pytest.raises(SchemaError, match="did you mean 'partition'"):
        Slurm(partiton="short")
    with pytest.raises(SchemaError, match=r"Slurm\.id is read-only"):
        b.id = "12"
    # A default Resources object is there to be changed in place.
    plain = Slurm()
    plain.resources.cpu_cores_per_process = 4
    assert plain.resources.cpu_cores_per_process == 4


# --- sbatch retries (the commands replaced) ---------------------------------------------


class FakeSbatch:
    """Fails with each of ``errors`` in turn, then returns ``job_id``."""

    def __init__(self, errors: list[SlurmCommandError], job_id: str = "42") -> None:
        self.errors = list(errors)
        self.job_id = job_id
        self.calls = 0

    def __call__(self, text: str, **_: Any) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.job_id


def _transient(message: str) -> SlurmCommandError:
    return SlurmCommandError(message, transient=True)


DOWN = "sbatch: error: Batch job submission failed: Unable to contact slurm controller"


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(submission, "sleep", slept.append)
    return slept


def test_sbatch_retries_a_controller_that_does_not_answer(
    monkeypatch: pytest.MonkeyPatch, no_sleep: list[float]
) -> None:
    fake = FakeSbatch([_transient(DOWN), _transient(DOWN)])
    monkeypatch.setattr(slurm_commands, "sbatch", fake)
    assert submission.sbatch_with_retry("#!/bin/bash\n", "n", slurm_section()) == "42"
    assert fake.calls == 3 and no_sleep == [2.0, 4.0]


def test_sbatch_gives_up_after_the_configured_attempts(
    monkeypatch: pytest.MonkeyPatch, no_sleep: list[float]
) -> None:
    monkeypatch.setattr(slurm_commands, "sbatch", FakeSbatch([_transient(DOWN)] * 9))
    settings = slurm_section(submit_attempts=3, submit_backoff=1.0)
    with pytest.raises(SlurmCommandError, match="gave up after 3 attempts") as info:
        submission.sbatch_with_retry("", "n", settings)
    assert info.value.transient and no_sleep == [1.0, 2.0]


def test_a_refusal_is_not_retried(monkeypatch: pytest.MonkeyPatch, no_sleep: list[float]) -> None:
    refused = SlurmCommandError("sbatch: error: invalid partition specified: x", transient=False)
    fake = FakeSbatch([refused])
    monkeypatch.setattr(slurm_commands, "sbatch", fake)
    with pytest.raises(SlurmCommandError, match="invalid partition"):
        submission.sbatch_with_retry("", "n", slurm_section())
    assert fake.calls == 1 and no_sleep == []


def test_after_an_ambiguous_failure_the_job_is_looked_up_not_submitted_twice(
    monkeypatch: pytest.MonkeyPatch, no_sleep: list[float]
) -> None:
    fake = FakeSbatch([_transient("sbatch timed out after 60s")])
    monkeypatch.setattr(slurm_commands, "sbatch", fake)
    lookups: list[list[str]] = []
    answers: list[Any] = [_transient("Unable to contact slurm controller"), {"ganga-1-x": "77"}]

    def lookup(names: list[str], **_: Any) -> dict[str, str]:
        lookups.append(list(names))
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    monkeypatch.setattr(submission, "find_jobs_by_name", lookup)
    settings = slurm_section(submit_attempts=5)
    assert submission.sbatch_with_retry("", "ganga-1-x", settings) == "77"
    # The failed look-up did not lead to a second sbatch: the first may have been accepted.
    assert fake.calls == 1 and lookups == [["ganga-1-x"], ["ganga-1-x"]]


class ScriptedSbatch:
    """sbatch that refuses scripts containing ``refuse`` (or fails every call with
    ``error``), and keeps the scripts it was given."""

    def __init__(self, refuse: str = "", error: SlurmCommandError | None = None) -> None:
        self.refuse, self.error = refuse, error
        self.scripts: list[str] = []

    def __call__(self, text: str, **_: Any) -> str:
        self.scripts.append(text)
        if self.error is not None:
            raise self.error
        if self.refuse and self.refuse in text:
            raise SlurmCommandError(
                "sbatch: error: Batch job submission failed: Requested "
                "node configuration is not available",
                transient=False,
            )
        return str(9_000_000 + len(self.scripts))


def _cores_job(values: list[int], **backend: Any) -> Any:
    return Job(
        application=Executable(exe="/bin/true"),
        splitter=GenericSplitter(
            attribute="backend.resources.cpu_cores_per_process", values=values
        ),
        backend=Slurm(partition="debug", **backend),
    )


def test_keep_going_decides_whether_the_other_arrays_are_submitted(
    session: Session, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    sbatch = ScriptedSbatch(refuse="--cpus-per-task=2")
    monkeypatch.setattr(slurm_commands, "sbatch", sbatch)
    going = _cores_job([1, 2, 1, 2])  # two arrays: subjobs 0 and 2, subjobs 1 and 3
    assert going.submit(keep_going=True)
    assert len(sbatch.scripts) == 2
    # real bulk (arrays): refused subjobs are failed, the others submitted
    assert [s.status for s in going.subjobs] == ["submitted", "failed", "submitted", "failed"]
    assert "Requested node configuration is not available" in going.subjobs[1].history[-1].cause
    assert going.subjobs[2].backend.id == "9000001_2"

    stopping = _cores_job([2, 1, 2, 1])  # the first array is refused: nothing else is tried
    with pytest.raises(JobError, match="no subjob could be submitted, the job is new again"):
        stopping.submit(keep_going=False)
    assert len(sbatch.scripts) == 3 and stopping.status == "new"


def test_input_files_are_copied_into_the_workspace_never_linked(
    session: Session, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(slurm_commands, "sbatch", ScriptedSbatch())
    source = tmp_path / "src.txt"
    source.write_text("original\n")
    j = Job(
        application=Executable(exe="/bin/true"),
        inputfiles=[LocalFile(str(source))],
        backend=Slurm(partition="debug"),
    )
    j.submit()
    root = session.repo.workspace / str(j.id)
    placed = [root / "input" / "src.txt", root / "work" / "src.txt"]
    inodes = {source.stat().st_ino, *(p.stat().st_ino for p in placed)}
    assert len(inodes) == 3 and source.stat().st_nlink == 1
    # what the program would do: write to its input in the work directory
    with (root / "work" / "src.txt").open("a") as work_copy:
        work_copy.write("APPENDED\n")
    assert source.read_text() == "original\n"
    assert (root / "input" / "src.txt").read_text() == "original\n"


def test_a_dead_controller_is_retried_then_the_rest_is_not_tried(
    session: Session, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, no_sleep: list[float]
) -> None:
    sbatch = ScriptedSbatch(error=_transient(DOWN))
    monkeypatch.setattr(slurm_commands, "sbatch", sbatch)
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["1"]] * 5),
        backend=Slurm(partition="debug", bulk=False),
    )
    with pytest.raises(
        JobError,
        match=r"Unable to contact slurm controller \(gave up after "
        r"4 attempts\).*\(and 4 more\)",
    ):
        j.submit(keep_going=True)
    # Four attempts for the first subjob (2, 4 and 8 s apart by default), none for the
    # others: they would only wait for the same dead controller.
    assert len(sbatch.scripts) == 4 and no_sleep == [2.0, 4.0, 8.0]
    assert j.status == "new" and len(j.subjobs) == 0


# --- the poll's rules (squeue and sacct replaced) ------------------------------------------


class FakeSlurm:
    """squeue and sacct answering from dicts the test edits, and the cluster's MaxArraySize
    (``scontrol show config``); calls are counted."""

    def __init__(self) -> None:
        self.queue: dict[str, SqueueRow] = {}
        self.accounting: dict[str, SacctRow] = {}
        self.max_array_size = slurm_commands.DEFAULT_MAX_ARRAY_SIZE
        self.squeue_error: SlurmCommandError | None = None
        self.sacct_error: SlurmCommandError | None = None
        self.calls: list[tuple[str, list[str]]] = []

    def squeue(self, ids: list[str], **_: Any) -> dict[str, SqueueRow]:
        self.calls.append(("squeue", list(ids)))
        if self.squeue_error is not None:
            raise self.squeue_error
        return {k: v for k, v in self.queue.items() if _asked(k, ids)}

    def sacct(self, ids: list[str], **_: Any) -> dict[str, SacctRow]:
        self.calls.append(("sacct", list(ids)))
        if self.sacct_error is not None:
            raise self.sacct_error
        # As slurmdbd: an element that never started is only in its array's row.
        return {
            k: v
            for k, v in self.accounting.items()
            if _asked(k, ids) and (v.start is not None or k.split("_")[0] in ids)
        }

    def scontrol_max_array_size(self, **_: Any) -> int:
        self.calls.append(("scontrol", ["show", "config"]))
        return self.max_array_size

    def queued(self, element: str, state: str, reason: str | None = None) -> None:
        base, _, index = element.partition("_")
        self.queue[element] = SqueueRow(element, element, base, int(index), state, reason)

    def accounted(
        self,
        element: str,
        state: str,
        exit_code: str = "0:0",
        start: str | None = "2030-01-01T10:00:00",
    ) -> None:
        base, _, index = element.partition("_")
        self.accounting[element] = SacctRow(
            element,
            element,
            base,
            int(index),
            state,
            None,
            exit_code,
            None,
            start,
            "2030-01-01T10:00:05",
        )


def _asked(element: str, ids: list[str]) -> bool:
    """As Slurm answers: an element named, or its array's id."""
    return element in ids or element.split("_")[0] in ids


@pytest.fixture
def fake_slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm()
    monkeypatch.setattr(slurm_commands, "squeue", fake.squeue)
    monkeypatch.setattr(slurm_commands, "sacct", fake.sacct)
    monkeypatch.setattr(slurm_commands, "scontrol_max_array_size", fake.scontrol_max_array_size)
    return fake


class Poller:
    """Runs poll cycles the way the monitor does: memory kept only after a 'commit'."""

    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        merged = {**FAST, "poll_interval": 0.0, **settings}
        self.ctx = PollContext(
            tmp_path, tmp_path / "workspace", ConfigSnapshot.of({SlurmSection: merged})
        )
        self.refs: list[ActiveRef] = []

    def follow(self, job_id: int, count: int, array: str) -> None:
        self.refs += [ActiveRef(job_id, i, 1, {"id": f"{array}_{i}"}) for i in range(count)]

    def cycle(self, commit: bool = True) -> dict[str, tuple[str, str, int | None]]:
        reports = slurm_polling.poll(self.ctx, self.refs)
        poller = self.ctx.poller_as(BatchPoller)
        if commit:
            poller.cycle_committed()
        else:
            poller.cycle_abandoned()
        done = {r.fqid for r in reports if Status.parse(r.status).final}
        self.refs = [ref for ref in self.refs if ref.fqid not in done]
        return {r.fqid: (str(r.status), r.reason, r.exit_code) for r in reports}


def test_one_squeue_and_at_most_two_saccts_per_cycle_and_only_changes_are_reported(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    poller = Poller(tmp_path)
    poller.follow(5, 1000, "900")
    for i in range(1000):
        fake_slurm.queued(f"900_{i}", "PENDING", "Priority")
    first = poller.cycle()
    assert len(first) == 1000 and first["5.7"] == ("submitted", "pending (Priority)", None)
    assert fake_slurm.calls == [("squeue", ["900"])]  # the array's id, not 1000 elements
    assert poller.cycle() == {}  # nothing changed: nothing reported, no job loaded

    fake_slurm.calls.clear()
    fake_slurm.queued("900_1", "RUNNING")
    fake_slurm.queued("900_2", "FAILED", "NonZeroExitCode")
    fake_slurm.accounted("900_2", "FAILED", "3:0")
    changes = poller.cycle()
    assert changes == {
        "5.1": ("running", "", None),
        "5.2": ("failed", "finished with exit code 3", 3),
    }
    # The queue by array (1,000 active); the ended element's state, then what it used (with
    # the steps' lines), by element.
    assert fake_slurm.calls == [("squeue", ["900"]), ("sacct", ["900_2"]), ("sacct", ["900_2"])]


def test_the_last_elements_of_a_large_array_are_asked_about_by_name(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    poller = Poller(tmp_path)
    poller.follow(5, 1000, "900")
    for i in range(1000):
        fake_slurm.queued(f"900_{i}", "RUNNING")
    poller.cycle()
    for i in range(996):
        fake_slurm.queued(f"900_{i}", "COMPLETED")
        fake_slurm.accounted(f"900_{i}", "COMPLETED")
    fake_slurm.calls.clear()
    assert len(poller.cycle()) == 996
    # More ended than are named in one question: their states by array, their use by the
    # hundred ended first (the others in the next polls).
    assert [(c, ids if len(ids) < 2 else len(ids)) for c, ids in fake_slurm.calls] == [
        ("squeue", ["900"]),
        ("sacct", ["900"]),
        ("sacct", 100),
    ]
    fake_slurm.calls.clear()
    fake_slurm.queued("900_998", "COMPLETED")
    fake_slurm.accounted("900_998", "COMPLETED")
    assert poller.cycle() == {"5.998": ("completed", "finished with exit code 0", 0)}
    last = ["900_996", "900_997", "900_998", "900_999"]
    assert fake_slurm.calls[:2] == [("squeue", last), ("sacct", ["900_998"])]


def test_a_pending_element_cancelled_is_asked_about_by_its_array(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    poller = Poller(tmp_path)
    poller.follow(6, 3, "910")
    fake_slurm.queued("910_0", "COMPLETED")
    fake_slurm.accounted("910_0", "COMPLETED")
    fake_slurm.queued("910_1", "CANCELLED")
    fake_slurm.accounted("910_1", "CANCELLED", start=None)  # in the array's row only
    fake_slurm.queued("910_2", "PENDING")
    changes = poller.cycle()
    assert changes["6.0"][0] == "completed" and changes["6.1"][0] == "killed"
    assert fake_slurm.calls[:2] == [("squeue", ["910_0", "910_1", "910_2"]), ("sacct", ["910"])]


def test_a_finished_job_waits_for_sacct_to_give_its_exit_code(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    poller = Poller(tmp_path, final_grace_seconds=0.5)
    poller.follow(1, 2, "50")
    fake_slurm.queued("50_0", "COMPLETED")
    fake_slurm.queued("50_1", "FAILED")
    assert poller.cycle() == {}  # sacct trails squeue: not reported yet
    fake_slurm.accounted("50_0", "COMPLETED", "0:0")
    assert poller.cycle() == {"1.0": ("completed", "finished with exit code 0", 0)}
    time.sleep(0.6)  # sacct never confirms 50_1: squeue's word, without an exit code
    assert poller.cycle() == {"1.1": ("failed", "finished with a non-zero exit code", None)}


def test_a_job_missing_everywhere_is_concluded_killed_only_after_a_while(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    poller = Poller(tmp_path, vanish_seconds=0.0, vanish_cycles=3)
    poller.follow(2, 2, "60")
    fake_slurm.queued("60_0", "PENDING", "JobArrayTaskLimit")
    fake_slurm.queued("60_1", "RUNNING")
    poller.cycle()
    fake_slurm.queue.clear()  # e.g. scancel by hand: a pending element vanishes
    assert poller.cycle() == {}
    assert poller.cycle(commit=False) == {}  # a cycle whose commit failed does not count
    assert poller.cycle() == {}
    assert poller.cycle() == {
        "2.0": ("killed", "cancelled while pending: Slurm no longer lists it", None),
        "2.1": ("failed", "lost: Slurm no longer lists it (neither squeue nor sacct)", None),
    }


def test_sacct_down_delays_conclusions_and_a_dead_controller_is_transient(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    poller = Poller(tmp_path, vanish_seconds=0.0, vanish_cycles=1)
    poller.follow(3, 1, "70")
    fake_slurm.sacct_error = _transient("sacct: error: Problem talking to the database")
    assert poller.cycle() == {}  # missing, but sacct could not be asked: no conclusion
    assert poller.cycle() == {}
    fake_slurm.squeue_error = _transient(
        "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
    )
    with pytest.raises(BackendError, match="Unable to contact") as info:
        poller.cycle()
    assert info.value.transient


def test_without_accounting_squeue_is_believed_at_once(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    poller = Poller(tmp_path)
    poller.follow(4, 2, "80")
    fake_slurm.queued("80_0", "COMPLETED")
    fake_slurm.queued("80_1", "TIMEOUT")
    fake_slurm.sacct_error = SlurmCommandError(
        "sacct: error: Slurm accounting storage is disabled", transient=False
    )
    assert poller.cycle() == {
        "4.0": ("completed", "finished with exit code 0", 0),
        "4.1": ("failed", "walltime exceeded", None),
    }


def test_the_poll_does_not_hammer_the_controller(fake_slurm: FakeSlurm, tmp_path: Path) -> None:
    poller = Poller(tmp_path, poll_interval=60.0)
    poller.follow(1, 1, "90")
    poller.cycle()
    poller.cycle()  # wait() pokes the monitor every 50 ms: the second poll is skipped
    assert [c[0] for c in fake_slurm.calls] == ["squeue", "sacct"]


def test_query_ids_fit_a_command_line() -> None:
    ids = [str(10**7 + i) for i in range(30_000)]
    batches = slurm_polling.query_ids([*ids, f"{ids[0]}_3"])
    assert sum(len(b) for b in batches) == 30_000
    assert all(len(",".join(b)) <= slurm_polling.MAX_QUERY_CHARS for b in batches)


# --- preview without a cluster ------------------------------------------------------------


def _untokened(text: str) -> str:
    return re.sub(r"(ganga-[\d.]+)-[0-9a-f]{6}", r"\1", text)


def test_preview_shows_the_scripts_and_changes_nothing(
    session: Session, fake_slurm: FakeSlurm
) -> None:
    j = Job(
        application=Executable(exe="/bin/echo"),
        splitter=ArgSplitter(args=[["a b"], ["$HOME"], ["c"]]),
        backend=Slurm(
            partition="debug",
            array_throttle=2,
            setup=["module load x"],
            resources={"memory": "1G", "walltime": "10:00"},
        ),
    )
    text = j.backend.preview()
    assert "1 sbatch call(s) for 3 (sub)job(s); nothing was submitted" in text
    assert "#SBATCH --array=0-2%2" in text and "#SBATCH --partition=debug" in text
    assert "#SBATCH --mem=1024M" in text and "#SBATCH --time=0-00:10:00" in text
    assert "module load x" in text
    assert "exec /bin/echo '$HOME' >" in text and "export GANGA_FQID=0.2" in text
    assert repr(text).startswith("# Slurm preview")  # shows as text at the prompt
    # The job may be given explicitly; only the random token of the job name differs.
    assert _untokened(j.backend.preview(j)) == _untokened(text)
    assert j.status == "new" and len(j.subjobs) == 0 and j.history == []
    assert not (session.repo.workspace / str(j.id)).exists()
    # Nothing submitted or polled; at most the cluster's MaxArraySize was asked for.
    assert {command for command, _ in fake_slurm.calls} <= {"scontrol"}
    # submit(dry_run=True) shows the same and changes nothing either
    assert _untokened(str(j.submit(dry_run=True))) == _untokened(text)
    assert j.status == "new" and len(j.subjobs) == 0 and j.history == []

    k = Job(application=Executable(exe="/bin/true"), backend=Slurm(partition="debug"))
    single = k.backend.preview()
    assert "# --- sbatch 1 of 1: job 1, partition debug" in single
    assert "--array" not in single and "exec /bin/true >" in single


def test_the_preview_of_a_master_new_again_shows_only_its_subjobs_never_submitted(
    session: Session, fake_slurm: FakeSlurm
) -> None:
    j = Job(application=Executable(exe="/bin/echo"), backend=Slurm(partition="debug"))
    impl = unwrap(j)

    def partly_run() -> None:  # as a submission killed after its first subjobs leaves it
        impl.change_status(Status.SUBMITTED, "test")
        impl.attach_subjobs(build_subjobs(impl, [{"application.args": [str(k)]} for k in range(3)]))
        for k in (0, 2):
            for step in (Status.SUBMITTED, Status.RUNNING, Status.COMPLETED):
                impl.subjob(k).change_status(step, "test")

    session.repo.in_transaction(partly_run)
    assert j.status == "new"
    text = j.backend.preview(j)
    assert "export GANGA_FQID=0.1" in text
    assert "GANGA_FQID=0.0" not in text and "GANGA_FQID=0.2" not in text
    dry = str(j.submit(dry_run=True))
    assert "export GANGA_FQID=0.1" in dry and "GANGA_FQID=0.2" not in dry
    assert len(j.subjobs) == 3 and j.status == "new"


def test_more_than_one_process_is_started_by_srun(session: Session, fake_slurm: FakeSlurm) -> None:
    one = Job(application=Executable(exe="/bin/hostname"), backend=Slurm(partition="debug"))
    assert "srun" not in one.backend.preview()  # one process: the script runs it
    many = Job(
        application=Executable(exe="/bin/hostname", args=["-s"]),
        backend=Slurm(
            partition="debug", resources={"process_count": 4, "cpu_cores_per_process": 2}
        ),
    )
    text = many.backend.preview()
    assert "#SBATCH --ntasks=4" in text
    srun = "exec srun --ntasks=4 --cpus-per-task=2 -- /bin/bash -c "
    assert srun in text and "' ganga-rank /bin/hostname -s >" in text
    # With output files, srun runs inside the collecting function: collected once.
    many.outputfiles = [LocalFile("*.dat")]
    assert "exec /bin/bash -c '__ganga_collect \"$@\"' ganga-collect" in many.backend.preview()
    assert "'*.dat' srun --ntasks=4 --cpus-per-task=2 -- /bin/bash -c " in many.backend.preview()


def test_a_preview_without_a_cluster_assumes_slurms_default_array_limit(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(**_: Any) -> int:
        raise SlurmCommandError(
            "fatal: Could not establish a configuration source", transient=False
        )

    monkeypatch.setattr(slurm_commands, "scontrol_max_array_size", unreachable)
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[]] * 3),
        backend=Slurm(partition="debug"),
    )
    text = j.backend.preview()
    assert (
        "# MaxArraySize could not be read (fatal: Could not establish a configuration "
        "source); assumed 1001" in text
    )
    assert "#SBATCH --array=0-2" in text


def test_max_array_size_is_read_from_the_configuration() -> None:
    config = (
        "Configuration data as of 2026-11-25T10:00:00\nMaxArraySize            = 50\n"
        "MaxJobCount             = 10000\n"
    )
    assert slurm_commands.parse_max_array_size(config) == 50
    assert slurm_commands.parse_max_array_size("MaxJobCount = 10000\n") == 1001  # Slurm's default


def test_past_max_array_size_a_job_becomes_several_arrays(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = session.plugin_objects.of(submission.ClusterAnswers)
    monkeypatch.setattr(answers.array_limit, "get", lambda settings: 4)
    j = Job(
        application=Executable(exe="/bin/echo"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(10)]),
        backend=Slurm(partition="debug", array_throttle=2),
    )
    text = j.backend.preview()
    assert "3 sbatch call(s) for 10 (sub)job(s)" in text
    assert "job array 0-3 (4 subjob(s))" in text  # below the limit: task id = subjob id
    assert "job array 0-3 (subjobs 4-7)" in text and "job array 0-1 (subjobs 8-9)" in text
    scripts = text.split("# --- sbatch")[1:]
    assert [
        "#SBATCH --array=0-3%2" in scripts[0],
        "#SBATCH --array=0-3%2" in scripts[1],
        "#SBATCH --array=0-1%2" in scripts[2],
    ] == [True, True, True]
    # Subjob 5 is task 1 of the second array; Slurm's messages reach it through a link.
    second = scripts[1]
    assert "export GANGA_SUBJOB_ID=5" in second.split("1)", 1)[1].split(";;", 1)[0]
    workspace = str(session.repo.workspace / str(j.id))
    assert f"--output={workspace}/%a/output/slurm.out" in scripts[0]
    assert re.search(
        rf"--output={re.escape(workspace)}/slurm/ganga-{j.id}-[0-9a-f]+/%a/output/", second
    )

    # A smaller limit in the settings wins over the cluster's.
    ctx = session.submit_context()
    master = unwrap(j)
    pairs = [
        (sj, sj.application.prepare(sj, ctx.paths(sj)))
        for sj in build_subjobs(master, master.splitter.variations(master))
    ]
    settings = slurm_section(max_array_size=3)
    batches, _ = submission.plan(ctx, pairs, settings, lambda: [], lambda: 4)
    assert [(b.first_id, [m.index for m in b.members]) for b in batches] == [
        (0, [0, 1, 2]),
        (3, [0, 1, 2]),
        (6, [0, 1, 2]),
        (9, [0]),
    ]


# --- a real Slurm -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm() -> None:
    """Skip, saying why, unless a Slurm controller answers."""
    if subprocess.run(["which", "sbatch"], capture_output=True).returncode != 0:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(
            "the Slurm controller does not answer `scontrol ping` "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )


@pytest.fixture(scope="module")
def slurm_session(slurm: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """One session for every Slurm test (their slow waits overlap); anything still
    queued at the end is cancelled."""
    gangadir = tmp_path_factory.mktemp("slurm") / "gangadir"
    session = open_session(Settings(gangadir=gangadir, monitor_max_interval=0.5), fast_config())
    try:
        yield session
    finally:
        active = [str(data.get("id")) for (_b, _r, data) in session.registry().active.values()]
        close_session()
        if active:
            slurm_commands.scancel({a.split("_")[0] for a in active if a})


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


@pytest.mark.slurm
def test_an_array_of_100_subjobs_is_one_sbatch_and_runs_to_completion(
    slurm_session: Session, tmp: Path
) -> None:
    exe = script(
        tmp,
        "show.sh",
        'echo "$1 $GANGA_JOB_ID $GANGA_SUBJOB_ID $GANGA_MASTER_ID '
        '$GANGA_FQID $(pwd)"; echo "err $1" >&2; echo x > r$1.dat\n',
    )
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[i] for i in range(100)]),
        backend=Slurm(partition="debug"),
        outputfiles=[LocalFile("*.dat")],
    )
    before = slurm_commands.RUNNER.counts["sbatch"]
    started = time.perf_counter()
    j.submit()
    print(f"submit() of 100 subjobs: {time.perf_counter() - started:.2f} s")
    assert slurm_commands.RUNNER.counts["sbatch"] - before == 1
    array = j.backend.id
    assert array.isdigit()
    assert [s.backend.id for s in j.subjobs] == [f"{array}_{i}" for i in range(100)]
    assert j.wait(timeout=150) == "completed"
    for s in j.subjobs:
        work = slurm_session.repo.workspace / str(j.id) / str(s.id) / "work"
        assert (
            s.outputdir / "stdout"
        ).read_text() == f"{s.id} {s.id} {s.id} {j.id} {j.id}.{s.id} {work}\n"
        assert (s.outputdir / "stderr").read_text() == f"err {s.id}\n"
        assert (s.outputdir / f"r{s.id}.dat").exists()  # collected from work/
        assert s.exit_code == 0 and s.backend.actual_partition == "debug"
    steps = [e.new for e in j.subjobs[5].history]  # "completing" if a poll caught it
    assert steps[:2] == ["submitted", "running"] and steps[-1] == "completed"
    kept = slurm_session.repo.workspace / str(j.id) / "slurm"
    assert len(list(kept.glob("*.sh"))) == 1
    assert f"submitted {array} partition=debug array 0-99" in (kept / "submissions.log").read_text()


@pytest.mark.slurm
def test_a_failing_subjob_has_its_exit_code_and_only_failed_indices_are_resubmitted(
    slurm_session: Session, tmp: Path
) -> None:
    flag = tmp / "fixed"
    exe = script(tmp, "flaky.sh", f'echo "run $1"; [ "$1" = ok ] || [ -e {flag} ] || exit 3\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[["ok"], ["bad"], ["ok"], ["ok"], ["bad"]]),
        backend=Slurm(partition="debug"),
    )
    j.submit()
    assert j.wait(timeout=90) == "failed"
    assert [s.status for s in j.subjobs] == [
        "completed",
        "failed",
        "completed",
        "completed",
        "failed",
    ]
    bad = j.subjobs[1]
    assert bad.exit_code == 3
    assert bad.history[-1].cause == "Slurm: failed, finished with exit code 3"
    old_ids = [s.backend.id for s in j.subjobs]

    flag.touch()
    before = slurm_commands.RUNNER.counts["sbatch"]
    j.resubmit()
    assert slurm_commands.RUNNER.counts["sbatch"] - before == 1  # ONE array: indices 1 and 4
    new_array = j.subjobs[1].backend.id.split("_")[0]
    assert new_array != old_ids[1].split("_")[0]
    assert [s.backend.id for s in j.subjobs] == [
        old_ids[0],
        f"{new_array}_1",
        old_ids[2],
        old_ids[3],
        f"{new_array}_4",
    ]
    script_text = (slurm_session.repo.workspace / str(j.id) / "slurm").glob("*.sh")
    assert any("#SBATCH --array=1,4\n" in p.read_text() for p in script_text)
    assert j.wait(timeout=90) == "completed"
    assert bad.exit_code == 0
    assert (bad.outputdir.parent / "output.1" / "stdout").read_text() == "run bad\n"  # kept


@pytest.mark.slurm
def test_an_output_pattern_matching_nothing_fails_the_subjob(
    slurm_session: Session, tmp: Path
) -> None:
    exe = script(tmp, "make.sh", '[ "$1" = yes ] && echo data > result.dat; exit 0\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[["yes"], ["no"]]),
        backend=Slurm(partition="debug"),
        outputfiles=[LocalFile("*.dat")],
    )
    j.submit()
    assert j.wait(timeout=90) == "failed"
    done, missing = j.subjobs[0], j.subjobs[1]
    assert done.status == "completed" and (done.outputdir / "result.dat").exists()
    assert missing.status == "failed" and missing.exit_code == 0
    assert "output pattern '*.dat' matched no file" in missing.history[-1].cause


@pytest.mark.slurm
def test_output_files_keep_their_path_and_never_overwrite(
    slurm_session: Session, tmp: Path
) -> None:
    exe = script(
        tmp,
        "make.sh",
        "mkdir -p sub; echo own > out.txt; echo sub > sub/out.txt\necho mine > stdout\n",
    )
    kept = Job(
        application=Executable(exe=exe),
        backend=Slurm(partition="debug"),
        outputfiles=[LocalFile("out.txt"), LocalFile("sub/out.txt")],
    )
    # `stdout` in the output directory is the program's standard output, already there.
    clash = Job(
        application=Executable(exe=exe),
        backend=Slurm(partition="debug"),
        outputfiles=[LocalFile("sub/out.txt"), LocalFile("stdout")],
    )
    kept.submit()
    clash.submit()
    assert kept.wait(timeout=90) == "completed"
    assert (kept.outputdir / "out.txt").read_text() == "own\n"
    assert (kept.outputdir / "sub" / "out.txt").read_text() == "sub\n"
    assert clash.wait(timeout=90) == "failed" and clash.exit_code == 0
    assert "output stdout not collected: stdout already exists" in clash.history[-1].cause
    assert (clash.outputdir / "sub" / "out.txt").read_text() == "sub\n"
    assert (clash.outputdir / "stdout").read_text() == ""  # never overwritten by the file


@pytest.mark.slurm
def test_a_job_of_4_processes_runs_its_program_4_times(slurm_session: Session, tmp: Path) -> None:
    exe = script(
        tmp,
        "rank.sh",
        'echo "rank $SLURM_PROCID of $SLURM_NTASKS"\n'
        'echo "$SLURM_PROCID" > "rank$SLURM_PROCID.dat"\n',
    )
    j = Job(
        application=Executable(exe=exe),
        outputfiles=[LocalFile("*.dat")],
        backend=Slurm(partition="debug", resources={"process_count": 4}),
    )
    j.submit()
    assert j.wait(timeout=90) == "completed"
    lines = (j.outputdir / "stdout").read_text().splitlines()
    assert sorted(lines) == [f"rank {i} of 4" for i in range(4)]
    assert sorted(p.name for p in j.outputdir.glob("*.dat")) == [f"rank{i}.dat" for i in range(4)]


@pytest.mark.slurm
def test_kill_of_one_running_and_one_pending_element_then_of_the_master(
    slurm_session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled: list[list[str]] = []
    real_scancel = slurm_commands.scancel

    def spy(ids: Any, **kwargs: Any) -> None:
        cancelled.append(list(ids))
        real_scancel(ids, **kwargs)

    monkeypatch.setattr(slurm_commands, "scancel", spy)
    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["60"]] * 4),
        backend=Slurm(partition="debug", array_throttle=1),
    )  # 0 runs, 1-3 wait
    j.submit()
    array = j.backend.id
    running, pending = j.subjobs[0], j.subjobs[2]
    assert running.wait(timeout=60, until="running") == "running"
    assert pending.status == "submitted"

    running.kill()
    pending.kill()
    assert cancelled == [[f"{array}_0"], [f"{array}_2"]]  # just those elements
    assert running.status == "killed" and pending.status == "killed"
    # Slurm shows the running one COMPLETING while it stops it; the pending one vanishes.
    _until(
        lambda: slurm_commands.squeue([array])[f"{array}_0"].state == "CANCELLED",
        30,
        "the running element to be cancelled",
    )
    assert f"{array}_2" not in slurm_commands.squeue([array])
    # The throttle lets the next element start; the last one still waits.
    assert j.subjobs[1].wait(timeout=60, until="running") == "running"
    assert j.subjobs[3].status == "submitted"

    j.kill()
    assert cancelled[-1] == [array]  # the whole array, in one word
    assert [s.status for s in j.subjobs] == ["killed"] * 4
    # Once Slurm has ended them all, what it reports must not turn a killed subjob into
    # anything else.
    _until(
        lambda: all(r.state == "CANCELLED" for r in slurm_commands.squeue([array]).values()),
        60,
        "every element to be cancelled",
    )
    slurm_session.monitor.run_once()
    assert j.status == "killed"
    assert all(s.history[-1].cause == "user: kill" for s in j.subjobs)


@pytest.mark.slurm
def test_a_pending_element_cancelled_by_hand_is_recognised_as_killed(
    slurm_session: Session,
) -> None:
    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["60"]] * 3),
        backend=Slurm(partition="debug", array_throttle=1),
    )
    j.submit()
    assert j.subjobs[0].wait(timeout=60, until="running") == "running"
    gone = j.subjobs[2]
    slurm_commands.scancel([gone.backend.id])  # behind ganga's back: it vanishes from Slurm
    assert gone.wait(timeout=30) == "killed"
    assert gone.history[-1].cause == (
        "Slurm: killed, cancelled while pending: Slurm no longer lists it"
    )
    assert [e.new for e in gone.history] == ["submitted", "killed"]
    j.kill()


@pytest.mark.slurm
def test_the_partition_is_chosen_to_fit_and_an_impossible_request_is_refused(
    slurm_session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = slurm_commands.scontrol_show_partitions()
    answers = slurm_session.plugin_objects.of(submission.ClusterAnswers)
    answers.partitions.clear()
    j = Job(application=Executable(exe="/bin/true"), backend=Slurm(resources={"walltime": "5:00"}))
    j.submit()
    assert j.backend.actual_partition == "debug"  # the default partition is tried first

    # Without a default, partitions are tried in Slurm's order: 'short' (MaxTime 10 min)
    # fits 5 minutes, not an hour.
    no_default = [replace(p, default=False) for p in real]
    short_first = sorted(no_default, key=lambda p: p.name != "short")
    monkeypatch.setattr(answers.partitions, "get", lambda settings: short_first)
    fits, too_long = (
        Job(
            application=Executable(exe="/bin/true"),
            splitter=ArgSplitter(args=[["1"], ["2"]]),
            backend=Slurm(resources={"walltime": w}),
        )
        for w in ("5:00", "1:00:00")
    )
    fits.submit()
    too_long.submit()
    assert {s.backend.actual_partition for s in fits.subjobs} == {"short"}
    assert {s.backend.actual_partition for s in too_long.subjobs} == {"debug"}

    huge = Job(
        application=Executable(exe="/bin/true"), backend=Slurm(resources={"process_count": 100_000})
    )
    before = slurm_commands.RUNNER.counts["sbatch"]
    with pytest.raises(
        JobError,
        match=r"Slurm\.resources: no partition fits 100000 "
        r"process\(es\): short: .*; debug: ",
    ):
        huge.submit()
    assert huge.status == "new" and slurm_commands.RUNNER.counts["sbatch"] == before
    for job in (j, fits, too_long):
        assert job.wait(timeout=60) == "completed"


@pytest.mark.slurm
def test_sbatch_refusing_the_job_is_said_plainly_and_leaves_it_new(slurm_session: Session) -> None:
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["1"]] * 3),
        backend=Slurm(partition="no_such_partition"),
    )
    before = slurm_commands.RUNNER.counts["sbatch"]
    with pytest.raises(JobError, match="invalid partition specified: no_such_partition") as info:
        j.submit()
    assert slurm_commands.RUNNER.counts["sbatch"] - before == 1  # not retried
    assert j.status == "new" and len(j.subjobs) == 0
    # Said plainly as the refusal it is, in one line: the doubt a timeout leaves ("may
    # have been accepted all the same") has no place after sbatch's own answer.
    message = str(info.value)
    assert "\n" not in message and "accepted all the same" not in message
    assert "sbatch refused it: invalid partition specified: no_such_partition" in message


@pytest.mark.slurm
def test_a_refused_unsplit_job_is_named_once_in_the_message(slurm_session: Session) -> None:
    j = Job(application=Executable(exe="/bin/true"), backend=Slurm(partition="no_such_partition"))
    with pytest.raises(JobError) as info:
        j.submit()
    assert str(info.value).startswith(
        f"job {j.id} could not be submitted: sbatch refused it: invalid partition specified"
    )
    assert j.status == "new"


@pytest.mark.slurm
def test_emulated_bulk_and_subjobs_with_different_resources(slurm_session: Session) -> None:
    before = slurm_commands.RUNNER.counts["sbatch"]
    one_each = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["1"]] * 3),
        backend=Slurm(partition="debug", bulk=False),
    )
    one_each.submit()
    assert slurm_commands.RUNNER.counts["sbatch"] - before == 3
    assert all(s.backend.id.isdigit() for s in one_each.subjobs)  # plain jobs

    varied = Job(
        application=Executable(exe="/bin/true"),
        splitter=GenericSplitter(
            attribute="backend.resources.cpu_cores_per_process", values=[1, 2, 1, 2]
        ),
        backend=Slurm(partition="debug"),
    )
    varied.submit()
    assert slurm_commands.RUNNER.counts["sbatch"] - before == 5  # one array per resource set
    ids = [s.backend.id.split("_") for s in varied.subjobs]
    assert ids[0][0] == ids[2][0] != ids[1][0] == ids[3][0]
    assert [i[1] for i in ids] == ["0", "1", "2", "3"]  # task ids are subjob ids
    assert one_each.wait(timeout=60) == "completed"
    assert varied.wait(timeout=60) == "completed"


@pytest.mark.slurm
def test_arrays_past_max_array_size_run_and_resubmit_on_a_real_cluster(
    slurm_session: Session, tmp: Path, request: pytest.FixtureRequest
) -> None:
    configured = re.search(
        r"^MaxArraySize=(\d+)", Path(os.environ["SLURM_CONF"]).read_text(), flags=re.MULTILINE
    )
    assert slurm_commands.scontrol_max_array_size() == (int(configured[1]) if configured else 1001)
    previous = slurm_session.config
    request.addfinalizer(lambda: slurm_session.use_config(previous))
    config.Slurm.max_array_size = 4  # reaches the open session, as a user's change does
    # Subjob 9 fails on its first run only.
    marker = tmp / "ran"
    body = (
        f'echo "$GANGA_SUBJOB_ID"\n[ "$1" != 9 ] || [ -e {marker} ] || '
        f"{{ touch {marker}; exit 3; }}\n"
    )
    exe = script(tmp, "once.sh", body)
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[i] for i in range(10)]),
        backend=Slurm(partition="debug"),
    )
    before = slurm_commands.RUNNER.counts["sbatch"]
    j.submit()
    assert slurm_commands.RUNNER.counts["sbatch"] - before == 3
    arrays = j.backend.id.split(",")
    assert len(arrays) == 3
    assert [s.backend.id for s in j.subjobs] == [
        *(f"{arrays[0]}_{i}" for i in range(4)),
        *(f"{arrays[1]}_{i}" for i in range(4)),
        f"{arrays[2]}_0",
        f"{arrays[2]}_1",
    ]
    assert j.wait(timeout=120) == "failed"
    assert [s.status for s in j.subjobs].count("failed") == 1 and j.subjobs[9].exit_code == 3
    for s in j.subjobs:
        assert (s.outputdir / "stdout").read_text() == f"{s.id}\n"
        assert (s.outputdir / "slurm.out").exists()  # Slurm's own file, through the links
    j.resubmit()
    assert j.subjobs[9].backend.id.endswith("_1")  # task 1 of a new array from subjob 8
    assert j.wait(timeout=120) == "completed"
    log = (slurm_session.repo.workspace / str(j.id) / "slurm" / "submissions.log").read_text()
    assert "array 0-3 (subjobs 4-7)" in log and "array 1 (subjobs 9)" in log


@pytest.mark.slurm
def test_an_interrupted_submission_is_found_by_its_name_and_cancelled(
    slurm_session: Session,
) -> None:
    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["60"]] * 2),
        backend=Slurm(partition="debug"),
    )
    master = unwrap(j)
    ctx = slurm_session.submit_context()
    # What a crash between sbatch and the recording of its outcome leaves: the script is
    # kept, Slurm runs the array, no id is stored and the log has no line for it.
    subjobs = build_subjobs(master, master.splitter.variations(master))
    pairs = [(sj, sj.application.prepare(sj, ctx.paths(sj))) for sj in subjobs]
    batches, _ = submission.plan(ctx, pairs, slurm_section(), lambda: [], lambda: 1001)
    for member in batches[0].members:
        submission.prepare_workspace(member)
    text, _ = submission.render_batch(batches[0])
    assert text is not None
    log_dir = Path(submission.slurm_log_dir(batches[0].top))
    log_dir.mkdir(parents=True)
    (log_dir / f"{batches[0].name}.sh").write_text(text)
    array = slurm_commands.sbatch(text)

    # Startup recovery rolls the job back and asks the backend to cancel what it may have
    # received, passing subjob skeletons that know nothing but their ids.
    skeletons = [JobImpl.new_subjob(master, i) for i in range(2)]
    assert master.backend.kill_bulk(ctx, skeletons) == {}
    seen: dict[str, str] = {}

    def cancelled() -> bool:
        seen.clear()
        seen.update((key, r.state) for key, r in slurm_commands.squeue([array]).items())
        return all(state == "CANCELLED" for state in seen.values())

    # A loaded machine's slurmd can take a while to end running elements.
    try:
        _until(cancelled, 90, "the array to be cancelled")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {seen}") from None
    log = (log_dir / "submissions.log").read_text()
    assert f"{batches[0].name} interrupted submission: cancelled {array}" in log
    assert submission.unconfirmed_submissions(str(log_dir)) == []


@pytest.mark.slurm
def test_the_examples_of_the_slurm_page_run(slurm_session: Session) -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "backends" / "slurm.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    assert blocks
    namespace: dict[str, object] = {}
    exec("from ganga_like import *", namespace)
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"slurm.md[block {number}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"slurm.md, example {number} failed: {exc!r}\n{block}") from exc


def _slurmctld_pid() -> int | None:
    test_dir = os.environ.get("SLURM_TEST_DIR")
    conf = os.environ.get("SLURM_CONF")
    if not test_dir and conf:
        test_dir = str(Path(conf).parents[1])
    try:
        pid = int((Path(test_dir or "/nonexistent") / "run" / "slurmctld.pid").read_text())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None
    return pid if comm == "slurmctld" else None


def _start_script() -> Path | None:
    """The project's script that starts the test cluster (again)."""
    start = Path(__file__).resolve().parents[1] / "scripts" / "start-slurm.sh"
    return start if start.is_file() else None


def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    wait_for(predicate, timeout, what, interval=0.3)  # each check may ask Slurm


@pytest.mark.slurm
def test_a_controller_stopped_mid_monitoring_makes_jobs_stale_never_failed(
    slurm_session: Session,
) -> None:
    pid, start = _slurmctld_pid(), _start_script()
    if pid is None or start is None or os.geteuid() != 0:
        pytest.skip("needs root, start-slurm.sh and the slurmctld pid file of the test cluster")
    j = Job(
        application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["12"]] * 3),
        backend=Slurm(partition="debug"),
    )
    j.submit()
    assert j.wait(timeout=60, until="running") == "running"
    monitor = slurm_session.monitor
    try:
        os.kill(pid, 15)
        _until(lambda: not Path(f"/proc/{pid}").exists(), 60, "slurmctld to stop")
        # Each squeue now fails after the client's own retries (~9 s): stale, not failed.
        _until(lambda: "Slurm" in monitor.stale_backends, 60, "the backend to be stale")
        assert "Unable to contact slurm controller" in monitor.stale_backends["Slurm"]
        assert all(s.status == "running" for s in j.subjobs)
    finally:
        restart = subprocess.run(
            ["bash", str(start)], capture_output=True, text=True, timeout=180, check=False
        )
    assert restart.returncode == 0, restart.stderr
    assert j.wait(timeout=90) == "completed"  # the jobs ran on while nobody could see
    _until(lambda: "Slurm" not in monitor.stale_backends, 30, "the backend to recover")
    assert not any(e.new == "failed" for s in j.subjobs for e in s.history)


@pytest.mark.slurm
def test_a_job_over_its_walltime_fails_with_timeout(
    slurm_backend_walltime: tuple[subprocess.Popen[str], Path] | None,
) -> None:
    # Slurm's limits are whole minutes, checked about every 30 s: a 1-minute walltime ends
    # the job after 60-90 s. That wait overlaps the rest of the run: the job runs in a
    # ganga process of its own started by the first Slurm test (conftest.py).
    found = findings_of(slurm_backend_walltime, timeout=400)
    assert found["status"] == "failed", found
    assert found["cause"].startswith("Slurm: failed, walltime exceeded")
    assert found["exit_code"] is None  # Slurm's 0:0 would read as success
    assert found["actual_partition"] == "debug"
    assert "DUE TO TIME LIMIT" in found["slurm_out"]
