"""Product-path overheads pooled over device calls, with an estimator that noisy machines cannot inflate.

product_path.py's own figure (each traced process over the mean of its untraced neighbours) swings by 10-30 points
when the machine is shared: an untraced neighbour that ran slow makes a traced process look cheap, and the other
way round. Interference only ever adds time, so the fastest process of a variant is its least disturbed one; this
script reports, per call, each variant's best process over the best untraced process of the same call
("best/best"), for the per-process median step and for its 10th percentile step, then the median of the
per-call figures. Calls must come from one kind of machine (the table says which device each call ran on).

    python3 benchmarks/tracer/pool_calls.py benchmarks/tracer/results/h100_call{4,5,7}_runs.jsonl
"""
from __future__ import annotations

import json
import statistics
import sys

WORKLOAD_BASE = {"v4_kernel_trace": "v4_none"}


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def best_over_best(runs: list[dict], key: str) -> dict[str, float]:
    """{variant: percent over the best untraced process} for one call; `key` is step_ms or step_p10_ms."""
    best: dict[str, float] = {}
    for r in runs:
        if r.get("rc") == 0 and isinstance(r.get(key), (int, float)):
            best[r["variant"]] = min(best.get(r["variant"], float("inf")), r[key])
    out = {}
    for variant, value in best.items():
        base = WORKLOAD_BASE.get(variant, "v4_none" if variant.startswith("v4_") else "none")
        if variant != base and base in best:
            out[variant] = 100.0 * (value / best[base] - 1)
    return out


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    per_call = {key: [best_over_best(load(p), key) for p in paths] for key in ("step_ms", "step_p10_ms")}
    variants = sorted({v for calls in per_call.values() for c in calls for v in c})
    print(f"{'variant':32s} " + " ".join(f"{p.rsplit('/', 1)[-1][:18]:>18s}" for p in paths) + "   median of calls")
    for key, calls in per_call.items():
        print(f"-- best/best on {key}")
        for v in variants:
            values = [c.get(v) for c in calls]
            shown = " ".join(f"{x:+18.1f}" if x is not None else f"{'-':>18s}" for x in values)
            present = [x for x in values if x is not None]
            print(f"{v:32s} {shown}   {statistics.median(present):+.1f}" if present else f"{v:32s} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
