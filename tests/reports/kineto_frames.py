"""An independent loader of a Kineto trace into the frames of reports/trace_tables.py (TABLES.md): json + gzip,
microseconds to integer ns by Python's decimal rounding. The efficiency tests use it as the reference reading."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import polars as pl

RUNTIME = {"cuda_runtime", "hip_runtime", "cuda_driver"}


def _ns(value) -> int:
    return int((Decimal(str(value)) * 1000).to_integral_value())


def _text(value):
    return None if value is None else json.dumps(value, separators=(",", ":"))


def load(path: Path) -> dict:
    with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as fh:
        trace = json.load(fh)
    kernels, runtime, ops = [], [], []
    for e in trace["traceEvents"]:
        cat, args = str(e.get("cat", "")).lower(), e.get("args") or {}
        if e.get("ph") != "X":
            continue
        start = _ns(e["ts"])
        end = start + _ns(e.get("dur", 0))
        if cat == "kernel":
            kernels.append({"name": e["name"], "device": args.get("device", 0), "stream": args.get("stream", 0),
                            "start": start, "end": end, "correlation": args.get("correlation"),
                            "external_id": args.get("External id")})
        elif cat in RUNTIME:
            runtime.append({"name": e["name"], "pid": int(e["pid"]), "tid": int(e["tid"]), "start": start,
                            "end": end, "correlation": args.get("correlation"),
                            "external_id": args.get("External id")})
        elif cat in ("cpu_op", "user_annotation"):
            ops.append({"name": e["name"], "pid": int(e["pid"]), "tid": int(e["tid"]), "start": start, "end": end,
                        "external_id": args.get("External id"), "input_dims": _text(args.get("Input Dims")),
                        "input_types": _text(args.get("Input type")),
                        "input_strides": _text(args.get("Input Strides")),
                        "concrete_inputs": _text(args.get("Concrete Inputs"))})
    k_schema = {"name": pl.String, "device": pl.Int64, "stream": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                "correlation": pl.Int64, "external_id": pl.Int64}
    r_schema = {"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                "correlation": pl.Int64, "external_id": pl.Int64}
    o_schema = {"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                "external_id": pl.Int64, "input_dims": pl.String, "input_types": pl.String,
                "input_strides": pl.String, "concrete_inputs": pl.String}
    return {
        "kernels": pl.DataFrame(kernels, schema=k_schema),
        "runtime": pl.DataFrame(runtime, schema=r_schema),
        "cpu_ops": pl.DataFrame(ops, schema=o_schema),
        "device_properties": trace.get("deviceProperties") or [],
    }
