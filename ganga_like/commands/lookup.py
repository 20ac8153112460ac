"""Finding the jobs a subcommand is about: bare ids (``3``, ``3.1``, ``1,4``) or a query."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ganga_like.commands.context import UsageError
from ganga_like.model.job import Job
from ganga_like.runtime.search import parse_job_query, search
from ganga_like.runtime.session import Session

__all__ = ["Selection", "find_job", "matching_jobs", "select"]

_ID = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
_SEPARATORS = re.compile(r"[\s,]+")


def find_job(session: Session, text: str) -> Job | None:
    # Digits only: int() would also take "-1", "+1" and "1_0", none of them an id.
    if not _ID.fullmatch(text.strip()):
        raise UsageError(f"not a job id: {text!r}; use 12 or 12.3")
    head, _, tail = text.strip().partition(".")
    job_id, sub = int(head), int(tail) if tail else None
    found: Job | None = session.registry().lookup(job_id, sub)
    return found


def matching_jobs(session: Session, text: str) -> list[Job]:
    query = parse_job_query(text)
    registry = session.registry()
    found = [registry.get(i) for i in search(registry, query)]
    return [j for j in found if j is not None]


@dataclass
class Selection:
    """The jobs a command line names, and how it named them."""

    text: str
    jobs: list[Job]
    by_id: bool  # named one by one (``3 4.1``), not selected by a query
    missing: list[str] = field(default_factory=list)  # ids named that do not exist


def ids_in(words: list[str]) -> list[str] | None:
    """The ids when ``words`` are nothing but job ids (``3``, ``3.1``, ``1,4``), else None."""
    tokens = [t for t in _SEPARATORS.split(" ".join(words)) if t]
    if not tokens or not all(_ID.fullmatch(t) for t in tokens):
        return None
    return list(dict.fromkeys(tokens))  # each once, in the order given


def select(session: Session, words: list[str]) -> Selection:
    """The jobs ``words`` name: bare ids if that is all they are, else a query."""
    text = " ".join(words)
    ids = ids_in(words)
    if ids is None:
        return Selection(text, matching_jobs(session, text), by_id=False)
    found: list[Job] = []
    missing: list[str] = []
    for token in ids:
        job = find_job(session, token)
        if job is None:
            missing.append(token)
        else:
            found.append(job)
    return Selection(text, found, by_id=True, missing=missing)
