"""A histogram as plain data: equal-width bins over the values seen, for plots of how long
runs took (``JobStats.run_time_histogram``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_BINS", "Histogram"]

# Enough bins to show a shape, few enough that each holds a few runs at 100,000.
MAX_BINS = 40


@dataclass(frozen=True)
class Histogram:
    """``counts[i]`` values fell in ``[edges[i], edges[i + 1])`` (the last bin also holds
    its upper edge); no bins when there were no values."""

    edges: tuple[float, ...] = ()
    counts: tuple[int, ...] = ()

    @classmethod
    def of(cls, values: list[float], max_bins: int = MAX_BINS) -> Histogram:
        if not values:
            return cls()
        low, high = min(values), max(values)
        # About sqrt(n) bins (a common rule), at most max_bins; one bin when all are equal.
        bins = 1 if high <= low else max(1, min(max_bins, math.isqrt(len(values))))
        width = (high - low) / bins if high > low else 1.0
        counts = [0] * bins
        last = bins - 1
        for value in values:
            counts[min(last, int((value - low) / width))] += 1
        top = high if high > low else low + 1.0
        edges = (*(low + width * i for i in range(bins)), top)
        return cls(edges, tuple(counts))

    @property
    def total(self) -> int:
        return sum(self.counts)

    def to_dict(self) -> dict[str, Any]:
        return {"edges": list(self.edges), "counts": list(self.counts)}
