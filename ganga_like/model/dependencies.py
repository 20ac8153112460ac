"""What a job waits for (``after=``), as it is stored.

A job refers to the jobs it waits for by fqid ("12", "12.3"), never by holding them: a
copy, an export or a removal of either side never drags the other along, and the
repository's reverse index (``ganga_like.runtime.workflow.index``) is keyed by the same
text. Users give jobs, subjobs, slices or ids; the traits here turn any of those into the
stored tuple of fqids, and refuse everything else in one line.

``when`` says which outcome of the upstream jobs the job waits for, ``allow_failed`` how
many of their (sub)jobs may fail without spoiling a ``completed`` condition: a count
(``int >= 0``) or a fraction of them (``0 < x < 1``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import traitlets

from ganga_like.errors import safe_repr
from ganga_like.model.text import Text

__all__ = ["WHEN_CHOICES", "AllowFailed", "Upstreams", "When", "fqid_of", "fqid_parts"]

WHEN_CHOICES = ("completed", "finished", "failed")
_FQID = re.compile(r"^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?$")


def fqid_parts(fqid: str) -> tuple[int, int | None]:
    """(job id, subjob id or None) of a stored fqid."""
    job_id, _, sub = fqid.partition(".")
    return int(job_id), int(sub) if sub else None


def _shown(value: Any) -> str:
    if isinstance(value, str | int | float) or value is None:
        return safe_repr(value)
    return f"a {type(value).__name__}"


def fqid_of(value: Any) -> str:
    """The fqid of one thing a job may wait for (a job, a subjob or an id); a TraitError
    in words otherwise."""
    if isinstance(value, bool):
        raise traitlets.TraitError(f"expected a job, a subjob, a slice or an id, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise traitlets.TraitError(f"expected a job id (0 or more), not {value}")
        return str(value)
    if isinstance(value, str):
        text = value.strip()
        if not _FQID.match(text):
            raise traitlets.TraitError(
                f"expected a job id such as '12' or a subjob id such as '12.3', not {value!r}"
            )
        return text
    fqid = getattr(value, "fqid", None)  # a job, stored or through its GPI object
    if isinstance(fqid, str) and _FQID.match(fqid):
        return fqid
    raise traitlets.TraitError(f"expected a job, a subjob, a slice or an id, not {_shown(value)}")


class Upstreams(traitlets.TraitType[tuple[str, ...], Any]):
    """The jobs a job waits for: one job, subjob or id, or a list or slice of them;
    stored as a tuple of fqids, each once, in the order given."""

    default_value: tuple[str, ...] = ()
    info_text = "a job, a subjob, a slice or an id, or a list of them"

    def validate(self, obj: Any, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        items: Iterable[Any]
        if isinstance(value, str | int) or hasattr(value, "fqid"):
            items = [value]
        elif isinstance(value, Iterable) and not isinstance(value, dict | bytes):
            items = list(value)
        else:
            raise traitlets.TraitError(f"expected {self.info_text}, not {_shown(value)}")
        seen: dict[str, None] = {}
        for item in items:
            seen.setdefault(fqid_of(item), None)
        return tuple(seen)


class When(traitlets.Unicode):  # type: ignore[type-arg]
    """Which outcome of the upstream jobs the job waits for."""

    info_text = f"one of {', '.join(repr(w) for w in WHEN_CHOICES)}"

    def validate(self, obj: Any, value: Any) -> str:
        if not isinstance(value, str) or value.lower() not in WHEN_CHOICES:
            raise traitlets.TraitError(f"expected {self.info_text}, not {_shown(value)}")
        return value.lower()


class AllowFailed(traitlets.TraitType[int | float, Any]):
    """How many failed upstream (sub)jobs a ``completed`` condition tolerates: a count
    (an int, 0 or more) or a fraction of them (a float strictly between 0 and 1)."""

    default_value = 0
    info_text = "a count (an int, 0 or more) or a fraction (0 < x < 1)"

    def validate(self, obj: Any, value: Any) -> int | float:
        if isinstance(value, bool):
            raise traitlets.TraitError(f"expected {self.info_text}, not {value!r}")
        if isinstance(value, int):
            if value < 0:
                raise traitlets.TraitError(f"expected {self.info_text}, not {value}")
            return value
        if isinstance(value, float):
            if not 0.0 < value < 1.0:
                raise traitlets.TraitError(f"expected {self.info_text}, not {value!r}")
            return value
        raise traitlets.TraitError(f"expected {self.info_text}, not {_shown(value)}")


def workflow_schema() -> dict[str, traitlets.TraitType[Any, Any]]:
    """Job's schema entries of workflows: what it waits for, and the workflow it is in."""
    return {
        "after": Upstreams(
            help="Jobs, subjobs or slices this job waits for (stored by id): submit() "
            "leaves it waiting until their outcome is what `when` asks."
        ),
        "when": When(
            "completed",
            help="What `after` waits for: 'completed' (default), 'finished' (any final "
            "state) or 'failed'.",
        ),
        "allow_failed": AllowFailed(
            help="Failed upstream (sub)jobs a 'completed' condition tolerates: a count (int "
            ">= 0) or a fraction (0 < x < 1)."
        ),
        "workflow": Text(
            what="a workflow name",
            help="Its workflow's name: throttle(name, n) caps its active (sub)jobs at n.",
        ).tag(subjob="share"),
    }
