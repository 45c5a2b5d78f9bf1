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
    def spreadless(self) -> bool:
        """Whether it is undefined for want of spread: the runs vary not at all
        (``no_spread``), so they say nothing of their noise."""
        return not self.defined and self.method.endswith(NO_SPREAD)

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


# what a method's name ends with where its runs did not vary at all
NO_SPREAD = ", no spread"


def no_spread(estimate: float, method: str, n: tuple[int, ...], level: float = 0.95
              ) -> Interval:
    """The interval of runs that did not vary at all (every run of a cell, or every paired
    difference, the same): a point with no measure of noise, so no interval (NaN ends),
    marked in its method."""
    return Interval(estimate, math.nan, math.nan, method + NO_SPREAD, n, level)
