"""What the repository needs of the jobs it stores, declared here, below the model.

The repository keeps jobs without knowing their class. :class:`StoredJob` is what the
registry needs of a job: the model's ``Job`` has these members (a test checks it: the type
checker cannot, the persistent base class being untyped), and the decisions that are the
model's, under which status label a job is listed and what a change of that label means to
the job, are its methods. An object of the job table that lacks them (a job whose class
cannot be loaded comes back as a ZODB broken object) is stored, listed and removed, but
never indexed anew.

:class:`JobChecks` is what the full check and the recovery need to know of the jobs they
find; the layer that knows the model gives it to them
(``ganga_like.runtime.repository_check``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["JobChecks", "StoredJob"]


@runtime_checkable
class StoredJob(Protocol):
    """A job as the registry sees it."""

    # A persistent object: the registry gives a new one its id and marks it changed.
    _p_changed: bool | None

    def _put(self, name: str, value: Any) -> None:
        """Store a value the system sets (the id), unchecked (see the model's GangaObject)."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def master(self) -> StoredJob | None: ...

    @property
    def backend(self) -> object: ...

    @property
    def submit_count(self) -> int: ...

    def index_label(self) -> str | None:
        """The status label the job is listed under; None for a subjob (only top-level
        jobs are indexed)."""

    def indexed_as(self, label: str) -> None:
        """Told once the registry lists the job under a new ``label``."""

    def find_subjob(self, subjob_id: int) -> StoredJob | None:
        """The subjob of that id, or None."""


class JobChecks(Protocol):
    """The model's part of checking and recovering the jobs of a repository.

    The repository checks its own part: every job under its own id and below the next id,
    every subjob under its own id naming its master, every table consistent."""

    def is_job(self, obj: object) -> bool:
        """Whether an object of the job table that is not a broken one is a job."""

    def validate(self, job: Any) -> None:
        """Raise when the job's own state does not read as the model's (say, a status the
        model does not have)."""

    def subjobs(self, job: Any) -> Any:
        """The table of a master's subjobs (an integer-keyed B-tree), or None."""

    def recount(self, job: Any) -> bool:
        """Read every subjob of a master and correct the master's status counts; whether
        they were wrong. Raises when a subjob cannot be read."""
