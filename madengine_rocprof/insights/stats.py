"""Bootstrap confidence intervals of the ratio NEW/BASE of a statistic (mean or median), standard library only.

Percentile bootstrap: both samples are resampled with replacement, independently, `resamples` times with one seeded
`random.Random`, so the same inputs and seed always give the same interval. Samples longer than `max_samples` are
first thinned to an evenly spaced subset (the point estimate still uses every value).
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

STATISTICS = {"mean": statistics.fmean, "median": statistics.median}


@dataclass(frozen=True)
class RatioCI:
    ratio: float      # statistic(new) / statistic(base), from all values
    low: float
    high: float
    base: float       # statistic(base)
    new: float        # statistic(new)
    n_base: int
    n_new: int


def thin(values: list[float], limit: int) -> list[float]:
    """At most `limit` values, evenly spaced over the (ordered as given) sample."""
    if len(values) <= limit:
        return list(values)
    step = len(values) / limit
    return [values[int(i * step)] for i in range(limit)]


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), q in [0, 1]."""
    pos = q * (len(sorted_values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_ratio(base: list[float], new: list[float], *, statistic: str = "mean", confidence: float = 0.95,
                    resamples: int = 2000, seed: int = 0, max_samples: int = 1000) -> RatioCI:
    """CI of statistic(new) / statistic(base); needs at least 2 values per side and a positive base statistic."""
    fn = STATISTICS[statistic]
    if len(base) < 2 or len(new) < 2:
        raise ValueError("a bootstrap needs at least 2 values on each side")
    b_all, n_all = fn(base), fn(new)
    if b_all <= 0:
        raise ValueError("the base statistic must be positive")
    rng = random.Random(seed)
    b, n = thin(base, max_samples), thin(new, max_samples)
    ratios = []
    for _ in range(resamples):
        sb = fn(rng.choices(b, k=len(b)))
        sn = fn(rng.choices(n, k=len(n)))
        ratios.append(sn / sb if sb > 0 else math.inf)
    ratios.sort()
    tail = (1 - confidence) / 2
    return RatioCI(n_all / b_all, percentile(ratios, tail), percentile(ratios, 1 - tail), b_all, n_all, len(base), len(new))
