"""Run-level tests of the ratio NEW/BASE of a statistic (mean or median) and Holm's step-down correction, standard
library only.

Why runs, not steps: the steps (or dispatches) of one run share the machine's clocks, placement and state, and two
runs of the same code differ by more than their steps do. Treating steps as independent samples calls that
run-to-run shift a change (measured: 8 CPU operators "faster" by 3-17x between two identical runs). So each run
gives one value, statistic(its steps), and the test compares the log of those values between the sides with
Welch's two-sample t test: each side's run-to-run spread is estimated from its own runs, because on a machine whose
load changes while the runs are made the two sides need not share one (real A/A runs on a shared CPU: 0.37 on one
side against 1.65 on the other). So each side needs 2 runs or more; with one run on a side no test is made (an
earlier prediction test lent that side the other's spread: on real loaded runs it both called an unchanged run 1000x
slower and passed a real 4x slowdown, benchmarks/insights/README.md).
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
    df: float  # Welch-Satterthwaite degrees of freedom (from min(runs) - 1 to runs_base + runs_new - 2)
    spread: float  # pooled standard deviation of log(statistic per run): the run-to-run noise, as a fraction
    se: float  # standard error of log(ratio): sqrt(var_base / runs_base + var_new / runs_new)
    base: float  # geometric mean over runs of each run's statistic
    new: float
    var_base: float = 0.0  # variance of log(statistic per run) on each side
    var_new: float = 0.0


def welch(var_b: float, n_b: int, var_n: float, n_n: int) -> tuple[float, float]:
    """Standard error of the difference of the sides' log means, and its Welch-Satterthwaite degrees of freedom."""
    wb, wn = var_b / n_b, var_n / n_n
    se = math.sqrt(wb + wn)
    if se == 0:
        return 0.0, float(n_b + n_n - 2)
    return se, (wb + wn) ** 2 / (wb * wb / (n_b - 1) + wn * wn / (n_n - 1))


def run_level_test(
    base: list[list[float]], new: list[list[float]], *, statistic: str = "mean", confidence: float = 0.95
) -> RatioTest | None:
    """Compare two sides, each a list of runs (a run: its values). None when a side's run-to-run spread cannot be
    estimated (one run on a side). Needs positive, finite statistics; raises ValueError otherwise."""
    fn = STATISTICS[statistic]
    runs_b, runs_n = [g for g in base if g], [g for g in new if g]
    if not runs_b or not runs_n:
        raise ValueError("each side needs at least one run with values")
    per_b, per_n = [fn(g) for g in runs_b], [fn(g) for g in runs_n]
    if not all(math.isfinite(v) and v > 0 for v in (*per_b, *per_n)):
        raise ValueError("the statistic of every run must be positive and finite")
    if len(per_b) < 2 or len(per_n) < 2:
        return None
    log_b, log_n = [math.log(v) for v in per_b], [math.log(v) for v in per_n]
    var_b, var_n = statistics.variance(log_b), statistics.variance(log_n)
    spread = math.sqrt(((len(log_b) - 1) * var_b + (len(log_n) - 1) * var_n) / (len(log_b) + len(log_n) - 2))
    se, df = welch(var_b, len(log_b), var_n, len(log_n))
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
    return RatioTest(ratio, ratio * math.exp(-half), ratio * math.exp(half), p_slower, p_faster, df, spread, se,
                     b_all, n_all, var_b, var_n)


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
    """How many more runs a side would make the interval decide, if the observed slowdown and each side's run-to-run
    spread held: short of 1 + threshold, the interval's upper end must drop under it (a pass); beyond it, the lower
    end must rise above it (a regression). None when no number of runs up to `cap` would (the slowdown sits on the
    threshold)."""
    margin = abs(math.log1p(threshold) - math.log(test.ratio))
    if test.se <= 0:
        return 0
    if margin <= 0:
        return None

    def decides(more: int) -> bool:
        se, df = welch(test.var_base, runs_base + more, test.var_new, runs_new + more)
        return t_quantile(1 - (1 - confidence) / 2, df) * se < margin

    if not decides(cap):
        return None
    low, high = 0, cap  # the half-width shrinks with every added run: bisect for the first that decides
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return high
