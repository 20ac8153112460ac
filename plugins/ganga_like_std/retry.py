"""``Retry``: the monitor resubmits (sub)jobs that failed for one of the named causes, at
most ``attempts`` times, growing the named resources first (see
``ganga_like.runtime.retrying``)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import traitlets

from ganga_like.model.interfaces import FAILURE_CAUSES, IRetry, growable_resources
from ganga_like.model.values import safe_repr

__all__ = ["MAX_ATTEMPTS", "MAX_GROWTH", "Causes", "GrowFactors", "Retry"]

# A (sub)job failing this often fails for a reason no retry mends; a larger count is a
# mistake that would keep the cluster busy for nothing.
MAX_ATTEMPTS = 100
# The largest factor a resource grows by at each retry (a walltime times 100 is days).
MAX_GROWTH = 100.0


class Causes(traitlets.List[Any]):
    """A list of failure causes, each one of ``FAILURE_CAUSES``."""

    info_text = "a list of " + ", ".join(repr(c) for c in FAILURE_CAUSES)

    def __init__(self, default: list[str], **kwargs: Any) -> None:
        super().__init__(default_value=default, **kwargs)

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]  # on="timeout" for on=["timeout"]
        if not isinstance(value, list | tuple):
            self.error(obj, value)
        for item in value:
            if item not in FAILURE_CAUSES:
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {safe_repr(item)} "
                    "(a cause Retry does not know)"
                )
        return list(dict.fromkeys(value))


class GrowFactors(traitlets.Dict):
    """Resource name -> factor (a number of at least 1), each name one a backend grows."""

    info_text = (
        f"a dict of resource name -> factor from 1 to {MAX_GROWTH:g}, e.g. {{'memory': 2.0}}"
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(default_value={}, **kwargs)

    def validate(self, obj: Any, value: Any) -> Any:
        if not isinstance(value, dict):
            self.error(obj, value)
        known = growable_resources()
        checked: dict[str, float] = {}
        for name, factor in value.items():
            if name not in known:
                can = ", ".join(repr(n) for n in sorted(known)) or "none"
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {safe_repr(name)}: no backend grows it "
                    f"(backends grow {can})"
                )
            if isinstance(factor, bool) or not isinstance(factor, int | float):
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {safe_repr(factor)} for {name!r} "
                    "(not a number)"
                )
            if not 1 <= factor <= MAX_GROWTH:  # also refuses NaN and infinities
                why = "below 1" if factor < 1 else f"above {MAX_GROWTH:g}"
                if not math.isfinite(factor):
                    why = "not a finite number"
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {factor!r} for {name!r} ({why})"
                )
            checked[name] = float(factor)
        return checked


class Retry(IRetry):
    """Resubmit a (sub)job that failed, by the monitor: at most ``attempts`` times since
    the user last (re)submitted it, when its cause is in ``on`` ('failed': it failed by
    itself, 'timeout': its walltime ran out, 'out_of_memory': it ran out of memory),
    growing each resource named in ``grow`` by its factor first (on backends that have
    it: Slurm's memory and walltime). A killed job is never retried."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "attempts": traitlets.Int(
            1,
            min=0,
            max=MAX_ATTEMPTS,
            help=f"How many times at most a (sub)job is resubmitted (0: never; at most "
            f"{MAX_ATTEMPTS}).",
        ).tag(changeable_at_resubmit=True),
        "on": Causes(
            ["failed"],
            help="The causes retried: any of " + ", ".join(repr(c) for c in FAILURE_CAUSES) + ".",
        ).tag(changeable_at_resubmit=True),
        "grow": GrowFactors(
            help="Resource -> factor applied before each retry, e.g. {'walltime': 2.0}."
        ).tag(changeable_at_resubmit=True),
    }
    _positional = ("attempts",)

    attempts: int
    on: tuple[str, ...]
    grow: dict[str, float]

    def wants(self, cause: str, done: int) -> bool:
        return cause in self.on and done < self.attempts

    def limit(self) -> int:
        return self.attempts

    def factors(self) -> dict[str, float]:
        return dict(self.grow)
