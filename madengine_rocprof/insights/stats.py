"""Run-level tests of the ratio NEW/BASE of a statistic (mean or median) and Holm's step-down correction, standard
library only.

Why runs, not steps: the steps (or dispatches) of one run share the machine's clocks, placement and state, and two
runs of the same code differ by more than their steps do. Treating steps as independent samples calls that
run-to-run shift a change (measured: 8 CPU operators "faster" by 3-17x between two identical runs). So each run
gives one value, statistic(its steps), and the test compares the log of those values between the sides with a
pooled two-sample Student t test (equal spread on the log scale: the same code on the same machine type). With one
run per side the between-run spread cannot be estimated at all and no test is made; with one run on one side the
other side's repeated runs supply the spread (a prediction test).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

STATISTICS: dict[str, Callable[[Sequence[float]], float]] = {"mean": statistics.fmean, "median": statistics.median}


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (bisection on t_sf; p in (0, 1))."""
    if not 0 < p < 1:
        raise ValueError("p must lie in (0, 1)")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - p:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf(mid, df) > 1 - p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


@dataclass(frozen=True)
class RatioTest:
    ratio: float  # new / base: the ratio of the geometric means over runs of each run's statistic
    low: float  # confidence interval of the ratio, from the between-run spread
    high: float
    p_slower: float  # one-sided p-value of "new is slower" (H0: ratio <= 1)
    p_faster: float  # one-sided p-value of "new is faster" (H0: ratio >= 1)
    df: int  # degrees of freedom of the between-run spread: runs_base + runs_new - 2
    spread: float  # pooled standard deviation of log(statistic per run): the run-to-run noise, as a fraction
    se: float  # standard error of log(ratio): spread * sqrt(1 / runs_base + 1 / runs_new)
    base: float  # geometric mean over runs of each run's statistic
    new: float


def run_level_test(
    base: list[list[float]], new: list[list[float]], *, statistic: str = "mean", confidence: float = 0.95
) -> RatioTest | None:
    """Compare two sides, each a list of runs (a run: its values). None when the between-run spread cannot be
    estimated (one run per side). Needs positive, finite statistics; raises ValueError otherwise."""
    fn = STATISTICS[statistic]
    runs_b, runs_n = [g for g in base if g], [g for g in new if g]
    if not runs_b or not runs_n:
        raise ValueError("each side needs at least one run with values")
    per_b, per_n = [fn(g) for g in runs_b], [fn(g) for g in runs_n]
    if not all(math.isfinite(v) and v > 0 for v in (*per_b, *per_n)):
        raise ValueError("the statistic of every run must be positive and finite")
    df = len(per_b) + len(per_n) - 2
    if df < 1:
        return None
    log_b, log_n = [math.log(v) for v in per_b], [math.log(v) for v in per_n]
    ss = sum((x - statistics.fmean(log_b)) ** 2 for x in log_b) + sum((x - statistics.fmean(log_n)) ** 2 for x in log_n)
    spread = math.sqrt(ss / df)
    se = spread * math.sqrt(1 / len(per_b) + 1 / len(per_n))
    # the estimate the t test is about: the ratio of the geometric means of the run values (a pooled statistic over
    # every step, e.g. the median of 3 run medians, is not centred where the test's interval is: its A/A error was
    # 6% where 2.5% is stated, measured by benchmarks/insights/gate_power.py)
    b_all, n_all = math.exp(statistics.fmean(log_b)), math.exp(statistics.fmean(log_n))
    shift = statistics.fmean(log_n) - statistics.fmean(log_b)
    ratio = math.exp(shift)
    if se > 0:
        p_slower = t_sf(shift / se, df)
        half = t_quantile(1 - (1 - confidence) / 2, df) * se
    else:  # identical runs within each side: any shift is exact
        p_slower = 0.0 if shift > 0 else 1.0
        half = 0.0
    p_faster = 1.0 - p_slower if se > 0 else (0.0 if shift < 0 else 1.0)
    return RatioTest(
        ratio, ratio * math.exp(-half), ratio * math.exp(half), p_slower, p_faster, df, spread, se, b_all, n_all
    )


def p_beyond(test: RatioTest, threshold: float) -> float:
    """One-sided p-value of "new is slower than base by more than `threshold`" (H0: ratio <= 1 + threshold). At most
    (1 - confidence) / 2 exactly when the interval's fast end (`low`) lies beyond 1 + threshold."""
    shift = math.log(test.ratio) - math.log1p(threshold)
    if test.se > 0:
        return t_sf(shift / test.se, test.df)
    return 0.0 if shift > 0 else 1.0


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given): rejecting those <= alpha keeps the family-wise error
    rate at alpha for any dependence between the tests."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def runs_to_decide(
    test: RatioTest, threshold: float, *, confidence: float = 0.95, runs_base: int, runs_new: int, cap: int = 1000
) -> int | None:
    """How many more runs a side would make the interval decide, if the observed slowdown and run-to-run spread
    held: short of 1 + threshold, the interval's upper end must drop under it (a pass); beyond it, the lower end must
    rise above it (a regression). None when no number of runs up to `cap` would (the slowdown sits on the threshold)."""
    margin = abs(math.log1p(threshold) - math.log(test.ratio))
    if test.spread <= 0:
        return 0
    if margin <= 0:
        return None
    def decides(more: int) -> bool:
        nb, nn = runs_base + more, runs_new + more
        half = t_quantile(1 - (1 - confidence) / 2, nb + nn - 2) * test.spread * math.sqrt(1 / nb + 1 / nn)
        return half < margin

    if not decides(cap):
        return None
    low, high = 0, cap  # the half-width shrinks with every added run: bisect for the first that decides
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return high
