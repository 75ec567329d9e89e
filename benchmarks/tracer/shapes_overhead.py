"""What recording operator shapes costs on a CPU (MADENGINE_ROCPROF_TRACER_SHAPES=1), in CPU time.

The embedded tracer's torch.profiler backend without a GPU records CPU operators (`activities=[CPU]`); the setting
adds `record_shapes=True`. This script trains a small transformer (torch.nn.TransformerEncoderLayer, d_model 64,
4 heads, batch 8, sequence 32, a linear head, AdamW; one thread) in one process and alternates windows of --steps
steps untraced, profiled as the tracer profiles, and profiled with shapes, in rotating order per round. Each window
is timed in process CPU time (time.process_time), not wall time: the machines this project measures on are shared,
and CPU time is what the tracer adds to the app. After each profiled window the trace is exported as the tracer
exports it (Kineto JSON), and the export's CPU time, the file's size and its operator count are kept.

    .venv/bin/python benchmarks/tracer/shapes_overhead.py --rounds 5 --steps 20 --out bench_out/shapes

Prints one JSON line per window and, per variant, the median over rounds; writes the variant lines to
--out/results.jsonl.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

VARIANTS = ("none", "trace", "trace_shapes")


def make_step():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=256, batch_first=True)
    head = torch.nn.Linear(64, 1000)
    params = list(layer.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    x = torch.randn(8, 32, 64)
    y = torch.randint(0, 1000, (8 * 32,))

    def step() -> None:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(layer(x)).reshape(-1, 1000), y)
        loss.backward()
        opt.step()

    return step


def window(step, steps: int, variant: str, trace_path: Path) -> dict:
    prof = None
    if variant != "none":
        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=variant == "trace_shapes")
        prof.start()
    t0 = time.process_time()
    for _ in range(steps):
        step()
    row: dict = {"variant": variant, "step_cpu_ms": (time.process_time() - t0) / steps * 1e3}
    if prof is not None:
        t1 = time.process_time()
        prof.stop()
        prof.export_chrome_trace(str(trace_path))
        row["stop_export_cpu_s"] = time.process_time() - t1
        row["trace_mib"] = trace_path.stat().st_size / 2**20
        with open(trace_path) as fh:
            events = json.load(fh)["traceEvents"]
        row["operators"] = sum(1 for e in events if e.get("cat") == "cpu_op")
        trace_path.unlink()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    step = make_step()
    for _ in range(3):  # warm-up: allocator, first-call dispatch
        step()
    rows: list[dict] = []
    for r in range(args.rounds):
        order = VARIANTS[r % 3:] + VARIANTS[:r % 3]
        for variant in order:
            rows.append(dict(window(step, args.steps, variant, args.out / "trace.json"), round=r))
            print(json.dumps(rows[-1]), flush=True)
    base = statistics.median(x["step_cpu_ms"] for x in rows if x["variant"] == "none")
    with open(args.out / "results.jsonl", "w") as fh:
        for variant in VARIANTS:
            mine = [x for x in rows if x["variant"] == variant]
            cpu_ms = statistics.median(x["step_cpu_ms"] for x in mine)
            line: dict = {"case": f"shapes_overhead/{variant}", "step_cpu_ms": round(cpu_ms, 3),
                          "overhead_pct": round(100 * (cpu_ms / base - 1), 1),
                          "step_cpu_ms_range": [round(min(x["step_cpu_ms"] for x in mine), 3),
                                                round(max(x["step_cpu_ms"] for x in mine), 3)],
                          "rounds": len(mine)}
            if variant != "none":
                line.update(stop_export_cpu_s=round(statistics.median(x["stop_export_cpu_s"] for x in mine), 3),
                            trace_mib=round(statistics.median(x["trace_mib"] for x in mine), 2),
                            operators=mine[0]["operators"])
            line.update(device={"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                                "load_average": os.getloadavg()[0]},
                        versions={"torch": torch.__version__, "python": platform.python_version()},
                        command=f"python benchmarks/tracer/shapes_overhead.py --rounds {args.rounds} "
                                f"--steps {args.steps} --out DIR")
            fh.write(json.dumps(line) + "\n")
            print(json.dumps(line))


if __name__ == "__main__":
    main()
