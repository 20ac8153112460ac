"""Finding the jobs a subcommand is about."""

from __future__ import annotations

from ganga_like.errors import JobError
from ganga_like.model.job import Job
from ganga_like.query import parse
from ganga_like.runtime.search import KNOWN_ROOTS, search
from ganga_like.runtime.session import Session

__all__ = ["find_job", "matching_jobs"]


def find_job(session: Session, text: str) -> Job | None:
    head, _, tail = text.strip().partition(".")
    try:
        job_id, sub = int(head), int(tail) if tail else None
    except ValueError:
        raise JobError(f"not a job id: {text!r}; use 12 or 12.3") from None
    return session.registry().lookup(job_id, sub)


def matching_jobs(session: Session, text: str) -> list[Job]:
    query = parse(text, known_roots=KNOWN_ROOTS)
    registry = session.registry()
    found = [registry.get(i) for i in search(registry, query)]
    return [j for j in found if j is not None]
