"""Compare two sets of repeated runs with statistics: per-step times from workload_result.json and per-kernel
durations from the profiler output, a run-level test of the ratio NEW/BASE per metric (insights/stats.py), Holm's
correction over every tested metric, and a gate that fails on a significant regression beyond a threshold.

Evidence is the run: each run contributes one value per metric (the statistic of its steps or dispatches), because
runs of the same code differ by more than their steps do. With one run per side that spread is unknown and the
metric is `inconclusive: repeat the runs`; with repeated runs on either side those runs supply it.

Verdict per metric: `slower` / `faster` when its Holm-adjusted two-sided p-value is at most 1 - confidence, else
`no significant change`. A metric is a regression (the gate fails) when it is `slower` AND its ratio exceeds
1 + threshold: noise alone fails the gate with probability at most about (1 - confidence) / 2 over all metrics.
"""

from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from madengine_rocprof.errors import UserError
from madengine_rocprof.insights.stats import STATISTICS, holm, run_level_test
from madengine_rocprof.reports import kineto_reader
from madengine_rocprof.reports.analysis import merge_kernels
from madengine_rocprof.reports.categories import classify
from madengine_rocprof.reports.discover import iter_dispatches, load_run
from madengine_rocprof.reports.model import KernelStats
from madengine_rocprof.wrapper.contracts import WorkloadResult

SCHEMA_VERSION = 2  # 2: run-level t test and Holm (p_slower, p_faster, p_adjusted, df, spread); no bootstrap
INCONCLUSIVE = "inconclusive: repeat the runs"
RUN_MARKERS = ("run.json", "workload_result.json")
PER_DISPATCH = ("rocprofv3-csv", "legacy-csv", "rocprofv3-json", "rocpd", "rocprofv3-pftrace", "kineto")


@dataclass
class Settings:
    statistic: str = "median"  # per run; the mean let preempted steps and dispatches hide a 3x slowdown (A/A bench)
    confidence: float = 0.95
    threshold: float = 0.05  # a regression must exceed 1 + threshold
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
    """One metric from its values per run on each side; the verdict is final only after `judge` (Holm)."""
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
        "ratio": None,
        "ci_low": None,
        "ci_high": None,
        "df": None,
        "spread": None,
        "p_slower": None,
        "p_faster": None,
        "p_adjusted": None,
        "verdict": None,
        "regression": False,
    }
    if not flat_b or not flat_n:
        row["verdict"] = "only in new" if flat_n else "only in base"
        return row
    fn = STATISTICS[settings.statistic]
    try:
        b, n = fn(flat_b), fn(flat_n)
        per_run = [fn(g) for g in (*base, *new) if g]
    except OverflowError:
        b = n = math.inf
        per_run = []
    if not all(math.isfinite(v) for v in (b, n, *per_run)) or (b > 0 and not math.isfinite(n / b)):
        raise UserError(
            f"{name}: values too large to average (the {settings.statistic} overflows)",
            where=name,
            fix="check the run's workload_result.json / trace: no real time is near 1e308",
        )
    row.update(base=b, new=n, ratio=n / b if b > 0 else None)
    try:
        test = run_level_test(base, new, statistic=settings.statistic, confidence=settings.confidence)
    except ValueError:
        row["verdict"] = "not comparable: a run's time is zero"
        return row
    if test is None:
        row["verdict"] = INCONCLUSIVE
        return row
    row.update(
        ci_low=test.low,
        ci_high=test.high,
        df=test.df,
        spread=test.spread,
        p_slower=test.p_slower,
        p_faster=test.p_faster,
    )
    return row


def judge(metrics: list[dict], settings: Settings) -> None:
    """Verdicts with the family-wise error over every tested metric held at 1 - confidence (Holm on the two-sided
    p-values): `slower` / `faster` when the adjusted p-value is at most that, in the ratio's direction. A regression
    is a `slower` metric whose ratio also exceeds 1 + threshold."""
    tested = [m for m in metrics if m["p_slower"] is not None]
    two_sided = [min(1.0, 2 * min(m["p_slower"], m["p_faster"])) for m in tested]
    alpha = 1 - settings.confidence
    for m, adjusted in zip(tested, holm(two_sided), strict=True):
        m["p_adjusted"] = adjusted
        if adjusted <= alpha:
            m["verdict"] = "slower" if m["p_slower"] < m["p_faster"] else "faster"
        else:
            m["verdict"] = "no significant change"
        m["regression"] = m["verdict"] == "slower" and m["ratio"] > 1 + settings.threshold


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
    regressions = [m for m in metrics if m["regression"]]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "madengine-rocprof compare",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "base": {"path": str(base.root), "runs": [str(p) for p in base.runs]},
        "new": {"path": str(new.root), "runs": [str(p) for p in new.runs]},
        "settings": vars(settings).copy(),
        "metrics": metrics,
        "gate": {
            "failed": bool(regressions),
            "regressions": [m["name"] for m in regressions],
            "tested": sum(m["p_adjusted"] is not None for m in metrics),
            "inconclusive": [m["name"] for m in metrics if m["verdict"] == INCONCLUSIVE],
        },
    }
