"""Kineto-style Chrome trace (torch.profiler export, or the CUPTI backend's) -> rocprofv3 rows (stdlib only).

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


API_CATEGORIES = {"cuda_runtime": "CUDA_RUNTIME_API", "cuda_driver": "CUDA_DRIVER_API",
                  "hip_runtime": "HIP_RUNTIME_API"}
_DIRECTIONS = {"HtoD": ("HOST_TO_DEVICE", True, False), "DtoH": ("DEVICE_TO_HOST", False, True),
               "DtoD": ("DEVICE_TO_DEVICE", False, False), "HtoH": ("HOST_TO_HOST", True, True),
               "PtoP": ("DEVICE_TO_DEVICE", False, False), "HtoA": ("HOST_TO_DEVICE", True, False),
               "AtoH": ("DEVICE_TO_HOST", False, True), "AtoA": ("DEVICE_TO_DEVICE", False, False),
               "AtoD": ("DEVICE_TO_DEVICE", False, False), "DtoA": ("DEVICE_TO_DEVICE", False, False)}


def _ns(base: int, e: dict) -> tuple[int, int]:
    start = base + round(float(e.get("ts", 0)) * 1000)
    return start, start + round(float(e.get("dur", 0)) * 1000)


def api_rows(trace: dict) -> list[tuple]:
    """rocprofv3 *_api_trace rows (Domain, Function, Process_Id, Thread_Id, Correlation_Id, Start, End), in order."""
    base = int(trace.get("baseTimeNanoseconds") or 0)
    events = sorted((e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"
                     and e.get("cat") in API_CATEGORIES), key=lambda e: float(e.get("ts", 0)))
    rows = []
    for e in events:
        start, end = _ns(base, e)
        rows.append((API_CATEGORIES[e["cat"]], str(e.get("name", "")), int(e.get("pid", 0) or 0),
                     int(e.get("tid", 0) or 0), int((e.get("args") or {}).get("correlation", 0) or 0), start, end))
    return rows


def memcpy_rows(trace: dict) -> list[tuple]:
    """rocprofv3 memory_copy_trace rows (Kind, Direction, Stream_Id, Source/Destination_Agent_Id, Correlation_Id,
    Start, End); the direction is read from Kineto's event name (`Memcpy HtoD (Pinned -> Device)`)."""
    base = int(trace.get("baseTimeNanoseconds") or 0)
    events = sorted((e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"
                     and e.get("cat") == "gpu_memcpy"), key=lambda e: float(e.get("ts", 0)))
    rows = []
    for e in events:
        args = e.get("args") or {}
        words = str(e.get("name", "")).split()
        direction, src_host, dst_host = _DIRECTIONS.get(words[1] if len(words) > 1 else "", ("UNKNOWN", False, False))
        gpu = f"Agent {int(args.get('device', 0) or 0)}"
        start, end = _ns(base, e)
        rows.append(("MEMORY_COPY", "MEMORY_COPY_" + direction, int(args.get("stream", 0) or 0),
                     "CPU" if src_host else gpu, "CPU" if dst_host else gpu, int(args.get("correlation", 0) or 0),
                     start, end))
    return rows


def write_files(trace: dict, host_dir: str, prefix: str, *, cpu: bool, truncate: bool = False,
                max_rows: int | None = None, api: bool = False, memcpy: bool = False, stats: bool = False) -> list[str]:
    """Write <prefix>kernel_trace.csv and <prefix>kernel_stats.csv, with `api` <prefix>hip_api_trace.csv (and
    hip_api_stats.csv with `stats`), with `memcpy` <prefix>memory_copy_trace.csv; nothing when no kernel was
    captured (rocprofv3 writes no files then)."""
    rows = kernel_rows(trace, cpu=cpu, truncate=truncate, max_rows=max_rows)
    if not rows:
        return []
    written = [os.path.join(host_dir, prefix + "kernel_trace.csv"), os.path.join(host_dir, prefix + "kernel_stats.csv")]
    rocprof_csv.write_rows(written[0], rocprof_csv.KERNEL_TRACE, rows)
    rocprof_csv.write_rows(written[1], rocprof_csv.STATS, stats_rows(rows))
    calls = api_rows(trace) if api else []
    if calls:
        written.append(os.path.join(host_dir, prefix + "hip_api_trace.csv"))
        rocprof_csv.write_rows(written[-1], rocprof_csv.API_TRACE, calls)
        if stats:
            durations: dict[str, list[int]] = {}
            for r in calls:
                durations.setdefault(r[1], []).append(r[6] - r[5])
            written.append(os.path.join(host_dir, prefix + "hip_api_stats.csv"))
            rocprof_csv.write_rows(written[-1], rocprof_csv.STATS, rocprof_csv.kernel_stats(durations))
    copies = memcpy_rows(trace) if memcpy else []
    if copies:
        written.append(os.path.join(host_dir, prefix + "memory_copy_trace.csv"))
        rocprof_csv.write_rows(written[-1], rocprof_csv.MEMORY_COPY_TRACE, copies)
    return written
