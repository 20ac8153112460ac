"""``Retry``: the monitor resubmits (sub)jobs that failed for one of the named causes, at
most ``attempts`` times, growing the named resources first (see
``ganga_like.runtime.retrying``)."""

from __future__ import annotations

from typing import Any, ClassVar

import traitlets

from ganga_like.model.interfaces import FAILURE_CAUSES, IRetry, growable_resources

__all__ = ["Causes", "GrowFactors", "Retry"]


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
                    f"expected {self.info_text}, got {item!r} (a cause Retry does not know)"
                )
        return list(dict.fromkeys(value))


class GrowFactors(traitlets.Dict):
    """Resource name -> factor (a number of at least 1), each name one a backend grows."""

    info_text = "a dict of resource name -> factor >= 1, e.g. {'memory': 2.0}"

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
                    f"expected {self.info_text}, got {name!r}: no backend grows it "
                    f"(backends grow {can})"
                )
            if isinstance(factor, bool) or not isinstance(factor, int | float):
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {factor!r} for {name!r} (not a number)"
                )
            if not factor >= 1:  # also refuses NaN
                raise traitlets.TraitError(
                    f"expected {self.info_text}, got {factor!r} for {name!r} (below 1)"
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
            1, min=0, help="How many times at most a (sub)job is resubmitted (0: never)."
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
