"""Checking a splitter's variations as ``build_subjobs`` would, without making subjobs.

A large split is checked whole before anything is stored, then made a part at a time
(``split_submission``): making every subjob twice cost a seventh of a submission's time.
The check gives each path of a variation the same walk and the same validation as making
the subjob would (one copy of each of the master's components a subjob starts from stands
for every subjob's own), and the same refusal in the same words. Where the outcome could
depend on more than one path at a time it makes that one subjob instead: a variation
setting a component and a path inside it, a path through the master itself, or a class
whose assignment checks its attributes together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ganga_like.errors import GangaError, JobError
from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["VariationChecker"]


class VariationChecker:
    """Checks variations of ``master``'s split; ``make_one(variation, position)`` makes
    the one subjob a variation the walk cannot decide alone needs (``build_subjobs``)."""

    def __init__(
        self,
        master: Job,
        fixed: frozenset[str],
        make_one: Callable[[dict[str, Any], int], object],
    ) -> None:
        source = master.stored()
        parts = job_parts()
        # What a new subjob holds before its variation is applied, as the walk of its
        # first step finds it: a component as its own copy (made at once, or on the
        # first change of a shared one), a shared value as the master's.
        self._start: dict[str, Any] = {}
        for name in parts.subjob_copied:
            value = source.get(name)
            if isinstance(value, GangaObject):
                self._start[name] = value._copy()
        for name in parts.subjob_shared:
            if name in source:
                value = source[name]
                self._start[name] = value._copy() if isinstance(value, GangaObject) else value
        # A subjob's own values the walk may not stand in for (the master, its id).
        self._skeleton = frozenset({"id", "_master", "submit_count"})
        self._fixed = fixed
        self._make_one = make_one

    def check(self, variations: Iterable[dict[str, Any]], first_position: int) -> None:
        """JobError for the first variation ``build_subjobs`` would refuse, in its words."""
        for index, variation in enumerate(variations):
            position = first_position + index
            try:
                if self._needs_a_subjob(variation):
                    raise _Undecided
                for path, value in variation.items():
                    try:
                        self._check_path(path, value)
                    except GangaError as exc:
                        raise JobError(f"splitter: subjob {position}: {exc}") from None
            except _Undecided:
                self._make_one(variation, position)

    def _needs_a_subjob(self, variation: dict[str, Any]) -> bool:
        paths = list(variation)
        if len(paths) > 1:
            # One path inside another's value: the second walks what the first set.
            heads = [p.split(".", 1)[0] for p in paths]
            if len(set(heads)) < len(paths) and any(
                other.startswith(p + ".") for p in paths for other in paths
            ):
                return True
        return any("." in p and p.split(".", 1)[0] in self._skeleton for p in paths)

    def _check_path(self, path: str, value: Any) -> None:
        # The walk of splitting._apply, on the stand-in copies; nothing is assigned.
        names = path.split(".")
        holder: type[GangaObject] = Job
        current: Any = None
        for step, name in enumerate(names[:-1]):
            current = self._start.get(name) if step == 0 else current.stored().get(name)
            if not isinstance(current, GangaObject):
                raise JobError(
                    f"cannot set {path!r}: {holder.__name__}.{name} is not an object "
                    "with attributes"
                )
            holder = type(current)
        attribute = names[-1]
        if attribute in self._fixed:
            raise JobError(f"a splitter cannot set {path!r}")
        if holder._assign is not GangaObject._assign:
            raise _Undecided  # a class checking an attribute against the others
        holder._validate(attribute, value)


class _Undecided(Exception):
    """A variation whose check needs its subjob made."""
