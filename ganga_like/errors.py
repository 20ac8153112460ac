"""The exception tree. Every error ganga_like raises derives from :class:`GangaError`.

Errors are written for the person at the prompt: one line that names the object, what was
expected and what was given. The shell prints them without a traceback.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BackendError",
    "BrokenObjectError",
    "ConfigError",
    "ExportError",
    "GangaError",
    "IllegalTransitionError",
    "JobError",
    "LoadError",
    "PluginError",
    "RepositoryBusyError",
    "RepositoryConflictError",
    "RepositoryCorruptError",
    "RepositoryError",
    "RepositoryOnAnotherHostError",
    "RepositoryWriteError",
    "SchemaError",
    "TemplateError",
    "UnknownStatusError",
    "WaitTimeoutError",
    "safe_repr",
    "shown_failed",
]


class GangaError(Exception):
    """Root of every error ganga_like raises."""


class SchemaError(GangaError, AttributeError, TypeError):
    """An attribute was unknown, read-only, or given a value of the wrong type.

    It also derives from AttributeError and TypeError so that Python idioms such as
    ``getattr(obj, name, default)`` and ``hasattr`` keep working on GPI objects.
    """


class ConfigError(SchemaError):
    """A configuration option is unknown, or was given a value it does not accept."""


class JobError(GangaError):
    """A job action cannot be done in the job's current state."""


class WaitTimeoutError(JobError, TimeoutError):
    """Waiting for jobs (``j.wait()``, ``wait()``, ``as_completed()``) ran out of time; the
    jobs go on. It is also a TimeoutError, as Python's own waits raise."""


class TemplateError(JobError):
    """A job template was asked to do what only a job does (be submitted, killed...)."""


class LoadError(GangaError):
    """A file given to ``load()`` (or ``runfile()``) is missing, or holds something other
    than GPI objects (the message names the file and line); nothing was created."""


class ExportError(GangaError):
    """``export()`` could not write its file; no file was left half written."""


class PostProcessError(JobError):
    """A postprocessor (merger, checker) could not do its work; the message says why."""


class UnknownStatusError(JobError, ValueError):
    """A status name that is not one of the statuses (``wait(until="done")``). It is also a
    ValueError, as a bad argument value."""


class IllegalTransitionError(JobError):
    """A status change that the transition table does not allow."""


class BackendError(GangaError):
    """A backend refused or failed an operation.

    ``transient`` says whether retrying later may succeed (a controller that does not
    answer) or not (a job the scheduler refuses).
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class PluginError(GangaError):
    """A plugin is unknown, or failed to import (the import error is kept as the cause)."""


class BrokenObjectError(GangaError):
    """The object's plugin is missing: it can be listed and removed, nothing else."""


class RepositoryError(GangaError):
    """The job repository cannot be opened or written."""


class RepositoryBusyError(RepositoryError):
    """Another process holds the repository."""

    def __init__(self, message: str, *, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class RepositoryOnAnotherHostError(RepositoryBusyError):
    """The repository is held by a live server on another host (a gangadir on a shared
    filesystem): this host neither writes its file nor starts a server of its own."""

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message, pid=None)
        self.host = host


class RepositoryConflictError(RepositoryError):
    """A change kept colliding with other sessions' changes to the same records (or the
    shared server stayed unreachable) after every retry: it was rolled back, nothing of it
    was saved, and the session goes on working; doing it again usually succeeds."""


class RepositoryCorruptError(RepositoryError):
    """The repository file is damaged; nothing was changed. ``recover_repository`` keeps
    what is intact (and a backup of the damaged file)."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class RepositoryWriteError(RepositoryError):
    """A commit could not be written (disk full, quota, read-only filesystem): the
    transaction was aborted and the repository is unchanged and still usable."""


# Longest repr() quoted in a message: the line stays one readable line.
SHOWN_LIMIT = 80


def safe_repr(value: Any, limit: int = SHOWN_LIMIT) -> str:
    """``repr(value)`` on one line, shortened to ``limit`` characters, for a message about
    a value a user gave; a description of the value when its ``repr()`` raises (never an
    exception: a message must not fail to be written)."""
    try:
        text = repr(value)
    except Exception as exc:
        return f"a {_type_name(value)} object whose repr() raises {type(exc).__name__}"
    if not isinstance(text, str):  # a __repr__ returning something else
        return f"a {_type_name(value)} object"
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown_failed(value: Any) -> bool:
    """Whether ``repr(value)`` raises."""
    try:
        repr(value)
    except Exception:
        return True
    return False


def _type_name(value: Any) -> str:
    try:
        return str(type(value).__name__)
    except Exception:  # a metaclass that breaks even this
        return "unknown"
