"""What the repository needs of the jobs it stores, declared here, below the model.

The repository keeps jobs without knowing their class. :class:`StoredJob` is what the
registry needs of a job: the model's ``Job`` has these members (a test checks it: the type
checker cannot, the persistent base class being untyped), and the decisions that are the
model's, under which status label a job is listed and what a change of that label means to
the job, are its methods. An object of the job table that lacks them (a job whose class
cannot be loaded comes back as a ZODB broken object) is stored, listed and removed, but
never indexed anew.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["StoredJob"]


@runtime_checkable
class StoredJob(Protocol):
    """A job as the registry sees it."""

    # A persistent object: the registry gives a new one its id and marks it changed.
    _p_changed: bool | None

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

