"""Builders for crafted runs whose answer is known: workload_result.json step times and rocprofv3 kernel traces."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

HEADER_7 = [
    "Kind",
    "Agent_Id",
    "Queue_Id",
    "Stream_Id",
    "Thread_Id",
    "Dispatch_Id",
    "Kernel_Id",
    "Kernel_Name",
    "Correlation_Id",
    "Start_Timestamp",
    "End_Timestamp",
]


def write_run(
    root: Path,
    step_times: list[float] | None = None,
    kernels: dict[str, list[int]] | None = None,
    host: str = "node0",
    pid: int = 4242,
) -> Path:
    """A run directory: workload_result.json (step_times_ms) and profiler/<host>/<pid>_kernel_trace.csv with the
    given per-dispatch durations (ns), dispatched back to back in name order, interleaved per call."""
    root.mkdir(parents=True, exist_ok=True)
    if step_times is not None:
        (root / "workload_result.json").write_text(
            json.dumps(
                {
                    "schema_version": 1,
                    "model": "crafted",
                    "status": "ok",
                    "step_times_ms": step_times,
                    "metrics": {"step_time_ms": {"median": sorted(step_times)[len(step_times) // 2]}},
                }
            )
        )
    if kernels:
        trace = root / "profiler" / host / f"{pid}_kernel_trace.csv"
        trace.parent.mkdir(parents=True, exist_ok=True)
        t = 1_000_000
        rows: list[list] = []
        longest = max(len(v) for v in kernels.values())
        for i in range(longest):
            for name in sorted(kernels):
                if i < len(kernels[name]):
                    d = kernels[name][i]
                    rows.append(
                        ["KERNEL_DISPATCH", "Agent 4", 1, 1, pid, len(rows) + 1, 7, name, len(rows) + 1, t, t + d]
                    )
                    t += d + 1000
        with open(trace, "w", newline="") as fh:
            writer = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
            writer.writerow(HEADER_7)
            writer.writerows(rows)
    return root


def noisy(rng: random.Random, mean: float, sd: float, n: int) -> list[float]:
    return [max(0.0, rng.gauss(mean, sd)) for _ in range(n)]
