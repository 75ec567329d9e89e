"""Why an A/A comparison of real runs fails the gate, under the rule before issue 33's fix and the rule after it.

Reads the runs of aa_gate.py's OUT (its chunks, the same comparisons), runs `compare` (without --gate, so that the
JSON is written whatever the verdict) for --statistic median and mean, and judges every comparison twice from the
same metrics:
- old rule (main at a85a32d): a metric is a regression when its interval excludes 1x on the slow side (Holm among
  the kernels) and the point estimate is beyond the threshold;
- new rule (the code here): a regression needs the slowdown shown beyond the threshold (the step time's interval
  entirely beyond 1 + threshold; a kernel's Holm-adjusted p of "slower by more than the threshold").
For every comparison that fails under either rule it names the metric(s), the step time's speedup and interval, each
side's spread, and the chunk's run values in time order (so that a drift of the machine's load shows).

    PYTHONPATH=. python benchmarks/insights/aa_causes.py --runs OUT [--runs OUT2 ...] [--aa-chunks 6] [--ab-chunks 4]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_gate import comparisons, layout, link_sides  # type: ignore[import-not-found]  # noqa: E402

from madengine_rocprof.cli import main  # noqa: E402

THRESHOLD = 0.05


def compare_json(base: list[Path], new: list[Path], scratch: Path, statistic: str) -> dict:
    base_dir, new_dir = link_sides(base, new, scratch)
    out = scratch / "cmp.json"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["compare", str(base_dir), str(new_dir), "-q", "--json", str(out), "--statistic", statistic])
    if code != 0:
        raise SystemExit(f"compare failed ({code}) on {base} / {new}")
    return json.loads(out.read_text())


def old_rule(metrics: list[dict]) -> tuple[str, list[str]]:
    """The verdict and the failing metrics by the rule before the fix: `slower` (interval excludes 1x) and the
    speedup below 1 / (1 + threshold)."""
    limit = 1 / (1 + THRESHOLD)
    failing = [m["name"] for m in metrics if m["verdict"] == "slower" and m["speedup"] < limit]
    step = next((m for m in metrics if m["kind"] == "step" and m["gate"] is not None), None)
    if failing:
        return "regression", failing
    return ("passed" if step is not None and step["gate"] == "passed" else "inconclusive"), []


def run_values(runs: list[Path], statistic: str) -> list[float]:
    fn = statistics.median if statistic == "median" else statistics.fmean
    return [fn(json.loads((r / "workload_result.json").read_text())["step_times_ms"]) for r in runs]


def log_sd(values: list[float]) -> float | None:
    return statistics.stdev(math.log(v) for v in values) if len(values) > 1 else None


def interval(m: dict) -> list[float] | None:
    return None if m["ci_low"] is None else [round(m["ci_low"], 3), round(m["ci_high"], 3)]


def main_() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=Path, action="append", required=True)
    p.add_argument("--aa-chunks", type=int, default=6)
    p.add_argument("--ab-chunks", type=int, default=4)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    rows = []
    for root in args.runs:
        root = root.resolve()
        chunks = layout(root, args.aa_chunks, args.ab_chunks)
        for statistic in ("median", "mean"):
            for key, chunk, base, new in comparisons(chunks):
                result = compare_json(base, new, root / "_causes", statistic)
                metrics = result["metrics"]
                step = next(m for m in metrics if m["kind"] == "step")
                old, old_failing = old_rule(metrics)
                chunk_runs = next(r for _, r in chunks if r[0].parent.name == chunk)
                rows.append({
                    "runs": str(root), "chunk": chunk, "kind": key, "statistic": statistic,
                    "base": [r.name for r in base], "new": [r.name for r in new],
                    "old": old, "old_failing": old_failing,
                    "new_rule": result["gate"]["verdict"], "new_failing": result["gate"]["regressions"],
                    "step_speedup": round(step["speedup"], 4), "step_ci": interval(step),
                    "step_spread_base": log_sd(run_values(base, statistic)),
                    "step_spread_new": log_sd(run_values(new, statistic)),
                    "chunk_values_in_time_order": [round(v, 2) for v in run_values(chunk_runs, statistic)],
                    "failing_metrics": {m["name"]: {"speedup": round(m["speedup"], 3), "ci": interval(m),
                                                    "p_adjusted": m["p_adjusted"], "p_regression": m["p_regression"]}
                                        for m in metrics if m["name"] in old_failing},
                })
        shutil.rmtree(root / "_causes", ignore_errors=True)
    summary: dict = {}
    for r in rows:
        group = "aa" if r["kind"].startswith("aa") else r["kind"]
        cell = summary.setdefault(group, {}).setdefault(r["statistic"], {"comparisons": 0, "old": {}, "new": {}})
        cell["comparisons"] += 1
        for rule, verdict in (("old", r["old"]), ("new", r["new_rule"])):
            cell[rule][verdict] = cell[rule].get(verdict, 0) + 1
    failed = [r for r in rows if r["kind"].startswith("aa") and "regression" in (r["old"], r["new_rule"])]
    out = {"command": "python benchmarks/insights/aa_causes.py " + " ".join(sys.argv[1:]), "summary": summary,
           "aa_failures": failed, "comparisons": rows}
    text = json.dumps(out, indent=1, allow_nan=False)
    if args.json:
        args.json.write_text(text + "\n")
    print(json.dumps({"summary": summary, "aa_failures": failed}, indent=1, allow_nan=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
