"""Bootstrap confidence intervals of the ratio NEW/BASE of a statistic (mean or median), standard library only.

Percentile bootstrap: both sides are resampled with replacement, independently, `resamples` times with one seeded
`random.Random`, so the same inputs and seed always give the same interval. A side with several runs is resampled
run by run (values of one run are not independent of each other: they share the machine's state); a single run
value by value. Samples longer than `max_samples` are first thinned to an evenly spaced subset (the point estimate
still uses every value).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

STATISTICS: dict[str, Callable[[Sequence[float]], float]] = {"mean": statistics.fmean, "median": statistics.median}


@dataclass(frozen=True)
class RatioCI:
    ratio: float  # statistic(new) / statistic(base), from all values
    low: float
    high: float
    base: float  # statistic(base)
    new: float  # statistic(new)
    n_base: int
    n_new: int
    resampled_base: str = "values"  # "runs": cluster bootstrap over repeated runs
    resampled_new: str = "values"


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


def _resampler(groups: list[list[float]], max_samples: int):
    """How one side is resampled: by run (cluster bootstrap) when it has two or more runs, so that run-to-run
    variation counts; by value within its only run otherwise. Returns (draw(rng) -> values, "runs" | "values").
    By run, n - 1 of the n runs are drawn: the spread of their mean then matches the unbiased variance estimate,
    where n draws would understate it by (n - 1) / n (much, for the few runs a CI job makes)."""
    groups = [g for g in groups if g]
    if len(groups) >= 2:
        thinned = [thin(g, max(1, max_samples // len(groups))) for g in groups]
        return (lambda rng: [v for g in rng.choices(thinned, k=len(thinned) - 1) for v in g]), "runs"
    values = thin(groups[0] if groups else [], max_samples)
    return (lambda rng: rng.choices(values, k=len(values))), "values"


def bootstrap_ratio(
    base: list[list[float]],
    new: list[list[float]],
    *,
    statistic: str = "mean",
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    max_samples: int = 1000,
) -> RatioCI:
    """CI of statistic(new) / statistic(base). Each side is a list of runs, each a list of values; it needs at least
    2 values per side and a positive base statistic."""
    fn = STATISTICS[statistic]
    b_all = [v for g in base for v in g]
    n_all = [v for g in new for v in g]
    if len(b_all) < 2 or len(n_all) < 2:
        raise ValueError("a bootstrap needs at least 2 values on each side")
    b_stat, n_stat = fn(b_all), fn(n_all)
    if b_stat <= 0:
        raise ValueError("the base statistic must be positive")
    rng = random.Random(seed)
    draw_b, by_b = _resampler(base, max_samples)
    draw_n, by_n = _resampler(new, max_samples)
    ratios = []
    for _ in range(resamples):
        sb = fn(draw_b(rng))
        sn = fn(draw_n(rng))
        ratios.append(sn / sb if sb > 0 else math.inf)
    ratios.sort()
    tail = (1 - confidence) / 2
    return RatioCI(
        n_stat / b_stat,
        percentile(ratios, tail),
        percentile(ratios, 1 - tail),
        b_stat,
        n_stat,
        len(b_all),
        len(n_all),
        by_b,
        by_n,
    )
