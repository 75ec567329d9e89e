"""Across ranks and nodes: per node and per rank dispatches, GPU time, step time and communication share, and the
straggler (the slowest rank against the median rank).

Every profiled process has its own files: `<hostname>/<pid>_...` (rocprofv3 `-o %hostname%/%pid%`) or
`<hostname>/rank<r>_<pid>_...` (the embedded tracer under a launcher that sets RANK), so the host is the file's folder
and the rank comes from the name (else the pid stands for it). The step time of a rank is the median interval between
its optimizer steps (`Optimizer.step#...` annotations in the embedded tracer's Perfetto trace); profilers that record
no step annotation (rocprofv3, ncu) leave it empty and the straggler is judged on GPU time instead.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import kineto_reader
from madengine_rocprof.reports.blocks import Column, Lines, Section, Table
from madengine_rocprof.reports.categories import categorize
from madengine_rocprof.reports.formatting import DASH, ms, number, pct
from madengine_rocprof.reports.model import RunData
from madengine_rocprof.wrapper.contracts import ReportRun

RANK_PREFIX = re.compile(r"^rank(\d+)_(\d+)$")
STEP_MARK = "Optimizer.step#"
TRACE_SUFFIX = "perfetto_trace.json"


def _identity(process: str) -> tuple[str, int | None, str]:
    """(host, rank or None, label) from a process key such as `nodes/node1/profiler/node1/rank0_117`."""
    parts = process.split("/")
    prefix, host = parts[-1], (parts[-2] if len(parts) > 1 else "")
    found = RANK_PREFIX.match(prefix)
    if found:
        return host, int(found.group(1)), f"rank {found.group(1)}"
    return host, None, f"pid {prefix}"


def step_times_ms(trace_file: Path) -> list[float]:
    """Intervals between successive optimizer steps in a Chrome/Perfetto trace (streamed: the file may be large)."""
    try:  # optional extra: an unreadable trace only means no step times
        starts = kineto_reader.marked_starts(trace_file, STEP_MARK)
    except UserError:
        return []
    return [(b - a) / 1e6 for a, b in zip(starts, starts[1:], strict=False)]  # consecutive pairs


def analyze(run: RunData) -> dict | None:
    """The multi-rank section of a run, or None when fewer than two processes were profiled."""
    if len({s.process for s in run.timing}) < 2:
        return None
    ranks: list[dict[str, Any]] = []
    for source in run.timing:
        host, rank, label = _identity(source.process)
        gpu_ns = sum(k.total_ns for k in source.kernels.values())
        comm_ns = sum(k.total_ns for name, k in source.kernels.items() if categorize(name) == "communication")
        # the embedded tracer's trace of the same process sits beside its kernel trace, with the same prefix
        trace = source.path.with_name(f"{source.process.rsplit('/', 1)[-1]}_{TRACE_SUFFIX}")
        steps = step_times_ms(trace) if trace.is_file() else []
        ranks.append({
            "host": host, "rank": rank, "label": label, "origin": source.process, "dispatches": source.dispatches,
            "gpu_time_ns": gpu_ns, "communication_ns": comm_ns,
            "communication_share": comm_ns / gpu_ns if gpu_ns else None,
            "step_time_ms": statistics.median(steps) if steps else None, "steps": len(steps),
            "span_ns": (source.last_end_ns - source.first_start_ns)
            if source.first_start_ns is not None and source.last_end_ns is not None else None,
        })
    ranks.sort(key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["host"], r["origin"]))
    nodes = []
    for host in sorted({r["host"] for r in ranks}):
        mine = [r for r in ranks if r["host"] == host]
        gpu = sum(r["gpu_time_ns"] for r in mine)
        comm = sum(r["communication_ns"] for r in mine)
        steps = [r["step_time_ms"] for r in mine if r["step_time_ms"] is not None]
        nodes.append({"host": host, "ranks": len(mine), "dispatches": sum(r["dispatches"] for r in mine),
                      "gpu_time_ns": gpu, "communication_share": comm / gpu if gpu else None,
                      "step_time_ms": max(steps) if steps else None})
    return {"nodes": nodes, "ranks": ranks, "straggler": straggler(ranks)}


def straggler(ranks: list[dict]) -> dict | None:
    """The slowest rank and its skew against the median: by step time when every rank has one, else by GPU time."""
    if all(r["step_time_ms"] is not None for r in ranks):
        key, unit = "step_time_ms", "step time (ms)"
    else:
        key, unit = "gpu_time_ns", "GPU time (ms)"
    values = [r[key] for r in ranks]
    median = statistics.median(values)
    slowest = max(ranks, key=lambda r: r[key])
    fastest = min(ranks, key=lambda r: r[key])
    return {"by": unit, "median": median, "slowest": slowest["label"], "slowest_host": slowest["host"],
            "slowest_value": slowest[key], "fastest": fastest["label"], "fastest_value": fastest[key],
            "skew": (slowest[key] / median - 1) if median else None,
            "per_rank": [{"label": r["label"], "host": r["host"], "value": r[key],
                          "vs_median": (r[key] / median - 1) if median else None} for r in ranks]}


def section(run: ReportRun, top: int) -> Section | None:
    """Per node, per rank and straggler tables (a report section; the renderers format the typed columns)."""
    data = run.get("multi_node")
    if not data:
        return None
    blocks: list = [
        Lines(["Per node (step time: its slowest rank)"]),
        Table([Column("node"), Column("ranks", "count"), Column("dispatches", "count"), Column("GPU time (ms)", "ms"),
               Column("step time (ms)", "number"), Column("communication", "pct")],
              [[n["host"] or DASH, n["ranks"], n["dispatches"], n["gpu_time_ns"], n["step_time_ms"],
                n["communication_share"]] for n in data["nodes"]]),
        Lines(["Per rank (step time: median interval between optimizer steps)"]),
        Table([Column("rank"), Column("node"), Column("dispatches", "count"), Column("GPU time (ms)", "ms"),
               Column("step time (ms)", "number"), Column("communication (ms)", "ms"),
               Column("communication share", "pct")],
              [[r["label"], r["host"] or DASH, r["dispatches"], r["gpu_time_ns"], r["step_time_ms"],
                r["communication_ns"], r["communication_share"]] for r in data["ranks"]]),
    ]
    s = data["straggler"]
    if s:
        by_gpu = s["by"] == "GPU time (ms)"
        median = ms(s["median"]) if by_gpu else number(s["median"])
        blocks += [
            Lines([f"Stragglers by {s['by']}: slowest {s['slowest']} on {s['slowest_host'] or DASH}, "
                   f"{pct(s['skew'])} above the median {median}"]),
            Table([Column("rank"), Column("node"), Column(s["by"], "ms" if by_gpu else "number"),
                   Column("vs median")],
                  [[r["label"], r["host"] or DASH, r["value"],
                    (f"+{pct(r['vs_median'])}" if (r["vs_median"] or 0) > 0 else pct(r["vs_median"]))]
                   for r in s["per_rank"]]),
        ]
    return Section("Across ranks and nodes", blocks=blocks)
