"""Opening the repository for one subcommand, and the exit codes they share."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ganga_like.errors import GangaError, RepositoryBusyError

if TYPE_CHECKING:
    from ganga_like.config.fast_settings import ListingSettings
    from ganga_like.runtime.session import Session
    from ganga_like.runtime.settings import Settings

__all__ = [
    "DECLINED",
    "ERROR",
    "NOTHING",
    "OK",
    "PIPE_CLOSED",
    "USAGE",
    "UsageError",
    "configured_settings",
    "error",
    "from_configuration",
    "listing_settings",
    "monitoring_asked",
    "session_for",
    "using_settings",
]

OK, ERROR, USAGE, NOTHING, DECLINED = 0, 1, 2, 3, 4
# The reader of our output went away (``ganga jobs | head -1``): the status a shell gives
# any Unix filter killed by SIGPIPE, and no message.
PIPE_CLOSED = 128 + 13


class UsageError(GangaError):
    """The command line itself is wrong (a malformed id, no jobs named): status 2."""


def error(message: str) -> None:
    print(f"ganga: {message}", file=sys.stderr)


# Where the running subcommand's settings come from, as its caller gave them (dispatch).
_source: Callable[[], Settings] | None = None


@contextmanager
def using_settings(source: Callable[[], Settings]) -> Iterator[None]:
    """Give the subcommands run inside ``source()`` as their settings."""
    global _source
    saved, _source = _source, source
    try:
        yield
    finally:
        _source = saved


def from_configuration() -> Settings:
    """The settings of this process's configuration (file, environment, command line,
    runtime changes)."""
    from ganga_like.runtime.settings import configured_settings as configured

    return configured()


def configured_settings() -> Settings:
    """The settings the running subcommand was given; outside one, the configuration's."""
    return (_source or from_configuration)()


def listing_settings() -> ListingSettings:
    """The settings ``ganga jobs`` asks the jobs-table cache and server with: read without
    the configuration machinery (:mod:`ganga_like.config.fast_settings`) when the command
    runs with this process's configuration and nothing has built it yet (so that no
    command line or runtime change is in it), and that reading can decide."""
    if _source in (None, from_configuration) and "ganga_like.config.store" not in sys.modules:
        from ganga_like.config.fast_settings import fast_settings

        fast = fast_settings()
        if fast is not None:
            return fast
    return configured_settings()


def monitoring_asked() -> bool:
    """Whether the running subcommand may ask backends (``--no-monitor``, or
    ``Monitor.enabled`` off, says no)."""
    return configured_settings().monitoring


@contextmanager
def session_for(*, write: bool, refresh: bool) -> Iterator[Session]:
    """A session without a monitoring thread; with ``refresh``, one cycle brings statuses
    up to date first, unless monitoring is off (``--no-monitor``): then no backend is asked.

    A read-only command on a repository another session holds reads a snapshot instead of
    failing; a command that changes jobs needs the repository (or shared mode)."""
    # Imported here: parsing a command line (and --help) needs no repository code.
    from ganga_like.runtime.session import close_session, open_session

    settings = configured_settings()
    refresh = refresh and settings.monitoring
    settings.monitoring = False
    try:
        session = open_session(settings)
    except RepositoryBusyError:
        if write:
            raise
        settings.repository_mode = "readonly"
        session = open_session(settings)
    try:
        if refresh and not session.repo.read_only:
            session.monitor.run_once()
            session.repo.abort()
        yield session
    finally:
        close_session()
