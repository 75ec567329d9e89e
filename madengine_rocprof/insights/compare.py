"""Compare two runs (or two sets of repeated runs) with statistics: per-step times from workload_result.json and
per-kernel durations from the profiler output, bootstrap confidence intervals of the ratio NEW/BASE, a verdict per
metric and a gate that fails on a significant regression beyond a threshold.

Verdict per metric: `slower` when the whole CI of NEW/BASE lies above 1, `faster` when it lies below 1, else
`no significant change`. A metric is a regression (the gate fails) when it is `slower` AND its ratio exceeds
1 + threshold: noise alone gives `slower` with probability about (1 - confidence) / 2 per metric.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from pathlib import Path

from madengine_rocprof.errors import UserError
from madengine_rocprof.insights.stats import STATISTICS, bootstrap_ratio
from madengine_rocprof.reports.analysis import merge_kernels
from madengine_rocprof.reports.categories import classify
from madengine_rocprof.reports.discover import iter_dispatches, load_run
from madengine_rocprof.reports.model import KernelStats
from madengine_rocprof.wrapper.contracts import WorkloadResult

SCHEMA_VERSION = 1
RUN_MARKERS = ("run.json", "workload_result.json")
PER_DISPATCH = ("rocprofv3-csv", "legacy-csv", "rocprofv3-json", "rocpd", "rocprofv3-pftrace")


@dataclass
class Settings:
    statistic: str = "mean"
    confidence: float = 0.95
    threshold: float = 0.05  # a regression must exceed 1 + threshold
    resamples: int = 2000
    seed: int = 0
    top: int = 10  # kernels compared: the top N of the base by total time ...
    min_share: float = 0.01  # ... that have at least this share of the base's kernel time
    max_samples: int = 1000


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
    """The run directories below ROOT (those holding run.json or workload_result.json, shallowest), else ROOT."""
    if not root.is_dir():
        raise UserError(f"not a directory: {root}", fix="pass a run directory, or a directory of repeated runs")
    if any((root / m).is_file() for m in RUN_MARKERS):
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if any(m in filenames for m in RUN_MARKERS):
            found.append(Path(dirpath))
            dirnames[:] = []
    return found or [root]


def _step_times(workload: WorkloadResult | None, run: Path) -> list[float]:
    values = workload.get("step_times_ms") if workload else None
    if values is None:
        return []
    if not isinstance(values, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values
    ):
        raise UserError(
            "step_times_ms must be a list of non-negative numbers",
            file=str(run / "workload_result.json"),
            where="step_times_ms",
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


def _verdict(low: float, high: float) -> str:
    if low > 1:
        return "slower"
    if high < 1:
        return "faster"
    return "no significant change"


def compare_metric(
    name: str,
    kind: str,
    unit: str,
    base: list[list[float]],
    new: list[list[float]],
    settings: Settings,
    seed_offset: int,
) -> dict:
    """One metric from its values per run on each side."""
    flat_b = [v for g in base for v in g]
    flat_n = [v for g in new for v in g]
    row = {
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
        "resampled": None,
        "verdict": None,
        "regression": False,
    }
    if not flat_b or not flat_n:
        row["verdict"] = "only in new" if flat_n else "only in base"
        return row
    if len(flat_b) < 2 or len(flat_n) < 2:
        b, n = STATISTICS[settings.statistic](flat_b), STATISTICS[settings.statistic](flat_n)
        row.update(base=b, new=n, ratio=n / b if b > 0 else None, verdict="too few samples")
        return row
    ci = bootstrap_ratio(
        base,
        new,
        statistic=settings.statistic,
        confidence=settings.confidence,
        resamples=settings.resamples,
        seed=settings.seed + seed_offset,
        max_samples=settings.max_samples,
    )
    verdict = _verdict(ci.low, ci.high)
    row.update(
        base=ci.base,
        new=ci.new,
        ratio=ci.ratio,
        ci_low=ci.low,
        ci_high=ci.high,
        verdict=verdict,
        resampled=f"{ci.resampled_base}/{ci.resampled_new}",
        regression=verdict == "slower" and ci.ratio > 1 + settings.threshold,
    )
    return row


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
        metrics.append(compare_metric("step time", "step", "ms", base.step_times_ms, new.step_times_ms, settings, 0))
    names = chosen_kernels(base, new, settings) if settings.top else []
    collect_samples(base, set(names))
    collect_samples(new, set(names))
    for i, name in enumerate(names, start=1):
        row = compare_metric(
            name, "kernel", "ns", base.kernel_samples.get(name, []), new.kernel_samples.get(name, []), settings, i
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
    regressions = [m for m in metrics if m["regression"]]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "madengine-rocprof compare",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "base": {"path": str(base.root), "runs": [str(p) for p in base.runs]},
        "new": {"path": str(new.root), "runs": [str(p) for p in new.runs]},
        "settings": vars(settings).copy(),
        "metrics": metrics,
        "gate": {"failed": bool(regressions), "regressions": [m["name"] for m in regressions]},
    }
