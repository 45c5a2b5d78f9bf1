"""``Interval``: an estimate with its two-sided confidence interval, as every statistic of
``reinit_tune.inference`` returns it (what a verdict prints: estimate, CI, n per cell,
method)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """``estimate`` and its ``level`` interval [``low``, ``high``] by ``method``.

    ``n`` holds the runs of each cell the estimate used; ``df`` the t distribution's degrees
    of freedom where the interval is t-based; ``p_value`` the two-sided p of "the estimate
    is 0" where the method defines one. An interval that cannot be computed (fewer than two
    runs) has NaN ends."""

    estimate: float
    low: float
    high: float
    method: str
    n: tuple[int, ...]
    level: float = 0.95
    df: float | None = None
    p_value: float | None = None

    @property
    def defined(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def n_min(self) -> int:
        return min(self.n, default=0)

    def contains(self, value: float) -> bool:
        return self.defined and self.low <= value <= self.high


def undefined(estimate: float, method: str, n: tuple[int, ...], level: float) -> Interval:
    return Interval(estimate, math.nan, math.nan, method, n, level)
