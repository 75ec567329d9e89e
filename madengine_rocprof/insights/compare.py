"""Compare two sets of repeated runs with statistics: per-step times from workload_result.json and per-kernel
durations from the profiler output, a run-level test of each metric (insights/stats.py), and a gate whose verdict is
passed, regression or inconclusive.

Evidence is the run: each run contributes one value per metric (the statistic of its steps or dispatches), because
runs of the same code differ by more than their steps do. Each side's runs give its own spread (Welch's test: the
load of a shared machine changes while the runs are made); with one run on a side its spread is unknown and the
metric is `inconclusive: repeat the runs`.

Every ratio is a speedup, base / new, as in `report`: above 1 is faster, below 1 slower. The threshold is a
slowdown: new slower than base by more than `threshold` (speedup under 1 / (1 + threshold)).

The step time is the primary endpoint, tested on its own: passed only when its interval rules out a slowdown
beyond the threshold; a regression only when its interval rules out a slowdown within the threshold (the interval
lies entirely beyond it: the rule is symmetric); otherwise inconclusive. The kernels (operators) are secondary:
Holm's correction among themselves, one-sided, at (1 - confidence) / 2 family-wise, for "slower" and for "slower by
more than the threshold", so that a slowdown at the threshold fails the gate with probability at most
1 - confidence (primary and secondary together), and no change far less. Without step times the kernels decide:
passed when every tested kernel's interval rules out a slowdown beyond the threshold.
"""

from __future__ import annotations

import datetime
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from madengine_rocprof.errors import UserError
from madengine_rocprof.insights.stats import STATISTICS, RatioTest, holm, p_beyond, run_level_test, runs_to_decide
from madengine_rocprof.reports import kineto_reader
from madengine_rocprof.reports.analysis import merge_kernels
from madengine_rocprof.reports.categories import classify
from madengine_rocprof.reports.discover import iter_dispatches, load_run
from madengine_rocprof.reports.model import KernelStats
from madengine_rocprof.wrapper.contracts import WorkloadResult

SCHEMA_VERSION = 4  # 4: p_beyond / p_regression; a regression needs the slowdown shown beyond the threshold
# 3: speedup (base/new) instead of ratio (new/base); gate verdict passed/regression/inconclusive
# 2: run-level t test and Holm (p_slower, p_faster, p_adjusted, df, spread); no bootstrap
INCONCLUSIVE = "inconclusive: repeat the runs"
PASSED, REGRESSION, UNDECIDED = "passed", "regression", "inconclusive"  # the gate's verdicts
RUN_MARKERS = ("run.json", "workload_result.json")
PER_DISPATCH = ("rocprofv3-csv", "legacy-csv", "rocprofv3-json", "rocpd", "rocprofv3-pftrace", "kineto")


@dataclass
class Settings:
    statistic: str = "median"  # per run; the mean let preempted steps and dispatches hide a 3x slowdown (A/A bench)
    confidence: float = 0.95
    threshold: float = 0.05  # a regression: new slower than base by more than this fraction
    top: int = 10  # kernels compared: the top N of the base by total time ...
    min_share: float = 0.01  # ... that have at least this share of the base's kernel time


@dataclass
class Side:
    label: str
    root: Path
    runs: list[Path] = field(default_factory=list)
    step_times_ms: list[list[float]] = field(default_factory=list)  # per run
    kernels: dict[str, KernelStats] = field(default_factory=dict)
    kernel_time_ns: float = 0.0
    # per kernel, per run: ns per dispatch (a run with only statistics: its average, one value)
    kernel_samples: dict[str, list[list[float]]] = field(default_factory=dict)
    loaded: list = field(default_factory=list, repr=False)  # (RunData, merged kernels) per run, until sampled


def find_runs(root: Path) -> list[Path]:
    """The run directories below ROOT (those holding run.json or workload_result.json, or PyTorch profiler traces:
    one folder per profiled run, its ranks' files side by side; shallowest), else ROOT."""
    if not root.is_dir():
        raise UserError(f"not a directory: {root}", fix="pass a run directory, or a directory of repeated runs")
    if any((root / m).is_file() for m in RUN_MARKERS):
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if any(m in filenames for m in RUN_MARKERS) or any(
            kineto_reader.is_kineto_trace(Path(dirpath) / f) for f in filenames if f.endswith(kineto_reader.SUFFIXES)
        ):
            found.append(Path(dirpath))
            dirnames[:] = []
    return found or [root]


def _step_times(workload: WorkloadResult | None, run: Path) -> list[float]:
    values = workload.get("step_times_ms") if workload else None
    if values is None:
        return []
    where = "step_times_ms"
    bad = not isinstance(values, list)
    if not bad:
        for i, v in enumerate(values):
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
                where, bad = f"step_times_ms[{i}]", True
                break
    if bad:
        raise UserError(
            "step_times_ms must be a list of finite, non-negative numbers (no Infinity or NaN)",
            file=str(run / "workload_result.json"),
            where=where,
            fix="re-run the workload; a step time is a measured number of milliseconds",
        )
    return [float(v) for v in values]


def load_side(root: Path, label: str) -> Side:
    side = Side(label=label, root=root, runs=find_runs(root))
    for path in side.runs:
        data = load_run(path, path.name)
        side.step_times_ms.append(_step_times(data.workload, path))
        kernels = merge_kernels(data)
        for name, stats in kernels.items():
            side.kernels.setdefault(name, KernelStats()).merge(stats)
        side.loaded.append((data, kernels))
    side.kernel_time_ns = sum(k.total_ns for k in side.kernels.values())
    return side


def collect_samples(side: Side, names: set[str]) -> None:
    """Per-dispatch durations of the chosen kernels; a run with only statistics adds its average per kernel."""
    for data, _ in side.loaded:
        per_run: dict[str, list[float]] = {}
        for source in data.timing:
            wanted = names & set(source.kernels)
            if not wanted:
                continue
            if source.fmt in PER_DISPATCH and source.counter_time is None:
                for name, start, end, _ in iter_dispatches(source):
                    if name in wanted:
                        per_run.setdefault(name, []).append(float(end - start))
            else:
                for name in wanted:
                    per_run.setdefault(name, []).append(source.kernels[name].average_ns)
        for name, values in per_run.items():
            side.kernel_samples.setdefault(name, []).append(values)
    side.loaded = []


def _finite_or_refuse(side: str, name: str, groups: list[list[float]]) -> None:
    """Infinity or NaN anywhere is bad input: a statistic over it says nothing, and must never pass a gate."""
    for run, values in enumerate(groups):
        if not all(math.isfinite(v) for v in values):
            raise UserError(
                f"{side} run {run + 1}: {name} holds a non-finite value (Infinity or NaN)",
                where=name,
                fix="re-run it: a time must be a finite number",
            )


def compare_metric(
    name: str,
    kind: str,
    unit: str,
    base: list[list[float]],
    new: list[list[float]],
    settings: Settings,
) -> dict:
    """One metric from its values per run on each side; the verdict is final only after `judge`."""
    _finite_or_refuse("base", name, base)
    _finite_or_refuse("new", name, new)
    flat_b = [v for g in base for v in g]
    flat_n = [v for g in new for v in g]
    row: dict = {
        "name": name,
        "kind": kind,
        "unit": unit,
        "n_base": len(flat_b),
        "n_new": len(flat_n),
        "runs_base": sum(bool(g) for g in base),
        "runs_new": sum(bool(g) for g in new),
        "base": None,
        "new": None,
        "speedup": None,
        "ci_low": None,
        "ci_high": None,
        "df": None,
        "spread": None,
        "p_slower": None,
        "p_faster": None,
        "p_adjusted": None,
        "p_beyond": None,
        "p_regression": None,
        "verdict": None,
        "gate": None,
        "more_runs": None,
        "regression": False,
    }
    if not flat_b or not flat_n:
        row["verdict"] = "only in new" if flat_n else "only in base"
        return row
    fn = STATISTICS[settings.statistic]
    try:
        per_b, per_n = [fn(g) for g in base if g], [fn(g) for g in new if g]
        per_run = [*per_b, *per_n]
        if all(v > 0 for v in per_run):  # each side: the geometric mean of its runs' values (what the test compares)
            b, n = statistics.geometric_mean(per_b), statistics.geometric_mean(per_n)
        else:
            b, n = fn(flat_b), fn(flat_n)
    except OverflowError:
        b = n = math.inf
        per_run = []
    if not all(math.isfinite(v) for v in (b, n, *per_run)) or any(
        x > 0 and not math.isfinite(y / x) for x, y in ((b, n), (n, b))
    ):  # the ratio overflows either way
        raise UserError(
            f"{name}: values too large to average (the {settings.statistic} overflows)",
            where=name,
            fix="check the run's workload_result.json / trace: no real time is near 1e308",
        )
    row.update(base=b, new=n, speedup=b / n if n > 0 else None)
    try:
        test = run_level_test(base, new, statistic=settings.statistic, confidence=settings.confidence)
    except ValueError:
        row["verdict"] = "not comparable: a run's time is zero"
        return row
    if test is None:
        row["verdict"] = INCONCLUSIVE
        return row
    row.update(  # the test's interval is of new / base; the speedup's is its inverse
        ci_low=1 / test.high,
        ci_high=1 / test.low,
        df=test.df,
        spread=test.spread,
        p_slower=test.p_slower,
        p_faster=test.p_faster,
        p_beyond=p_beyond(test, settings.threshold),
    )
    row["_test"] = test  # for the runs-to-decide estimate; dropped by `judge`
    return row


def judge(metrics: list[dict], settings: Settings) -> None:
    """Verdict and gate status of every tested metric.

    Verdict (descriptive: is there a change at all?): the step time alone, `slower`/`faster` when its interval excludes
    1 (two-sided p at most 1 - confidence); the kernels, Holm among themselves per direction on the one-sided
    p-values, each family at (1 - confidence) / 2 (p_adjusted: twice the adjusted one-sided p, against 1 - confidence).

    Gate status (does the change matter?), symmetric around the threshold: `passed` when the interval's slow end is
    within 1 + threshold; `regression` when the slowdown is shown to exceed it: the step time's interval lies entirely
    beyond 1 + threshold, a kernel's Holm-adjusted p of "slower by more than the threshold" (p_regression, doubled
    like p_adjusted) is at most 1 - confidence; else `inconclusive`. Each wrong verdict is then at most
    (1 - confidence) / 2 at the threshold itself, and rarer away from it. (Before issue 33 a regression needed only
    the interval to exclude 1x: what the FAILED line calls "slower by more than the threshold" was not what the test
    controlled; a true 3% slowdown failed 7% of simulated comparisons.)"""
    alpha = 1 - settings.confidence
    limit = 1 / (1 + settings.threshold)  # the speedup below which new is slower by more than the threshold
    tested = [m for m in metrics if m["p_slower"] is not None]
    primary = [m for m in tested if m["kind"] == "step"]
    secondary = [m for m in tested if m["kind"] != "step"]
    for m in primary:
        m["p_adjusted"] = min(1.0, 2 * min(m["p_slower"], m["p_faster"]))
        m["p_regression"] = min(1.0, 2 * m["p_beyond"])
    slower = holm([min(1.0, 2 * m["p_slower"]) for m in secondary])
    faster = holm([min(1.0, 2 * m["p_faster"]) for m in secondary])
    beyond = holm([min(1.0, 2 * m["p_beyond"]) for m in secondary])
    for m, adj_slower, adj_faster, adj_beyond in zip(secondary, slower, faster, beyond, strict=True):
        m["p_adjusted"] = min(adj_slower, adj_faster)
        m["p_regression"] = adj_beyond
    for m in tested:
        if m["p_adjusted"] <= alpha:
            m["verdict"] = "slower" if m["p_slower"] < m["p_faster"] else "faster"
        else:
            m["verdict"] = "no significant change"
        m["regression"] = m["p_regression"] <= alpha and m["speedup"] < limit
        if m["regression"]:
            m["gate"] = REGRESSION
        elif m["ci_low"] > limit:
            m["gate"] = PASSED
        else:
            m["gate"] = UNDECIDED


def gate_verdict(metrics: list[dict], settings: Settings, estimate_runs: bool = True) -> dict:
    """The gate over all metrics: a regression anywhere fails it; else the step time decides (the primary endpoint)
    where it was tested, and without step times every tested kernel must pass. Nothing tested: inconclusive. The
    undecided metrics that decide get `more_runs` (skipped with estimate_runs=False: simulations)."""
    regressions = [m["name"] for m in metrics if m["regression"]]
    tested = [m for m in metrics if m["gate"] is not None]
    primary = next((m for m in metrics if m["kind"] == "step"), None)
    deciding = [primary] if primary is not None and primary["gate"] is not None else tested
    if regressions:
        verdict = REGRESSION
    elif deciding and all(m["gate"] == PASSED for m in deciding):
        verdict = PASSED
    else:
        verdict = UNDECIDED
    undecided = [m for m in deciding if m["gate"] == UNDECIDED]
    for m in metrics:
        test: RatioTest | None = m.pop("_test", None)
        if test is not None and m in undecided and estimate_runs:
            m["more_runs"] = runs_to_decide(test, settings.threshold, confidence=settings.confidence,
                                            runs_base=m["runs_base"], runs_new=m["runs_new"])
    more = [m["more_runs"] for m in undecided]
    return {
        "verdict": verdict,
        "failed": verdict == REGRESSION,
        "regressions": regressions,
        "primary": primary["name"] if primary is not None and primary["gate"] is not None else None,
        "tested": len(tested),
        # runs a side that would decide the undecided deciding metrics (null: no number of runs would, or unknown)
        "more_runs": None if verdict != UNDECIDED or not more or None in more else max(more),
        "inconclusive": [m["name"] for m in metrics if m["verdict"] == INCONCLUSIVE],
    }


def chosen_kernels(base: Side, new: Side, settings: Settings) -> list[str]:
    """The base's top kernels by time with at least min_share of its kernel time, then the new run's that the base
    lacks (shown as `only in new`)."""

    def top(side: Side) -> list[str]:
        total = side.kernel_time_ns or 1
        ranked = sorted(side.kernels.items(), key=lambda kv: (-kv[1].total_ns, kv[0]))
        return [n for n, k in ranked[: settings.top] if k.total_ns / total >= settings.min_share]

    names = top(base)
    return names + [n for n in top(new) if n not in base.kernels and n not in names]


def compare_sides(base: Side, new: Side, settings: Settings) -> dict:
    if not any(base.step_times_ms) and not base.kernels:
        raise UserError(
            f"nothing to compare in {base.root}",
            fix="runs need step_times_ms in workload_result.json or kernel timings",
        )
    metrics = []
    if any(base.step_times_ms) or any(new.step_times_ms):
        metrics.append(compare_metric("step time", "step", "ms", base.step_times_ms, new.step_times_ms, settings))
    names = chosen_kernels(base, new, settings) if settings.top else []
    collect_samples(base, set(names))
    collect_samples(new, set(names))
    for name in names:
        row = compare_metric(
            name, "kernel", "ns", base.kernel_samples.get(name, []), new.kernel_samples.get(name, []), settings
        )
        row["category"] = classify(name).category
        row["calls_base"] = base.kernels[name].calls if name in base.kernels else 0
        row["calls_new"] = new.kernels[name].calls if name in new.kernels else 0
        metrics.append(row)
    if not metrics:
        raise UserError(
            "no metric in common: neither step times nor kernel timings were found",
            fix="compare runs that wrote workload_result.json (step_times_ms) or profiler output",
        )
    judge(metrics, settings)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "madengine-rocprof compare",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "base": {"path": str(base.root), "runs": [str(p) for p in base.runs]},
        "new": {"path": str(new.root), "runs": [str(p) for p in new.runs]},
        "settings": vars(settings).copy(),
        "metrics": metrics,
        "gate": gate_verdict(metrics, settings),
    }
