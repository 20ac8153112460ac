"""The batch base's poll rules, pure: rows in, changes out (no processes, no clock).

The tracker gets the queue's and the history's rows already read, and the times; each
test plays cycles the way the poll does, keeping the memory of one cycle for the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganga_like.batch import polling
from ganga_like.batch.planning import compress
from ganga_like.batch.scheduler import BatchScheduler
from ganga_like.batch.tracker import Observation, Seen, Sighting, Tracker
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.errors import BackendError
from ganga_like.model.interfaces import ActiveRef, PollContext
from ganga_like_slurm.scheduler import SlurmScheduler, history_sighting, queue_sighting
from ganga_like_slurm.slurm_commands import SacctRow, SqueueRow

PENDING = Sighting(Observation("submitted", "pending (Priority)"))
RUNNING = Sighting(Observation("running", "running"))
DONE = Sighting(Observation("completed", "finished with exit code 0"))
FAILED = Sighting(Observation("failed", "finished with a non-zero exit code"))


@dataclass(frozen=True)
class Waits:
    final_grace_seconds: float = 60.0
    vanish_seconds: float = 30.0
    vanish_cycles: int = 3
    poll_interval: float = 0.0
    min_poll_interval: float = 0.0
    command_timeout: float = 5.0


class Cycles:
    """Runs tracker cycles at given times, keeping the memory between them."""

    def __init__(self, ids: Sequence[str], **waits: float) -> None:
        self.ids = list(ids)
        self.waits = Waits(**waits)  # type: ignore[arg-type]
        self.memory: dict[str, Seen] = {}
        self.asked: list[str] = []

    def cycle(
        self,
        now: float,
        queue: Mapping[str, Sighting],
        history: Mapping[str, Sighting] | None = None,
        *,
        history_off: bool = False,
        keep: bool = True,
    ) -> dict[str, tuple[str, str, int | None, bool]]:
        tracker = Tracker(
            self.waits, self.memory, now=now, wall=1000.0 + now, history_off=history_off
        )
        self.asked = tracker.queue(self.ids, queue)
        tracker.history(None if history is None else dict(history))
        if keep:
            self.memory = tracker.seen
        return {
            c.scheduler_id: (
                c.observation.status,
                c.observation.reason,
                c.observation.exit_code,
                c.started,
            )
            for c in tracker.changes
        }


def test_only_changes_are_reported_and_queued_jobs_need_no_history() -> None:
    run = Cycles(["1_0", "1_1"])
    assert run.cycle(0, {"1_0": PENDING, "1_1": RUNNING}, {}) == {
        "1_0": ("submitted", "pending (Priority)", None, True),
        "1_1": ("running", "running", None, True),
    }
    assert run.asked == []  # nothing finished or missing: the history is not asked
    assert run.cycle(1, {"1_0": PENDING, "1_1": RUNNING}, {}) == {}
    assert run.cycle(2, {"1_0": RUNNING, "1_1": RUNNING}, {}) == {
        "1_0": ("running", "running", None, True)
    }


def test_a_job_finished_in_the_queue_waits_for_the_historys_exit_code() -> None:
    run = Cycles(["5"], final_grace_seconds=10)
    assert run.cycle(0, {"5": FAILED}, {}) == {}
    assert run.asked == ["5"]
    confirmed = Sighting(
        Observation("failed", "finished with exit code 3", 3), started=True, ended_at=42.0
    )
    assert run.cycle(1, {"5": FAILED}, {"5": confirmed}) == {
        "5": ("failed", "finished with exit code 3", 3, True)
    }


def test_past_the_grace_the_queues_word_is_taken_and_completed_means_exit_code_0() -> None:
    run = Cycles(["5", "6"], final_grace_seconds=10)
    queue = {"5": DONE, "6": FAILED}
    assert run.cycle(0, queue, {}) == {}
    assert run.cycle(9.9, queue, {}) == {}
    assert run.cycle(10, queue, {}) == {
        "5": ("completed", "finished with exit code 0", 0, True),
        "6": ("failed", "finished with a non-zero exit code", None, True),
    }


def test_without_a_history_the_queue_is_believed_at_once() -> None:
    run = Cycles(["5"])
    assert run.cycle(0, {"5": DONE}, None, history_off=True) == {
        "5": ("completed", "finished with exit code 0", 0, True)
    }


def test_a_job_listed_nowhere_is_concluded_gone_after_enough_time_and_cycles() -> None:
    run = Cycles(["1_0", "1_1"], vanish_seconds=5, vanish_cycles=3)
    run.cycle(0, {"1_0": PENDING, "1_1": RUNNING}, {})
    assert run.cycle(1, {}, {}) == {}
    assert run.cycle(2, {}, {}, keep=False) == {}  # a cycle not committed does not count
    assert run.cycle(3, {}, {}) == {}
    assert run.cycle(4, {}, {}) == {}  # three cycles, but only 3 s
    gone = run.cycle(6, {}, {})
    assert gone == {
        "1_0": ("killed", "cancelled while pending: the scheduler no longer lists it", None, False),
        "1_1": ("failed", "lost: the scheduler no longer lists it", None, True),
    }


def test_a_history_that_does_not_answer_concludes_nothing_about_missing_jobs() -> None:
    run = Cycles(["7"], vanish_seconds=0, vanish_cycles=1)
    run.cycle(0, {"7": RUNNING}, {})
    assert run.cycle(1, {}, None) == {}
    assert run.memory["7"] == Seen(reported="running")
    assert run.cycle(2, {}, {}) == {
        "7": ("failed", "lost: the scheduler no longer lists it", None, True)
    }


def test_an_unknown_state_leaves_the_job_as_it_was() -> None:
    run = Cycles(["8"])
    run.cycle(0, {"8": RUNNING}, {})
    assert run.cycle(1, {"8": Sighting(None)}, {}) == {}
    assert run.asked == [] and run.memory["8"] == Seen(reported="running")


def test_a_history_record_of_an_unknown_state_leaves_the_job_as_it_was() -> None:
    run = Cycles(["8"], vanish_seconds=0, vanish_cycles=1)
    run.cycle(0, {"8": RUNNING}, {})
    for now in (1, 2, 3):  # not concluded gone, however long it lasts
        assert run.cycle(now, {}, {"8": Sighting(None)}) == {}
    assert run.memory["8"] == Seen(reported="running")


def test_a_job_killed_while_waiting_never_started() -> None:
    run = Cycles(["9"], final_grace_seconds=0)
    run.cycle(0, {"9": PENDING}, {})
    killed = Sighting(Observation("killed", "cancelled"))
    assert run.cycle(1, {"9": killed}, {}) == {"9": ("killed", "cancelled", None, False)}


def test_slurm_rows_are_read_into_sightings() -> None:
    queued = queue_sighting(SqueueRow("3_1", "4", "3", 1, "PENDING", "Priority"))
    assert queued == Sighting(Observation("submitted", "pending (Priority)"))
    ended = history_sighting(
        SacctRow(
            "3_1",
            "4",
            "3",
            1,
            "FAILED",
            None,
            "2:0",
            None,
            "2030-01-01T10:00:00",
            "2030-01-01T10:00:05",
        )
    )
    assert ended.observation == Observation("failed", "finished with exit code 2", 2)
    assert ended.started and ended.ended_at is not None
    never = history_sighting(
        SacctRow("3_2", "5", "3", 2, "CANCELLED", "0", "0:0", None, None, None)
    )
    assert not never.started and never.ended_at is None
    assert queue_sighting(SqueueRow("3", "3", None, None, "NO_SUCH_STATE", None)) == Sighting(None)


def test_ranges_of_indices_are_compressed() -> None:
    assert compress([8, 0, 1, 2, 5, 7, 2]) == "0-2,5,7-8"
    assert compress([]) == ""


# --- a scheduler of its own plugs into the base -----------------------------------------


class FileScheduler(BatchScheduler):
    """A batch system of a few lines: only its commands built and their output parsed,
    run for real by the base. Its queue is a file of ``<id> <state>`` lines; ids are
    ``J`` and ``J.I``; it keeps no history."""

    label: ClassVar[str] = "Toy"
    submit_name: ClassVar[str] = "tsub"
    query_name: ClassVar[str] = "tstat"
    cancel_name: ClassVar[str] = "tdel"
    log_dir_name: ClassVar[str] = "toy"
    STATES: ClassVar[dict[str, Observation]] = {
        "Q": Observation("submitted", "queued"),
        "R": Observation("running", "running"),
        "C": Observation("completed", "completed"),
    }

    def __init__(self, queue: Path) -> None:
        self.queue = queue

    def valid_id(self, scheduler_id: str) -> bool:
        return scheduler_id.replace(".", "", 1).isdigit()

    def split_id(self, scheduler_id: str) -> tuple[str, int | None]:
        base, _, index = scheduler_id.partition(".")
        return base, int(index) if index else None

    def element_id(self, array_id: str, index: int) -> str:
        return f"{array_id}.{index}"

    def elements_target(self, array_id: str, indices: Sequence[int]) -> str:
        return f"{array_id}.[{compress(indices)}]"

    def submit_command(self) -> list[str]:
        return ["sh", "-c", 'n=$(wc -l); echo "job 42 queued ($n lines)"']

    def parse_submit_output(self, stdout: str) -> str:
        return stdout.split()[1]

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return [
            "sh",
            "-c",
            '[ -e "$0" ] || { echo "tstat: server not answering" >&2; exit 2; }; cat "$0"',
            str(self.queue),
        ]

    def parse_query(self, stdout: str) -> dict[str, Sighting]:
        rows = (line.split() for line in stdout.splitlines() if line.strip())
        return {sid: Sighting(self.STATES.get(state)) for sid, state in rows}

    def cancel_command(self, targets: Sequence[str]) -> list[str]:
        return ["true", *targets]

    def find_by_name_command(self, names: Sequence[str]) -> list[str]:
        return ["true"]

    def parse_found(self, stdout: str, names: Sequence[str]) -> dict[str, str]:
        return {}

    def is_transient(self, message: str) -> bool:
        return "not answering" in message


def test_a_scheduler_of_a_few_lines_submits_and_is_polled_once_per_cycle(tmp_path: Path) -> None:
    toy = FileScheduler(tmp_path / "queue")
    assert toy.submit("#!/bin/sh\necho hi\n", timeout=10) == "42"
    (tmp_path / "queue").write_text("77.0 R\n77.1 Q\n77.2 C\n78 Q\n")
    ctx = PollContext(tmp_path, tmp_path / "workspace", ConfigSnapshot({}))
    refs = [ActiveRef(4, i, 1, {"id": f"77.{i}"}) for i in range(3)]
    refs.append(ActiveRef(5, None, 1, {"id": "not an id"}))  # skipped, not fatal
    reports = polling.poll(toy, ctx, refs, Waits())
    assert [(r.fqid, str(r.status), r.exit_code) for r in reports] == [
        ("4.0", "running", None),
        ("4.1", "submitted", None),
        ("4.2", "completed", 0),
    ]
    ctx.poller_as(polling.BatchPoller).cycle_committed()
    assert polling.poll(toy, ctx, refs[:2], Waits()) == []  # nothing changed

    (tmp_path / "queue").unlink()  # the server stops answering: transient, nothing lost
    with pytest.raises(BackendError, match="tstat: tstat: server not answering") as info:
        polling.poll(toy, ctx, refs[:2], Waits())
    assert info.value.transient
    (tmp_path / "queue").mkdir()  # an answer it cannot give: permanent
    with pytest.raises(BackendError, match="Is a directory") as info:
        polling.poll(toy, ctx, refs[:2], Waits())
    assert not info.value.transient


def test_a_member_that_cannot_be_rendered_fails_alone() -> None:
    from ganga_like.batch.planning import Member, render_pinned
    from ganga_like.model.job import Job

    def member(i: int, word: str) -> Member[str]:
        job = Job()
        job.__dict__["id"] = i
        return Member(job, i, f"/w/{i}", word, ())

    def render(members: Sequence[Member[str]]) -> str:
        if any("\n" in m.command for m in members):
            raise ValueError("a command must be one line")
        return ";".join(m.command for m in members)

    text, errors = render_pinned(
        render, [member(0, "a"), member(1, "b\nc"), member(2, "d")], ValueError
    )
    assert text == "a;d"
    assert errors == {"1": "cannot write the batch script: a command must be one line"}


_ARRAYS = st.sampled_from(["7", "81", "9000001"])
_ELEMENTS = st.sets(st.tuples(_ARRAYS, st.integers(0, 300)), max_size=400)


@given(
    asked=_ELEMENTS,
    unnameable=_ELEMENTS,
    jobs=st.sets(st.sampled_from(["55", "66"])),
    chars=st.integers(30, 2000),
)
def test_a_question_names_few_elements_and_covers_every_one_asked(
    asked: set[tuple[str, int]], unnameable: set[tuple[str, int]], jobs: set[str], chars: int
) -> None:
    """Naming elements one by one is a shortcut: each asked element is named or its
    array is asked, never more than the scheduler names in all, none that may not be."""
    scheduler = SlurmScheduler()
    scheduler.max_query_chars = chars  # type: ignore[misc]
    ids = {f"{a}_{i}" for a, i in asked} | jobs
    nameable = ids - {f"{a}_{i}" for a, i in unnameable}
    batches = polling.question_ids(scheduler, ids, nameable)
    question = [sid for batch in batches for sid in batch]
    named = [sid for sid in question if "_" in sid]
    assert all(sid in question or sid.split("_")[0] in question for sid in ids)
    assert set(named) <= nameable and len(named) <= scheduler.max_named_elements
    assert len(question) == len(set(question))
    assert all(len(",".join(batch)) <= chars for batch in batches)
    # Nothing nameable: every array by its id, once, in the order of the ids.
    bases = sorted({sid.split("_")[0] for sid in ids}, key=int)
    assert [sid for batch in polling.query_ids(scheduler, ids) for sid in batch] == bases
