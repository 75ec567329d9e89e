"""Why a comparison of real repeated runs fails (or passes) the gate: every comparison of aa_gate.py's design, judged
by the `compare` code on sys.path, with the metrics that decided it.

Reads the runs of aa_gate.py's OUT (its chunks; the same comparisons) and judges each for --statistic median and
mean through compare's own code (load_side, compare_sides, the gate's verdict; each run loaded once). For every
comparison it keeps the verdict, the failing metric(s) with their speedup and interval, the step time's speedup,
interval and each side's spread, and the chunk's run values in time order (so that a drift of the machine's load
shows). --against FILE (an earlier output of this script, made with other code) puts that code's verdicts beside
this one's: run it once with the old code first on PYTHONPATH (e.g. `git archive a85a32d madengine_rocprof`).

    PYTHONPATH=. python benchmarks/insights/aa_causes.py --runs OUT [--runs OUT2 ...] [--layout AA,AB ...]
        [--against OLD.json] [--json FILE]
--layout: the --aa-chunks,--ab-chunks each OUT was made with, one per --runs (default 6,4).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_gate import comparisons, layout  # type: ignore[import-not-found]  # noqa: E402

from madengine_rocprof.insights import compare  # noqa: E402
from madengine_rocprof.reports.model import KernelStats  # noqa: E402

_RUNS: dict[Path, compare.Side] = {}


def one_run(run: Path) -> compare.Side:
    """A run loaded once, with every dispatch duration of every kernel (compare picks its kernels per comparison)."""
    if run not in _RUNS:
        side = compare.load_side(run, run.name)
        compare.collect_samples(side, set(side.kernels))
        _RUNS[run] = side
    return _RUNS[run]


def side_of(runs: list[Path], label: str) -> compare.Side:
    """What load_side would make of a directory holding these runs."""
    side = compare.Side(label=label, root=Path(label), runs=list(runs))
    for part in map(one_run, runs):
        side.step_times_ms += part.step_times_ms
        for name, stats in part.kernels.items():
            side.kernels.setdefault(name, KernelStats()).merge(stats)
        for name, groups in part.kernel_samples.items():
            side.kernel_samples.setdefault(name, []).extend(groups)
    side.kernel_time_ns = sum(k.total_ns for k in side.kernels.values())
    return side


def log_sd(values: list[float]) -> float | None:
    return round(statistics.stdev(math.log(v) for v in values), 4) if len(values) > 1 else None


def interval(m: dict) -> list[float] | None:
    return None if m["ci_low"] is None else [round(m["ci_low"], 4), round(m["ci_high"], 4)]


def judge(base: list[Path], new: list[Path], statistic: str) -> dict:
    settings = compare.Settings(statistic=statistic)
    result = compare.compare_sides(side_of(base, "base"), side_of(new, "new"), settings)
    fn = compare.STATISTICS[statistic]
    values = {side: [fn(one_run(r).step_times_ms[0]) for r in runs] for side, runs in (("base", base), ("new", new))}
    step = next(m for m in result["metrics"] if m["kind"] == "step")
    failing = result["gate"]["regressions"]
    return {
        "verdict": result["gate"]["verdict"], "failing": failing,
        "step": {"speedup": round(step["speedup"], 4), "ci": interval(step), "df": step["df"],
                 "spread_base": log_sd(values["base"]), "spread_new": log_sd(values["new"])},
        "failing_metrics": {m["name"]: {"speedup": round(m["speedup"], 4), "ci": interval(m),
                                        "p_adjusted": m["p_adjusted"], "p_regression": m.get("p_regression")}
                            for m in result["metrics"] if m["name"] in failing},
    }


def main_() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=Path, action="append", required=True)
    p.add_argument("--layout", action="append", default=[], help="AA,AB chunk counts of each --runs (default 6,4)")
    p.add_argument("--against", type=Path, help="an earlier output of this script (other code) to set beside")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    layouts = [tuple(int(x) for x in s.split(",")) for s in args.layout] or [(6, 4)] * len(args.runs)
    if len(layouts) != len(args.runs):
        raise SystemExit("give one --layout per --runs")
    other = {}
    if args.against:
        other = {(r["runs"], r["chunk"], r["kind"], r["statistic"], tuple(r["base"]), tuple(r["new"])): r
                 for r in json.loads(args.against.read_text())["comparisons"]}
    rows = []
    for root, (aa, ab) in zip(args.runs, layouts, strict=True):
        root = root.resolve()
        chunks = layout(root, aa, ab)
        for statistic in ("median", "mean"):
            for kind, chunk, base, new in comparisons(chunks):
                chunk_runs = next(r for _, r in chunks if r[0].parent.name == chunk)
                fn = compare.STATISTICS[statistic]
                row = {"runs": str(root), "chunk": chunk, "kind": kind, "statistic": statistic,
                       "base": [r.name for r in base], "new": [r.name for r in new],
                       "chunk_step_values_in_time_order": [round(fn(one_run(r).step_times_ms[0]), 2)
                                                           for r in chunk_runs],
                       **judge(base, new, statistic)}
                key = (row["runs"], chunk, kind, statistic, tuple(row["base"]), tuple(row["new"]))
                if key in other:
                    row["against"] = {k: other[key][k] for k in ("verdict", "failing", "step", "failing_metrics")}
                rows.append(row)
        _RUNS.clear()
    summary: dict = {}
    for r in rows:
        cell = summary.setdefault(r["kind"], {}).setdefault(r["statistic"], {"comparisons": 0, "this": {},
                                                                              "against": {}})
        cell["comparisons"] += 1
        cell["this"][r["verdict"]] = cell["this"].get(r["verdict"], 0) + 1
        if "against" in r:
            cell["against"][r["against"]["verdict"]] = cell["against"].get(r["against"]["verdict"], 0) + 1
    out = {"command": "python benchmarks/insights/aa_causes.py " + " ".join(sys.argv[1:]),
           "compare_code": compare.__file__, "schema_version": compare.SCHEMA_VERSION, "summary": summary,
           "comparisons": rows}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
