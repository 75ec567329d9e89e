"""An independent loader for the analyses' tests: a Kineto trace parsed with the standard library (microseconds as
Decimal, exact) into frames with the trace-tables columns (reports/trace_tables.py), and the exact computations the
tests compare the analyses with, written plainly (loops over Python ints)."""

from __future__ import annotations

import functools
import gzip
import json
from decimal import Decimal
from pathlib import Path

import polars as pl

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime"}
GPU_CATS = {"kernel": "kernels", "gpu_memcpy": "copies", "gpu_memset": "copies"}


def load_trace(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh, parse_float=Decimal)


def ns(value) -> int:
    return int(Decimal(value) * 1000)


@functools.cache
def frames(path: Path) -> dict:
    """kernels, copies, runtime, cpu_ops, comms (lists of dicts and frames) and steps [(number, start, end)]."""
    trace = load_trace(path)
    base = int(trace.get("baseTimeNanoseconds") or 0)
    rows: dict[str, list] = {"kernels": [], "copies": [], "runtime": [], "cpu_ops": [], "comms": []}
    steps: dict[int, tuple[int, int]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        args = e.get("args") or {}
        start = base + ns(e["ts"])
        end = start + ns(e["dur"])
        name = e.get("name")
        if cat in GPU_CATS:
            rows[GPU_CATS[cat]].append({"name": name, "device": int(args.get("device", e.get("pid"))),
                                        "stream": int(args.get("stream", e.get("tid"))), "start": start, "end": end,
                                        "correlation": args.get("correlation")})
        elif cat in RUNTIME_CATS:
            rows["runtime"].append({"name": name, "pid": e.get("pid"), "tid": e.get("tid"), "start": start,
                                    "end": end, "correlation": args.get("correlation")})
        elif cat in ("cpu_op", "user_annotation"):
            if name.startswith("ProfilerStep#") and cat == "user_annotation" or (
                    name.startswith("ProfilerStep#") and cat == "cpu_op"):
                steps.setdefault(int(name.split("#")[1]), (start, end))
            row = {"name": name, "pid": e.get("pid"), "tid": e.get("tid"), "start": start, "end": end}
            rows["cpu_ops"].append(row)
            if name == "record_param_comms" or name.startswith("nccl:"):
                rows["comms"].append(row)
    schemas = {
        "kernels": {"name": pl.String, "device": pl.Int64, "stream": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                    "correlation": pl.Int64},
        "runtime": {"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                    "correlation": pl.Int64},
        "cpu_ops": {"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64},
    }
    schemas["copies"] = schemas["kernels"]
    schemas["comms"] = schemas["cpu_ops"]
    out: dict = {"rows": rows, "steps": sorted((n, s, e) for n, (s, e) in steps.items())}
    for key, schema in schemas.items():
        out[key] = pl.DataFrame([{k: r[k] for k in schema} for r in rows[key]], schema=schema,
                                orient="row") if rows[key] else pl.DataFrame(schema=schema)
    return out
