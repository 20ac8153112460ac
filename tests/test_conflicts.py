"""Conflicting writers: changes are retried, a change that keeps conflicting is rolled back
with one line, and the session goes on working. The registry's trees merge the concurrent
changes BTrees refuse, only where that is safe.

Conflicts here are real: a second connection to the same database changes the same job
between the start of a transaction and its commit.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import transaction
import ZODB
from BTrees.IOBTree import IOBTree
from ZODB.FileStorage import FileStorage
from ZODB.POSException import ConflictError

from ganga_like import ArgSplitter, CustomMerger, Executable, Job, Local
from ganga_like.errors import RepositoryConflictError
from ganga_like.repository.registry import Registry
from ganga_like.repository.transaction_retry import RetryPolicy
from ganga_like.repository.trees import IdMap, IdSet, KeyMap
from ganga_like.runtime.session import Session

FAST = RetryPolicy(attempts=4, first_delay=0.001, max_delay=0.01)


# -- the trees ------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[ZODB.DB]:
    database = ZODB.DB(FileStorage(str(tmp_path / "Data.fs")))
    yield database
    database.close()


def two_sides(db: ZODB.DB, tree: Any) -> tuple[list[Any], list[transaction.TransactionManager]]:
    """Store ``tree`` and open it in two connections of their own."""
    with db.transaction() as conn:
        conn.root()["tree"] = tree
    tms = [transaction.TransactionManager() for _ in range(2)]
    conns = [db.open(transaction_manager=tm) for tm in tms]
    return [c.root()["tree"] for c in conns], tms


def stored(db: ZODB.DB) -> Any:
    with db.transaction() as conn:
        tree = conn.root()["tree"]
        tree._check()  # the tree's structure is sound
        return dict(tree) if not isinstance(tree, IdSet) else set(tree)


def test_a_small_tree_merges_removing_its_first_key_with_an_addition(db: ZODB.DB) -> None:
    (mine, theirs), (tm_mine, tm_theirs) = two_sides(db, IdMap({0: "a", 1: "b"}))
    del theirs[0]
    tm_theirs.commit()
    mine[5] = "x"
    tm_mine.commit()  # plain BTrees refuse this (the first key was removed)
    assert stored(db) == {1: "b", 5: "x"}


def test_a_small_id_set_merges_emptying_it_with_an_addition(db: ZODB.DB) -> None:
    (mine, theirs), (tm_mine, tm_theirs) = two_sides(db, IdSet([3]))
    theirs.remove(3)
    tm_theirs.commit()
    mine.insert(4)
    tm_mine.commit()
    assert stored(db) == {4}


def test_the_same_key_changed_two_ways_still_conflicts(db: ZODB.DB) -> None:
    (mine, theirs), (tm_mine, tm_theirs) = two_sides(db, KeyMap({"k": 1, "j": 2}))
    theirs["k"] = 2
    del theirs["j"]
    tm_theirs.commit()
    mine["k"] = 3
    with pytest.raises(ConflictError):
        tm_mine.commit()
    tm_mine.abort()


def test_the_first_bucket_of_a_large_tree_merges_removing_the_oldest_key(db: ZODB.DB) -> None:
    # Removing the oldest job while another session adds one to the same bucket.
    tree = IdMap({i: str(i) for i in range(0, 400, 2)})  # even keys: room for odd ones
    (mine, theirs), (tm_mine, tm_theirs) = two_sides(db, tree)
    del theirs[0]
    tm_theirs.commit()
    mine[7] = "new"
    tm_mine.commit()
    expected = {i: str(i) for i in range(2, 400, 2)}
    expected[7] = "new"
    assert stored(db) == expected


def test_a_merge_never_hides_a_key_below_a_raised_separator(db: ZODB.DB) -> None:
    tree = IdMap({i: str(i) for i in range(0, 400, 2)})
    second = list(tree._firstbucket._next.keys())
    (mine, theirs), (tm_mine, tm_theirs) = two_sides(db, tree)
    del theirs[second[0]]  # the node above now separates at second[1]
    tm_theirs.commit()
    mine[second[0] + 1] = "new"  # below second[1]: merged, it could not be found
    with pytest.raises(ConflictError):
        tm_mine.commit()
    tm_mine.abort()
    assert second[0] + 1 not in stored(db)


# -- retried transactions -------------------------------------------------------------


class ConflictMaker:
    """Makes the next ``times`` transactions of a session's thread conflict for real: just
    before each commits (and only if ``when()`` says so), another connection changes
    ``attribute`` of the same job."""

    def __init__(
        self,
        session: Session,
        job_id: int,
        attribute: str,
        value: Callable[[int], Any],
        times: int,
        when: Callable[[], bool] = lambda: True,
    ) -> None:
        self.db = session.repo.db
        self.job_id = job_id
        self.attribute = attribute
        self.value = value
        self.when = when
        self.left = times
        self.made = 0
        self.tm = session.repo.connection().transaction_manager
        self.tm.registerSynch(self)

    def stop(self) -> None:
        self.tm.unregisterSynch(self)

    def newTransaction(self, txn: Any) -> None:  # the synchronizer interface
        if self.left > 0:
            txn.addBeforeCommitHook(self._change_elsewhere)

    def _change_elsewhere(self) -> None:
        if self.left <= 0 or not self.when():
            return
        self.left -= 1
        self.made += 1
        tm = transaction.TransactionManager()
        conn = self.db.open(transaction_manager=tm)
        job = Registry(conn.root()).jobs[self.job_id]
        setattr(job, self.attribute, self.value(self.made))
        tm.commit()
        conn.close()

    def beforeCompletion(self, txn: Any) -> None:
        pass

    def afterCompletion(self, txn: Any) -> None:
        pass


def conflict_when_the_subjobs_are_recorded(session: Session, job: Any) -> ConflictMaker:
    """One real conflict at the commit that records a split job's subjobs: just before
    it, another connection gives the master (``job``, a GPI job) a new subjob tree."""
    from BTrees.IOBTree import IOBTree

    impl = job._job
    return ConflictMaker(
        session, job.id, "_subjobs", lambda n: IOBTree(), times=1, when=lambda: impl.is_master
    )


def test_a_change_that_conflicts_at_every_attempt_is_one_error_and_the_session_goes_on(
    session: Session,
) -> None:
    session.repo.retry_policy = FAST
    j = Job(name="before")
    maker = ConflictMaker(session, j.id, "comment", lambda n: f"theirs {n}", times=100)
    with pytest.raises(RepositoryConflictError) as raised:
        j.comment = "mine"
    maker.stop()
    message = str(raised.value)
    assert "\n" not in message and f"setting Job.comment of job {j.id}" in message
    assert "rolled back" in message
    assert maker.made == FAST.attempts
    # Nothing of it was kept, and every later change works.
    assert j.comment == f"theirs {FAST.attempts}"
    j.name = "after"
    assert j.name == "after"
    other = Job(name="next")
    assert other.id == j.id + 1
    assert session.registry().get(other.id) is not None


def test_a_change_that_conflicts_twice_is_retried_and_saved(session: Session) -> None:
    session.repo.retry_policy = FAST
    j = Job()
    maker = ConflictMaker(session, j.id, "comment", lambda n: f"theirs {n}", times=2)
    j.comment = "mine"
    maker.stop()
    assert maker.made == 2
    session.repo.abort()
    assert j.comment == "mine"


def test_a_submission_that_conflicts_calls_the_backend_once(session: Session) -> None:
    j = Job(application=Executable(exe="true"), backend=Local())
    impl = j._job
    # The transaction recording the intent (it stores the job's description) conflicts
    # once and is retried; the backend is called once, after it.
    maker = ConflictMaker(
        session,
        j.id,
        "_described",
        lambda n: {"other": str(n)},
        times=1,
        when=lambda: impl.status == "submitting",
    )
    j.submit()
    maker.stop()
    assert maker.made == 1
    assert j.wait(timeout=60) == "completed"
    changes = [(old, new) for _t, old, new, _c in j.history if old != new]
    assert changes == [
        ("new", "submitting"),
        ("submitting", "submitted"),
        ("submitted", "running"),
        ("running", "completed"),
    ]


def test_recording_a_split_submission_again_does_not_repeat_subjob_events(session: Session) -> None:
    clean = Job(
        application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"], ["3"]])
    )
    clean.submit()
    j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"], ["3"]]))
    impl = j._job
    # The transaction recording the outcome (the one storing the subjobs, whose state is
    # changed in memory before they are stored) conflicts once and is retried.
    maker = ConflictMaker(
        session,
        j.id,
        "_subjobs",
        lambda n: IOBTree(),
        times=1,
        when=lambda: impl.status == "submitted",
    )
    j.submit()
    maker.stop()
    assert maker.made == 1
    assert j.wait(timeout=60) == "completed" and clean.wait(timeout=60) == "completed"
    for mine, reference in zip(j.subjobs, clean.subjobs, strict=True):
        assert [(o, n) for _t, o, n, _c in mine.history] == [
            (o, n) for _t, o, n, _c in reference.history
        ]


# -- scripts --------------------------------------------------------------------------

SCRIPT = '''
import transaction
from ganga_like.repository.registry import Registry
from ganga_like.repository.transaction_retry import RetryPolicy
from ganga_like.runtime.session import current_session

session = current_session()
session.repo.retry_policy = RetryPolicy(attempts=3, first_delay=0.001, max_delay=0.01)
j = Job(name="scripted")

class Elsewhere:
    """Before every commit of this thread, another connection renames the job."""
    made = 0
    def newTransaction(self, txn):
        txn.addBeforeCommitHook(self.rename)
    def rename(self):
        Elsewhere.made += 1
        tm = transaction.TransactionManager()
        conn = session.repo.db.open(transaction_manager=tm)
        Registry(conn.root()).jobs[j.id].name = f"theirs {Elsewhere.made}"
        tm.commit()
        conn.close()
    def beforeCompletion(self, txn): pass
    def afterCompletion(self, txn): pass

elsewhere = Elsewhere()
session.repo.connection().transaction_manager.registerSynch(elsewhere)
try:
    j.name = "mine"
except RepositoryConflictError as exc:
    print("caught:", exc)
session.repo.connection().transaction_manager.unregisterSynch(elsewhere)
k = Job(name="after")
print("after:", j.name, k.name, len(jobs))
if "again" in sys.argv[1:]:
    session.repo.connection().transaction_manager.registerSynch(elsewhere)
    j.name = "not caught"
'''


def test_a_script_goes_on_after_a_rolled_back_change_and_an_uncaught_one_is_one_line(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    script = tmp_path / "writer.py"
    script.write_text("import sys\n" + SCRIPT)
    ganga = [sys.executable, "-m", "ganga_like.cli"]
    run = subprocess.run(
        [*ganga, str(script)], env=env_for, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    caught = [line for line in run.stdout.splitlines() if line.startswith("caught:")]
    assert len(caught) == 1 and "setting Job.name of job 0" in caught[0]
    assert "after: theirs 3 after 2" in run.stdout

    again = subprocess.run(
        [*ganga, str(script), "again"], env=env_for, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 1
    assert "Traceback" not in again.stdout + again.stderr
    errors = [line for line in again.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: setting Job.name of job 2")


def test_a_postprocessing_outcome_that_conflicts_is_retried_without_running_them_again(
    session: Session, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    merge = tmp_path / "merge.py"
    merge.write_text(
        "def mergefiles(file_list, output_file):\n"
        f"    with open({str(calls)!r}, 'a') as log:\n"
        "        log.write('merged\\n')\n"
        "    open(output_file, 'w').write('merged\\n')\n"
    )
    j = Job(
        application=Executable(exe="true"),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        postprocessors=[CustomMerger(module=str(merge), files=["stdout"])],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert calls.read_text() == "merged\n"
    # Run by hand, the outcome's commit (after the merge wrote its file) meets a change of
    # the same job's postprocessing state from another connection (a conflict no merge
    # resolves), twice: it is retried, the merge is not redone.
    maker = ConflictMaker(
        session,
        j.id,
        "_postprocessing",
        lambda n: ("pending", n, "", ()),
        times=2,
        when=lambda: calls.read_text().count("merged") == 2,
    )
    assert j.runPostProcessors() is True
    maker.stop()
    assert maker.made == 2
    assert calls.read_text() == "merged\nmerged\n"
    assert j.status == "completed"
    assert j._job._postprocessing is not None and j._job._postprocessing[0] == "done"
