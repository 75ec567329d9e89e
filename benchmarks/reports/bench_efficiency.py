"""CPU cost of the efficiency analysis (reports/analyses/efficiency.py) on a synthetic worst case: every operator
carries shapes and has a model.

Usage (from the checkout root):
    PYTHONPATH=. python benchmarks/reports/bench_efficiency.py [--calls N] [--kernels-per-call K]

Builds the trace tables directly (no JSON): N/2 `aten::linear` calls each enclosing an `aten::addmm` that launches
K back-to-back kernels (defaults: 250,000 operators, 1M kernels, as the 1M-GPU-event Kineto benchmark trace), seven
distinct shapes; times `efficiency.analyse` (process CPU time and wall) and checks its result exactly: every kernel
nanosecond goes to an addmm group, none to linear, and the groups' call counts add up.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import polars as pl

from madengine_rocprof.insights.peaks import device_peak
from madengine_rocprof.reports.analyses import efficiency

BF16 = '["c10::BFloat16","c10::BFloat16","c10::BFloat16","Scalar","Scalar"]'


def tables(calls: int, per_call: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    shapes = [json.dumps([[512], [128 * (i + 1), 512], [512, 512], [], []], separators=(",", ":")) for i in range(7)]
    ops: dict[str, list] = {c: [] for c in ("name", "pid", "tid", "start", "end", "external_id", "input_dims",
                                            "input_types", "input_strides", "concrete_inputs")}
    gpu: dict[str, list] = {c: [] for c in ("name", "device", "stream", "start", "end", "correlation", "external_id")}
    t = total = 0
    for i in range(calls // 2):
        for j, (name, dur) in enumerate((("aten::linear", 100), ("aten::addmm", 80))):
            for column, value in (("name", name), ("pid", 1), ("tid", 1), ("start", t + j * 10),
                                  ("end", t + j * 10 + dur), ("external_id", 2 * i + j), ("input_dims", shapes[i % 7]),
                                  ("input_types", BF16), ("input_strides", None), ("concrete_inputs", None)):
                ops[column].append(value)
        for m in range(per_call):
            for column, value in (("name", "sm90_xmma_gemm_bf16"), ("device", 0), ("stream", 7),
                                  ("start", t * 10 + m * 100), ("end", t * 10 + m * 100 + 90), ("correlation", None),
                                  ("external_id", 2 * i + 1)):
                gpu[column].append(value)
            total += 90
        t += 200
    runtime = pl.DataFrame(schema={"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64,
                                   "end": pl.Int64, "correlation": pl.Int64, "external_id": pl.Int64})
    return pl.DataFrame(ops), runtime, pl.DataFrame(gpu), total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=250_000)
    parser.add_argument("--kernels-per-call", type=int, default=8)
    args = parser.parse_args(argv)
    cpu_ops, runtime, kernels, total = tables(args.calls, args.kernels_per_call)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = efficiency.analyse(cpu_ops, runtime, kernels, device_peak("NVIDIA H100 80GB HBM3"), "H100")
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert result is not None
    assert {r["op"] for r in result["rows"]} == {"aten::addmm"} and not result["unmodelled"]
    assert sum(r["time_ns"] for r in result["rows"]) == total == result["modelled_kernel_ns"]
    assert sum(r["count"] for r in result["rows"]) == args.calls // 2
    print(json.dumps({"operators": cpu_ops.height, "kernels": kernels.height, "cpu_s": round(cpu, 3),
                      "wall_s": round(wall, 3), "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      // 1024}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
