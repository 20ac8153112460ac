"""The session: one open repository, its monitor, the settings, for this process.

The GPI opens the session lazily on first use, so ``from ganga_like import *`` costs nothing
until a job is touched. At interpreter exit the monitor stops and the repository closes; the
Local runner keeps running the submitted work.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
from collections.abc import Callable

from traitlets.config import Configurable

from ganga_like.config.sections import Monitor as MonitorSection
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import store as config_store
from ganga_like.model.interfaces import (
    IBackend,
    PluginObjects,
    SubmitContext,
    config_of,
    set_submit_context_source,
)
from ganga_like.model.job import Job
from ganga_like.model.status import set_master_status_order
from ganga_like.repository.connection import Repository
from ganga_like.repository.registry import Registry
from ganga_like.runtime.monitoring.monitor import Monitor
from ganga_like.runtime.settings import Settings, configured_settings, settings_of
from ganga_like.runtime.submission.splitting import build_subjobs

__all__ = [
    "Session",
    "add_monitor_pass",
    "close_session",
    "current_session",
    "existing_session",
    "open_session",
    "set_settings_factory",
]

log = logging.getLogger("ganga_like")

# Longest a status read may lag behind commits the monitor did not tell us about.
REFRESH_AFTER = 0.5


class Session:
    def __init__(self, settings: Settings, config: ConfigSnapshot | None = None) -> None:
        """Open ``settings``' repository; ``config`` (the configuration's snapshot unless
        given) is what the session, its monitor and the plugins' contexts read, with
        ``settings`` in place of its own core options."""
        base = config if config is not None else config_store.snapshot()
        self.config = settings.applied_to(base)
        # Masters' statuses are derived when read, by every part of this process alike.
        set_master_status_order(settings.master_status_order)
        self.repo = Repository(
            settings.gangadir,
            settings.repository_mode,
            uri=settings.repository_url or None,
            options=settings.storage_options(),
        )
        # What plugins keep while the session lasts (a Dask client per scheduler).
        self.plugin_objects = PluginObjects()
        self.monitor = Monitor(self.repo, self.config, self.plugin_objects)
        for name, run in _MONITOR_PASSES.items():
            self.monitor.add_pass(name, functools.partial(run, self))
        # Outside a shell cell, every change is committed at once (scripts, notebooks
        # without the extension); the shell turns this off and commits per cell.
        self.autocommit = True
        self.recovered: list[str] = []
        # Jobs this session left submitting for the next start to recover (fqid -> the
        # line it said): waiting on one would only run out its timeout.
        self.left_submitting: dict[str, str] = {}
        self._seen_commits = -1
        self._refreshed_at = 0.0
        try:
            # Recovery (and its module) only when a submission was in progress: most
            # sessions find none.
            if not self.repo.read_only and self.repo.registry().intents():
                from ganga_like.runtime.submission.recovery import recover_interrupted_submissions

                self.recovered = recover_interrupted_submissions(self.repo, self.submit_context)
        except BaseException:
            # Not opened after all (the next GPI use tries again): release the repository
            # (its server connection, its cache slot) rather than keep it half open.
            self.repo.close()
            raise
        # From now on, ``config`` changes reach the session as new snapshots (and the
        # options it was opened with, tagged runtime=False, are fixed while it is open).
        config_store.follow(self._config_changed, fixes_startup_options=True)
        if settings.monitoring:
            self.monitor.start()

    @property
    def settings(self) -> Settings:
        """The core settings as the session has them now."""
        return settings_of(self.config)

    def registry(self) -> Registry:
        return self.repo.registry()

    def submit_context(self, plugin: object = None) -> SubmitContext:
        """The context a backend is handed: with ``plugin``'s configuration sections (an
        instance or class; None: every section, for the runtime's own use)."""
        config = self.config if plugin is None else config_of(plugin, self.config)
        return SubmitContext(
            self.repo.gangadir,
            self.repo.workspace,
            config,
            build_subjobs=build_subjobs,
            job_of_backend=self._job_of_backend,
            plugin_objects=self.plugin_objects,
        )

    def _config_changed(
        self, snapshot: ConfigSnapshot, section: type[Configurable], option: str
    ) -> None:
        """A runtime ``config`` change: this session's snapshot, with the new value."""
        value = getattr(snapshot[section], option)
        self.use_config(self.config.replaced({section: {option: value}}))

    def use_config(self, config: ConfigSnapshot) -> None:
        """Put ``config`` in place of the session's snapshot: the next submission and the
        next poll read it (the monitor starts or stops as Monitor.enabled says)."""
        was = self.config[MonitorSection].enabled
        self.config = config
        self.monitor.config = config
        now = config[MonitorSection].enabled
        if now and not was:
            self.monitor.start()
        elif was and not now:
            self.monitor.stop()
        self.poke_monitor()

    def _job_of_backend(self, backend: IBackend) -> Job | None:
        jobs = self.registry().jobs
        for job_id in reversed(list(jobs.keys())):  # newest first: the likely one
            job: Job = jobs[job_id]
            if getattr(job, "backend", None) is backend:
                return job
        return None

    def change(self, apply: Callable[[], None], what: str = "the change") -> None:
        """Make a user's change to stored objects: inside a shell cell it waits for the
        cell's commit; otherwise it is committed at once, in a retried transaction (so
        ``apply`` must only change persistent objects)."""
        if self.autocommit or self.repo.read_only:
            # A read-only session refuses the change in one line (nothing is changed,
            # not even in memory, where it would only seem to have been saved).
            self.repo.in_transaction(apply, what=what)
        else:
            apply()

    def refresh(self) -> None:
        """See the latest commits (nothing of ours is pending in autocommit).

        Starting a new transaction is cheap but not free, and status reads call this: it
        is skipped unless the monitor committed since, or a moment passed (other writers).
        """
        if not self.autocommit:
            return
        serial = self.monitor.commits
        now = time.monotonic()
        if serial != self._seen_commits or now - self._refreshed_at > REFRESH_AFTER:
            self._seen_commits = serial
            self._refreshed_at = now
            self.repo.abort()

    def sync(self) -> None:
        """See the latest commits now, also inside a shell cell (``autocommit`` off).

        For actions that watch the repository change (``wait``): what the cell changed so
        far is committed first, as a GPI action would, then new commits become visible.
        """
        if self.autocommit or self.repo.read_only:
            self.repo.abort()
        else:
            self.repo.commit()

    def poke_monitor(self) -> None:
        self.monitor.poke()

    def close(self) -> None:
        config_store.unfollow(self._config_changed)
        self.monitor.stop(timeout=0.8)
        self.plugin_objects.close()
        self.repo.close()


# Work the lease holder's monitor does after each cycle besides retries and postprocessing,
# added by the module that defines it (ganga_like.runtime.workflow.driver), which this one
# cannot import: name -> what runs it, given the session.
_MONITOR_PASSES: dict[str, Callable[[Session], int]] = {}


def add_monitor_pass(name: str, run: Callable[[Session], int]) -> None:
    """Have every session's monitor run ``run(session)`` after each cycle it polls (the
    sessions opened from now on, and the open one)."""
    if name in _MONITOR_PASSES:
        return
    _MONITOR_PASSES[name] = run
    if _current is not None:
        _current.monitor.add_pass(name, functools.partial(run, _current))


_lock = threading.Lock()
_current: Session | None = None
# Where a session opened on first use gets its settings: the configuration (config file,
# environment, the ``ganga`` command line, runtime ``config`` changes).
_settings_factory: Callable[[], Settings] = configured_settings


def set_settings_factory(factory: Callable[[], Settings] | None) -> None:
    """Make ``factory()`` the settings of sessions opened on first use (None: the
    configuration's)."""
    global _settings_factory
    _settings_factory = factory or configured_settings


def existing_session() -> Session | None:
    """The open session, or None (never opens one)."""
    return _current


def open_session(settings: Settings | None = None, config: ConfigSnapshot | None = None) -> Session:
    """Open (or reopen with new settings) the process's session; ``config``: the
    configuration snapshot it carries (the configuration's unless given)."""
    global _current
    with _lock:
        if _current is not None:
            _current.close()
        _current = Session(settings or _settings_factory(), config)
        return _current


def current_session() -> Session:
    global _current
    with _lock:
        if _current is None:
            _current = Session(_settings_factory())
        return _current


def close_session() -> None:
    global _current
    with _lock:
        if _current is not None:
            session, _current = _current, None
            session.close()


atexit.register(close_session)
# Plugin methods called at the prompt without a context (a backend's preview) get one here.
set_submit_context_source(lambda: current_session().submit_context())
