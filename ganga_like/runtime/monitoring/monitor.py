"""The monitoring service: one thread, one bulk poll per backend per cycle, one commit.

Each cycle asks each backend once about all of its active jobs, feeds the reports to the
status engine and commits everything at once. What the backends are asked about comes from
an in-memory view of the active index (``active_view``) kept up to date from what changed,
never from the registry nor from a full read of the index on every cycle: a cycle that finds
nothing new costs a constant per backend, whatever the number of jobs followed. The
poll interval shrinks to ``min_interval`` while things change and doubles up to
``max_interval`` when nothing does. A backend that cannot be reached leaves its jobs as they
were (they are "stale", not failed) and is asked again next cycle.

Only the holder of the monitor lease (``ganga_like.runtime.monitoring.lease``) polls: with several
sessions on one repository (shared mode), the others only follow its commits, and one of
them takes the lease over when its holder exits or dies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import transaction
from transaction.interfaces import TransientError

from ganga_like.config.sections import Monitor as MonitorSection
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.errors import BackendError, GangaError, PluginError, RepositoryWriteError
from ganga_like.model import plugin_registry
from ganga_like.model.interfaces import (
    ActiveRef,
    IBackend,
    PluginObjects,
    PollContext,
    Poller,
    StatusReport,
    SubmitContext,
    config_of,
)
from ganga_like.model.status import Status
from ganga_like.model.workspace import record_outputs
from ganga_like.repository.connection import Repository, write_errors
from ganga_like.repository.registry import Registry, active_key
from ganga_like.runtime import postprocessing, retrying
from ganga_like.runtime.monitoring import cycle_hold
from ganga_like.runtime.monitoring.active_view import ActiveView
from ganga_like.runtime.monitoring.killed_followed import unfollow_killed
from ganga_like.runtime.monitoring.lease import MonitorLease
from ganga_like.runtime.monitoring.status_engine import apply_report
from ganga_like.runtime.workflow import engine as workflow

__all__ = ["CycleResult", "Monitor", "next_interval"]

log = logging.getLogger("ganga_like.monitor")


# The shortest interval between cycles, used when the jobs still followed are expected to
# end sooner than the minimum interval (see ``next_interval``).
FINISHING_INTERVAL = 0.01


def next_interval(result: CycleResult, since_previous: float, min_interval: float) -> float:
    """When to poll after a busy cycle: ``min_interval``, or sooner if the jobs still
    followed are about to end.

    At the rate the last cycle saw jobs end, the rest would all end in
    ``remaining * since_previous / finished`` seconds; polling then, rather than a full
    minimum interval later, is what makes the end of a run of short subjobs seen soon.
    Long jobs give a long estimate: they keep the minimum interval.
    """
    remaining = result.polled - result.finished
    if not result.finished or remaining < 0:
        return min_interval
    expected = remaining * since_previous / result.finished
    return min(min_interval, max(expected, FINISHING_INTERVAL))


class CycleResult:
    def __init__(self) -> None:
        self.polled = 0
        self.changed = 0
        self.finished = 0  # jobs that reached a final status
        self.stale_backends: dict[str, str] = {}


class Monitor:
    """Keeps the status of active jobs current."""

    def __init__(
        self,
        repo: Repository,
        config: ConfigSnapshot,
        plugin_objects: PluginObjects | None = None,
    ) -> None:
        self.repo = repo
        # The session's configuration: the session puts a new snapshot here when it
        # changes; each cycle reads the one there is then.
        self.config = config
        # The session's, handed to every context (one of its own without a session).
        self.plugin_objects = plugin_objects if plugin_objects is not None else PluginObjects()
        self._tm = transaction.TransactionManager()
        self._conn: Any = None
        self._contexts: dict[str, PollContext] = {}
        self.view = ActiveView()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()  # one cycle at a time (thread or run_once)
        self.stale_backends: dict[str, str] = {}
        self.cycles = 0
        self.commits = 0  # successful commits that changed something: readers refresh on it
        self._committed = threading.Condition()  # notified when ``commits`` grows
        self.cpu_seconds = 0.0  # CPU spent in cycles, for benchmarks and `%monitor status`
        # Only the lease holder polls; without it a cycle only notices others' commits.
        self.lease = MonitorLease(repo.gangadir, uri=repo.uri if repo.on_server else None)
        self._tenure = 0  # the lease acquisition the backend contexts belong to
        self._seen_tid: bytes | None = None
        self._write_failed = False
        self._followed_here = False  # retries handed over: the view must read the index
        # What the lease holder does after each cycle besides retries and postprocessing
        # (work a cycle's commit recorded pending): each returns how much it did.
        self._passes: list[tuple[str, Callable[[], int]]] = []

    # -- control ---------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running or self.repo.read_only:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ganga-monitor", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None
        with self._lock:
            if self._conn is not None:
                try:
                    self._tm.abort()
                    self._conn.close()
                except Exception:  # never block process exit on cleanup
                    pass
                self._conn = None
            self.lease.release()

    def poke(self) -> None:
        """Poll soon (after a submission, or while someone waits)."""
        self._wake.set()
        self.lease.wake_holder()  # the daemon, when it holds the lease

    # -- cycles ----------------------------------------------------------------------

    def wait_for_commit(self, seen: int, timeout: float) -> None:
        """Return once ``commits`` has grown past ``seen``, or after ``timeout`` seconds."""
        with self._committed:
            self._committed.wait_for(lambda: self.commits > seen, timeout)

    def _loop(self) -> None:
        interval = self.config[MonitorSection].min_interval
        previous = time.monotonic()
        while not self._stop.is_set():
            started = time.monotonic()
            section = self.config[MonitorSection]
            try:
                result = self.run_once()
            except Exception:  # the monitor must never die: log and go on
                log.exception("monitoring cycle failed")
                result = CycleResult()
            soon = next_interval(result, started - previous, section.min_interval)
            previous = started
            interval = soon if result.changed else min(interval * 2, section.max_interval)
            if not self.lease.held:
                # A lease its holder left (or died with) is taken within this time.
                interval = min(interval, section.lease_timeout)
            if self._wake.wait(interval):
                self._wake.clear()
                interval = soon
                # A poke asks for a cycle soon, not for cycles back to back: a waiter
                # pokes after every commit it sees.
                self._stop.wait(started + interval - time.monotonic())

    def run_once(self) -> CycleResult:
        """One cycle: poll every backend once, apply, commit. Safe to call from any thread."""
        with self._lock:
            commits = self.commits
            cpu_before = time.thread_time()
            try:
                return self._run_once_locked()
            finally:
                self.cpu_seconds += time.thread_time() - cpu_before
                if self.commits != commits:
                    with self._committed:
                        self._committed.notify_all()

    def _run_once_locked(self) -> CycleResult:
        if self.repo.read_only or not self.lease.hold():
            return self._follow()
        if not self.repo.action_lock.acquire(blocking=False):
            # A GPI action of this process is committing: poll right after it instead
            # of conflicting with it.
            result = CycleResult()
            result.changed = 1
            return result
        try:
            result = self._poll_and_apply()
            # Under the action lock: a retry is a resubmission, never interleaved with
            # one of this process's GPI actions on the same jobs.
            self._retry(result)
        finally:
            self.repo.action_lock.release()
        self._postprocess(result)
        for name, run in self._passes:
            self._run_pass(result, name, run)
        return result

    def add_pass(self, name: str, run: Callable[[], int]) -> None:
        """Run ``run`` after each cycle of the lease holder (the work it does is recorded
        pending by a cycle's commit, and done in transactions of its own)."""
        self._passes.append((name, run))

    def _run_pass(self, result: CycleResult, name: str, run: Callable[[], int]) -> None:
        try:
            done = run()
        except (TransientError, RepositoryWriteError, GangaError) as exc:
            log.warning("monitoring: %s: %s (tried again next cycle)", name, exc)
            result.changed += 1
            return
        if done:
            result.changed += done
            self.commits += 1

    def _poll_and_apply(self) -> CycleResult:
        if self.lease.acquisitions != self._tenure:
            # Newly (re)acquired: what the backends remembered from an earlier tenure
            # (journal offsets) may be behind another holder's commits; start afresh.
            # Reports are idempotent, so reading again applies nothing twice.
            self._tenure = self.lease.acquisitions
            self._contexts.clear()
            self.view = ActiveView()
        if self._conn is None:
            self._conn = self.repo.db.open(transaction_manager=self._tm)
            self.view = ActiveView()
        # Read before the transaction begins: a commit after this is seen next cycle.
        last_tid = self.repo.db.lastTransaction()
        self._tm.begin()
        result = CycleResult()
        registry = Registry(self._conn.root())
        polled: list[Poller] = []  # told whether the cycle committed
        unfollowed: list[tuple[int, int]] = []
        try:
            collect = getattr(self._conn, "collect_invalidations", None)
            invalidated = collect() if collect is not None else None
            if not self.view.refresh(registry.active, last_tid, invalidated) and (
                self._followed_here
            ):
                # Retries this monitor handed over are followed by its own commits, which
                # bring no invalidations: read the index again.
                self.view.resync(registry.active)
            self._followed_here = False
            self._unfollow_killed(registry)
            self._cycle(registry, result, polled, unfollowed)
            cycle_hold.before_commit(self._tm, result.changed)
            with write_errors(self.repo.gangadir):
                self._tm.commit()
        except TransientError:
            # Another session changed the same jobs (or the shared server is restarting):
            # nothing is lost, the same reports are produced again next cycle because
            # backend offsets were not advanced.
            self._tm.abort()
            _abandoned(polled)
            result.changed = 1
            return result
        except RepositoryWriteError as exc:
            # Disk full: the cycle's updates wait in the backends for the next cycle.
            self._tm.abort()
            _abandoned(polled)
            self.repo.release_failed_write()
            if not self._write_failed:
                log.warning("monitoring: %s", exc)
            self._write_failed = True
            return result
        except BaseException:
            self._tm.abort()
            _abandoned(polled)
            raise
        self._write_failed = False
        cycle_hold.after_commit(result.changed)
        if unfollowed:
            self.view.discard(unfollowed)
        if result.changed:
            self.commits += 1
        for poller in polled:
            poller.cycle_committed()
        self.stale_backends = result.stale_backends
        self.cycles += 1
        return result

    def _unfollow_killed(self, registry: Registry) -> None:
        """Subjobs killed in bulk are followed no more (killed_followed), before any poll
        reads the ends of their runs: committed at once, then the cycle goes on in a new
        transaction."""
        dropped = unfollow_killed(registry)
        if dropped:
            with write_errors(self.repo.gangadir):
                self._tm.commit()
            self.view.discard(dropped)
            self._tm.begin()

    def _follow(self) -> CycleResult:
        """Without the lease: notice commits of other processes, so readers refresh."""
        result = CycleResult()
        last = self.repo.db.lastTransaction()
        if last != self._seen_tid:
            self._seen_tid = last
            self.commits += 1
            result.changed = 1
        return result

    def _cycle(
        self,
        registry: Registry,
        result: CycleResult,
        polled: list[Poller],
        unfollowed: list[tuple[int, int]],
    ) -> None:
        for backend, refs in self._to_poll():
            result.polled += len(refs)
            try:
                cls = plugin_registry.find(backend, "backends")
            except PluginError as exc:
                result.stale_backends[backend] = str(exc)
                continue
            assert issubclass(cls, IBackend)
            ctx = self._context(backend, cls)
            poller = ctx.poller
            assert poller is not None
            polled.append(poller)  # abandoned with the cycle if the poll raises
            try:
                reports = cls.poll(ctx, refs)
            except BackendError as exc:
                # What it staged before it failed is dropped, whatever the cycle does.
                polled.pop()
                poller.cycle_abandoned()
                if backend not in self.stale_backends:
                    log.warning(
                        "%s backend cannot be reached, jobs kept as they are: %s", backend, exc
                    )
                result.stale_backends[backend] = str(exc)
                continue
            self._apply(registry, backend, reports, result, unfollowed)

    def _to_poll(self) -> list[tuple[str, Sequence[ActiveRef]]]:
        """The backends with active (sub)jobs, and those whose poller still follows ended
        ones (their use not accounted yet), with their active refs (the view's own
        sequences: a backend follows their changes by identity)."""
        polled: list[tuple[str, Sequence[ActiveRef]]] = [
            (backend, refs) for backend, refs in self.view.backends.items() if refs
        ]
        names = {backend for backend, _refs in polled}
        polled.extend(
            (backend, [])
            for backend, ctx in self._contexts.items()
            if backend not in names and ctx.poller is not None and ctx.poller.keeps_following()
        )
        return polled

    def _apply(
        self,
        registry: Registry,
        backend: str,
        reports: list[StatusReport],
        result: CycleResult,
        unfollowed: list[tuple[int, int]],
    ) -> None:
        touched: dict[int, Any] = {}
        for report in reports:
            job_id, _, sub = report.fqid.partition(".")
            job = registry.lookup(int(job_id), int(sub) if sub else None)
            if job is None:
                continue
            applied = apply_report(job, report, backend)
            result.changed += applied.used_only
            if applied.path:
                result.changed += 1
                touched[int(job_id)] = job.master or job
                if applied.final:
                    result.finished += 1
                    registry.unfollow(job)
                    unfollowed.append(active_key(job))
                    # Where its remote output files went (nowhere, unless it completed),
                    # in this cycle's commit.
                    record_outputs(job, str(self.repo.workspace))
                    if applied.path[-1] is Status.FAILED:
                        retrying.note_failed(registry, job, report)  # in this cycle's commit
        for top in touched.values():
            registry.reindex(top)
            postprocessing.note_completed(registry, top)  # recorded with this cycle
        # Jobs waiting for what changed: decided in this cycle's commit.
        result.changed += workflow.upstream_changed(registry, touched.values(), "monitor")

    # -- postprocessing (ganga_like.runtime.postprocessing) -----------------------------

    def _postprocess(self, result: CycleResult) -> None:
        """After the cycle: run the postprocessors of the jobs recorded pending (by this
        cycle, or by an earlier holder of the lease that did not finish them)."""
        self._pending_pass(
            result,
            lambda conn: postprocessing.run_pending(
                conn, self._tm, self.repo.workspace, self.config
            ),
        )

    # -- retries (ganga_like.runtime.retrying) ----------------------------------------

    def _retry(self, result: CycleResult) -> None:
        """After the cycle: hand the retries recorded pending (by this cycle, or by an
        earlier holder of the lease that did not finish them) to their backends."""
        done = self._pending_pass(
            result,
            lambda conn: retrying.run_pending(
                conn, self._tm, self._submit_context, self.repo.workspace
            ),
        )
        if done:
            self._followed_here = True

    def _pending_pass(self, result: CycleResult, run: Callable[[Any], int]) -> int:
        """One pass over work recorded pending, in its own transactions; how much it did.
        A conflict or a full disk leaves it pending for the next cycle."""
        if self._conn is None:
            return 0
        try:
            done = run(self._conn)
        except (TransientError, RepositoryWriteError):
            self._tm.abort()  # still pending: done next cycle
            result.changed += 1
            return 0
        if done:
            result.changed += done
            self.commits += 1
        return done

    def poller(self, backend: str) -> Poller | None:
        """What ``backend`` keeps between this monitor's cycles; None before its first poll
        (or the first of a new tenure of the lease)."""
        ctx = self._contexts.get(backend)
        return None if ctx is None else ctx.poller

    def _submit_context(self, backend: IBackend) -> SubmitContext:
        return SubmitContext(
            self.repo.gangadir,
            self.repo.workspace,
            config_of(backend, self.config),
            plugin_objects=self.plugin_objects,
        )

    def _context(self, backend: str, cls: type[IBackend]) -> PollContext:
        """The backend's context and its poller, made the first time it is polled (in a
        tenure of the lease): they are kept from cycle to cycle; the context holds the
        backend's part of the configuration as it is now."""
        config = config_of(cls, self.config)  # the same object until the config changes
        ctx = self._contexts.get(backend)
        if ctx is None:
            ctx = PollContext(
                self.repo.gangadir,
                self.repo.workspace,
                config,
                poller=cls.poller_class(),
                plugin_objects=self.plugin_objects,
            )
            self._contexts[backend] = ctx
        elif ctx.config is not config:
            ctx.config = config
        return ctx


def _abandoned(polled: list[Poller]) -> None:
    for poller in polled:
        poller.cycle_abandoned()


def wait_for(predicate: Any, timeout: float | None, step: float = 0.05) -> bool:
    deadline = None if timeout is None else time.monotonic() + timeout
    while not predicate():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(step)
    return True
