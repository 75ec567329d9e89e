"""Per rank: which rank a trace is, and each rank's busy/idle and top kernels, so that no headline or kernel table
merges ranks whose behaviour differs (one rank 90% idle waiting for another that is 20% idle)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from madengine_rocprof.reports.categories import classify
from madengine_rocprof.reports.model import RunData, TimingSource

# per-rank file names: rank0_123_kernel_trace.csv (the embedded tracer under a launcher), rank-1.json (HTA's
# samples), trace_rank_2.pt.trace.json, rank3/...; the number must end the word
RANK_IN_NAME = re.compile(r"(?:^|[/_.-])rank[_-]?(\d+)(?=$|[/_.-])", re.IGNORECASE)
TOP_KERNELS = 20  # per rank, in the JSON


def rank_of(source: TimingSource) -> int | None:
    """The trace's rank: distributedInfo.rank (Kineto), else the last `rank<N>` in its path, else None."""
    if source.rank is not None:
        return source.rank
    found = RANK_IN_NAME.findall(source.process)
    return int(found[-1]) if found else None


def label(source: TimingSource) -> str:
    rank = rank_of(source)
    return f"rank {rank}" if rank is not None else f"process {source.process}"


def per_rank(run: RunData, timeline: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """One row per profiled process (rank) with its own kernel time, busy and idle; None for a single process."""
    sources = [s for s in run.timing if not s.cpu_operators]
    if len(sources) < 2:
        return None
    rows = []
    for source in sources:
        devices = [t for t in timeline if t["origin"] == source.process]
        span = sum(t["span_ns"] for t in devices)
        busy = sum(t["busy_ns"] for t in devices)
        kernels = sorted(source.kernels.items(), key=lambda kv: (-kv[1].total_ns, kv[0]))
        gpu = sum(k.total_ns for k in source.kernels.values())
        rows.append({
            "rank": rank_of(source),
            "label": label(source),
            "origin": source.process,
            "dispatches": source.dispatches,
            "gpu_time_ns": gpu,
            "span_ns": span if devices else None,
            "busy_ns": busy if devices else None,
            "idle_ns": span - busy if devices else None,
            "idle_share": (span - busy) / span if devices and span else None,
            "comm_busy_ns": sum(t["comm_busy_ns"] for t in devices) if devices else None,
            "kernels": [
                {"name": name, "category": classify(name).category, "calls": k.calls, "total_ns": k.total_ns,
                 "average_ns": k.average_ns, "share": k.total_ns / gpu if gpu else 0.0}
                for name, k in kernels[:TOP_KERNELS]
            ],
        })
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["origin"]))
    # two traces that claim one rank (a copied file, a relaunch) keep distinct labels: never two rows of one name
    claimed = Counter(r["rank"] for r in rows if r["rank"] is not None)
    for r in rows:
        if r["rank"] is not None and claimed[r["rank"]] > 1:
            r["label"] = f"rank {r['rank']} ({r['origin']})"
    return rows
