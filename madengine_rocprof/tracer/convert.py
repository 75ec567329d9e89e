"""Kineto's Chrome trace (torch.profiler export) -> rocprofv3 kernel_trace / kernel_stats rows (stdlib only).

GPU kernels (category `kernel`, from CUPTI on CUDA or roctracer on ROCm) become KERNEL_DISPATCH rows; without a
GPU, CPU operators (category `cpu_op`) are reported as the "kernels", nested operators included. Grid sizes are in
work-items like rocprofv3's (CUDA grid x block); Scratch/Accum_VGPR/SGPR columns have no CUDA value and are 0.
"""
from __future__ import annotations

import json
import os

from madengine_rocprof.wrapper import rocprof_csv


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return data if isinstance(data, dict) else {"traceEvents": data}


def _xyz(value) -> list[int]:
    if isinstance(value, (list, tuple)) and value:
        return ([int(v) for v in value] + [1, 1, 1])[:3]
    return [0, 0, 0]


def kernel_rows(trace: dict, *, cpu: bool = False, truncate: bool = False, max_rows: int | None = None) -> list[tuple]:
    """rocprofv3 kernel_trace rows, in start order. `cpu`: report CPU operators instead of GPU kernels."""
    base = int(trace.get("baseTimeNanoseconds") or 0)
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    wanted = "cpu_op" if cpu else "kernel"
    # The host thread that launched a kernel is on the runtime call with the same correlation id.
    launcher = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver", "hip_runtime"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launcher[corr] = e.get("tid", 0)
    chosen = sorted((e for e in events if e.get("cat") == wanted), key=lambda e: float(e.get("ts", 0)))
    if max_rows is not None:
        chosen = chosen[:max_rows]
    kernel_ids: dict[str, int] = {}
    rows = []
    for n, e in enumerate(chosen, 1):
        args = e.get("args") or {}
        name = str(e.get("name", ""))
        if truncate:
            name = rocprof_csv.truncate_name(name)
        kid = kernel_ids.setdefault(name, len(kernel_ids) + 1)
        start = base + round(float(e.get("ts", 0)) * 1000)
        end = start + round(float(e.get("dur", 0)) * 1000)
        if cpu:
            corr = int(args.get("External id", 0) or 0)
            rows.append(("KERNEL_DISPATCH", "CPU", 0, 0, int(e.get("tid", 0) or 0), n, kid, name, corr, start, end,
                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
            continue
        corr = int(args.get("correlation", 0) or 0)
        stream = int(args.get("stream", e.get("tid", 0)) or 0)
        block, grid = _xyz(args.get("block")), _xyz(args.get("grid"))
        rows.append(("KERNEL_DISPATCH", f"Agent {int(args.get('device', 0) or 0)}", stream, stream,
                     int(launcher.get(corr, 0) or 0), n, kid, name, corr, start, end,
                     int(args.get("shared memory", 0) or 0), 0, int(args.get("registers per thread", 0) or 0), 0, 0,
                     block[0], block[1], block[2], grid[0] * block[0], grid[1] * block[1], grid[2] * block[2]))
    return rows


def stats_rows(rows: list[tuple]) -> list[tuple]:
    durations: dict[str, list[int]] = {}
    for r in rows:
        durations.setdefault(r[7], []).append(r[10] - r[9])
    return rocprof_csv.kernel_stats(durations)


def write_files(trace_path: str, host_dir: str, prefix: str, *, cpu: bool, truncate: bool = False,
                max_rows: int | None = None) -> list[str]:
    """Write <prefix>kernel_trace.csv and <prefix>kernel_stats.csv; nothing when no kernel was captured."""
    rows = kernel_rows(load(trace_path), cpu=cpu, truncate=truncate, max_rows=max_rows)
    if not rows:
        return []
    trace_csv = os.path.join(host_dir, prefix + "kernel_trace.csv")
    stats_csv = os.path.join(host_dir, prefix + "kernel_stats.csv")
    rocprof_csv.write_rows(trace_csv, rocprof_csv.KERNEL_TRACE, rows)
    rocprof_csv.write_rows(stats_csv, rocprof_csv.STATS, stats_rows(rows))
    return [trace_csv, stats_csv]
