"""Turn RunData into the report: one JSON-ready dict that the Markdown, HTML and JSON writers all render.

Times are nanoseconds in the dict; renderers choose display units.
"""

from __future__ import annotations

import datetime
import statistics
from collections.abc import Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import heap, kineto_reader, multinode, phases
from madengine_rocprof.reports.analyses import idle, launch, run_efficiency
from madengine_rocprof.reports.analyses.collectives import of_run as collectives_of_run
from madengine_rocprof.reports.analyses.ranks import per_rank, rank_of
from madengine_rocprof.reports.categories import CATEGORIES, classify_many
from madengine_rocprof.reports.model import CounterStats, KernelStats, RunData
from madengine_rocprof.reports.roles import roles_of
from madengine_rocprof.wrapper.contracts import Report, ReportRun

SCHEMA_VERSION = 1
COUNTERS_PER_KERNEL = 8  # counter columns kept per top kernel


def merge_kernels(run: RunData) -> dict[str, KernelStats]:
    merged: dict[str, KernelStats] = {}
    for source in run.timing:
        for name, stats in source.kernels.items():
            merged.setdefault(name, KernelStats()).merge(stats)
    return merged


def merge_counters(run: RunData):
    """Counter totals, per-kernel stats, and per counter the kernel time of the dispatches it was read on.

    The time is per counter because multi-pass runs read different counters on different re-runs.
    """
    counters: dict[str, CounterStats] = {}
    by_kernel: dict[tuple[str, str], CounterStats] = {}
    time_ns: dict[str, float] = {}
    for source in run.counters:
        source_ns = sum(total for _, total in source.kernel_time.values())
        for name, stats in source.counters.items():
            counters.setdefault(name, CounterStats()).merge(stats)
            time_ns[name] = time_ns.get(name, 0) + source_ns
        for key, stats in source.by_kernel.items():
            by_kernel.setdefault(key, CounterStats()).merge(stats)
    return counters, by_kernel, time_ns


def derived_metrics(counters: dict[str, CounterStats], time_ns: dict[str, float]) -> list[dict]:
    """Metrics computed from counter totals, only where every input counter is present."""
    total = {name: stats.total for name, stats in counters.items()}
    out = []

    def add(name, value, unit, formula):
        out.append({"name": name, "value": value, "unit": unit, "formula": formula})

    def per_ns(*names, weights=None):
        """Sum of counter rates (total / kernel time of the dispatches it was read on), or None if untimed."""
        weights = weights or [1] * len(names)
        if not all(time_ns.get(n) for n in names):
            return None
        return sum(w * total[n] / time_ns[n] for n, w in zip(names, weights, strict=True))

    for hit, miss in (("TCC_HIT_sum", "TCC_MISS_sum"), ("GL2C_HIT_sum", "GL2C_MISS_sum")):
        if hit in total and miss in total and total[hit] + total[miss] > 0:
            add("L2 cache hit rate", 100.0 * total[hit] / (total[hit] + total[miss]), "%", f"{hit} / ({hit} + {miss})")
    waves = total.get("SQ_WAVES", 0)
    if waves > 0:
        for counter, name in (
            ("SQ_INSTS_VALU", "VALU instructions per wave"),
            ("SQ_INSTS_SALU", "SALU instructions per wave"),
            ("SQ_INSTS_VMEM_RD", "vector memory reads per wave"),
            ("SQ_INSTS_VMEM_WR", "vector memory writes per wave"),
            ("SQ_WAVE_CYCLES", "wave cycles per wave"),
        ):
            if counter in total:
                add(name, total[counter] / waves, "per wave", f"{counter} / SQ_WAVES")
    if "FETCH_SIZE" in total and "WRITE_SIZE" in total:
        # FETCH_SIZE and WRITE_SIZE are in KiB (counter_defs.yaml divides bytes by 1024)
        add(
            "memory traffic",
            (total["FETCH_SIZE"] + total["WRITE_SIZE"]) * 1024 / 1e9,
            "GB",
            "(FETCH_SIZE + WRITE_SIZE) x 1024 B / 1e9",
        )
        rate = per_ns("FETCH_SIZE", "WRITE_SIZE")
        if rate is not None:
            add(
                "achieved memory bandwidth",
                rate * 1024,
                "GB/s",
                "(FETCH_SIZE + WRITE_SIZE) x 1024 B / kernel time of the dispatches they were read on",
            )
    amd_fp32 = ("SQ_INSTS_VALU_ADD_F32", "SQ_INSTS_VALU_MUL_F32", "SQ_INSTS_VALU_FMA_F32")
    if all(c in total for c in amd_fp32):
        rate = per_ns(*amd_fp32, weights=[64, 64, 128])
        if rate is not None:
            add("FP32 vector throughput", rate, "GFLOP/s", "64 lanes x (ADD_F32 + MUL_F32 + 2 x FMA_F32) / kernel time")
    duration = "gpu__time_duration.sum"  # NVIDIA (ncu, converted by the wrapper): bytes and ns in base units
    if duration in total and total[duration] > 0:
        if "dram__bytes_read.sum" in total and "dram__bytes_write.sum" in total:
            add(
                "achieved DRAM bandwidth",
                (total["dram__bytes_read.sum"] + total["dram__bytes_write.sum"]) / total[duration],
                "GB/s",
                "(dram__bytes_read.sum + dram__bytes_write.sum) / gpu__time_duration.sum",
            )
        nv_fp32 = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("fadd", "fmul", "ffma")]
        if all(c in total for c in nv_fp32):
            flops = total[nv_fp32[0]] + total[nv_fp32[1]] + 2 * total[nv_fp32[2]]
            add(
                "FP32 throughput",
                flops / total[duration],
                "GFLOP/s",
                "(fadd + fmul + 2 x ffma thread instructions) / gpu__time_duration.sum",
            )
    return out


def _workload_summary(run: RunData) -> dict | None:
    if run.workload is None:
        return _performance_from_run_json(run)
    metrics = run.workload.get("metrics") or {}
    step = metrics.get("step_time_ms") or {}
    device = run.workload.get("device") or {}
    return {
        "file": run.workload_path,
        "model": run.workload.get("model"),
        "version": run.workload.get("version"),
        "status": run.workload.get("status"),
        "device": device.get("name") if isinstance(device, dict) else device,
        "tokens_per_second": _number(metrics.get("tokens_per_second")),
        "samples_per_second": _number(metrics.get("samples_per_second")),
        "step_time_ms_median": _number(step.get("median") if isinstance(step, dict) else step),
        "peak_memory_allocated_bytes": _number(metrics.get("peak_memory_allocated_bytes")),
        "peak_host_rss_bytes": _number(metrics.get("peak_host_rss_bytes")),
        "mfu": _number(metrics.get("mfu")),
    }


def _performance_from_run_json(run: RunData) -> dict | None:
    """Without workload_result.json, the runner's run.json still has madengine's `performance:` value."""
    run_info: Mapping[str, Any] = run.run_info or {}
    performance = run_info.get("performance")
    if not isinstance(performance, dict) or _number(performance.get("value")) is None:
        return None
    per_token = "token" in str(performance.get("metric", "")).lower()
    return {
        "file": "run.json",
        "model": run_info.get("model"),
        "version": None,
        "status": None,
        "device": None,
        "tokens_per_second": performance["value"] if per_token else None,
        "samples_per_second": None,
        "step_time_ms_median": None,
        "peak_memory_allocated_bytes": None,
        "peak_host_rss_bytes": None,
        "mfu": None,
        "performance": performance,
    }


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


DEFINITIONS = ("ours", "hta", "both")  # which busy/overlap definitions the report shows (the JSON has both)


def _busy_numbers(t, span_ns: int) -> dict[str, Any]:
    """Busy, idle and overlap of one window (a device's span, or one iteration) under both definitions."""
    idle = span_ns - t.busy_ns
    return {
        "span_ns": span_ns,
        "busy_ns": t.busy_ns,
        "idle_ns": idle,
        "idle_share": _ratio(idle, span_ns),
        "compute_busy_ns": t.compute_busy_ns,
        "comm_busy_ns": t.comm_busy_ns,
        "copy_busy_ns": t.copy_busy_ns,
        "overlap_ns": t.overlap_ns,
        "overlap_share": _ratio(t.overlap_ns, t.comm_busy_ns),
        "exposed_comm_ns": t.comm_busy_ns - t.overlap_ns,
        "hta": {
            "compute_busy_ns": t.hta_compute_busy_ns,
            "non_compute_ns": t.busy_ns - t.hta_compute_busy_ns,
            "comm_busy_ns": t.hta_comm_busy_ns,
            "overlap_ns": t.hta_overlap_ns,
            "overlap_share": _ratio(t.hta_overlap_ns, t.hta_comm_busy_ns),
        },
    }


def steady_iterations(iterations: list, steady_state: bool) -> list:
    """The iterations a summary counts: all, or without the first and the last (warm-up, a cut-off last one)."""
    if steady_state and len(iterations) >= 3:
        return iterations[1:-1]
    return list(iterations)


def _iteration_summary(rows: list[dict], steady_state: bool) -> dict[str, Any] | None:
    """Totals over the counted iterations (all, or the steady state), with the per-iteration busy spread."""
    kept = steady_iterations(rows, steady_state)
    if not kept:
        return None
    span = sum(r["span_ns"] for r in kept)
    busy = sum(r["busy_ns"] for r in kept)
    comm = sum(r["comm_busy_ns"] for r in kept)
    overlap = sum(r["overlap_ns"] for r in kept)
    return {
        "steady_state": steady_state and len(rows) >= 3,
        "iterations": [r["iteration"] for r in kept],
        "span_ns": span,
        "busy_ns": busy,
        "idle_ns": span - busy,
        "idle_share": _ratio(span - busy, span),
        "compute_busy_ns": sum(r["compute_busy_ns"] for r in kept),
        "comm_busy_ns": comm,
        "copy_busy_ns": sum(r["copy_busy_ns"] for r in kept),
        "overlap_ns": overlap,
        "overlap_share": _ratio(overlap, comm),
        "iteration_ms_median": statistics.median(r["span_ns"] for r in kept) / 1e6,
        "busy_ms_median": statistics.median(r["busy_ns"] for r in kept) / 1e6,
    }


def timeline_rows(run: RunData, steady_state: bool = False) -> list[dict]:
    """Busy time per process (rank) and device: idle = span - busy; overlap = compute and communication at once.

    Sources of CPU operators have no device timeline and give no row. With marked iterations, each row carries
    the device time per iteration and a summary over all of them (or over the steady state).
    """
    rows = []
    for source in run.timing:
        if source.cpu_operators:
            continue
        rank = rank_of(source)
        for d in source.devices:
            iterations = [
                {"iteration": it.number, "start_ns": it.start_ns, "end_ns": it.end_ns, "dispatches": it.dispatches,
                 "host_start_ns": it.host_start_ns, "host_end_ns": it.host_end_ns,
                 "kernel_time_sum_ns": it.kernel_time_sum_ns, "assigned_by": "launch" if it.by_launch else "start"}
                | _busy_numbers(it, it.end_ns - it.start_ns)
                for it in d.iterations
            ]
            rows.append(
                {
                    "origin": source.process,
                    "rank": rank,
                    "device": d.device,
                    "dispatches": d.dispatches,
                    "copies": d.copies,
                    "kernel_time_sum_ns": d.kernel_time_sum_ns,
                }
                | _busy_numbers(d, d.span_ns)
                | {"iterations": iterations, "iteration_summary": _iteration_summary(iterations, steady_state)}
            )
    return rows


def analyze_run(run: RunData, steady_state: bool = False, definitions: str = "ours") -> ReportRun:
    """Everything the report says about one run, computed once for every renderer.

    Args:
        run: the run's discovered and parsed files (reports.load_run()).
        steady_state: per-iteration summaries leave out the first and the last iteration (at least 3 marked).
        definitions: which busy/overlap definitions the sections show ("ours", "hta" or "both"; the JSON has both).

    Returns:
        The run's report dict (times in ns): label, path, profiler, outcome, sources / counter_sources /
        skipped_sources, notes, summary (dispatches, unique kernels, GPU time, ...), kernels (one row per kernel
        with category, role, library and share), categories, roles, counters, derived_metrics, kernel_counters,
        memory_copies, workload (the workload_result.json summary), per_rank (busy, idle and top kernels per rank),
        collectives (matched across ranks: analyses/collectives.py) and multi_node (the last three None for a
        single process).
    """
    kernels = merge_kernels(run)
    # counter files without timestamps give dispatch counts but no kernel time
    timed = not run.timing or any(s.counter_time != "untimed" for s in run.timing)
    # nested CPU operators: their inclusive times overlap, so shares, categories and the total use self time
    by_self = timed and bool(kernels) and all(k.self_ns is not None for k in kernels.values())

    def ranked_ns(k: KernelStats) -> float:
        return (k.self_ns or 0) if by_self else k.total_ns

    gpu_time = sum(ranked_ns(k) for k in kernels.values()) if timed else None
    dispatches = sum(k.calls for k in kernels.values())
    # largest first, then by name: two stable sorts, no key tuple per kernel (a trace may have 1M distinct names)
    rows = sorted(kernels.items(), key=itemgetter(0))
    rows.sort(key=(lambda item: -ranked_ns(item[1])) if timed else (lambda item: -item[1].calls))
    classes = classify_many(name for name, _ in rows)
    kernel_rows: list[dict[str, Any]] = [
        {
            "name": name,
            "category": kind.category,
            "role": kind.role,
            "library": kind.library,
            "calls": k.calls,
            "total_ns": k.total_ns if timed else None,
            "self_ns": k.self_ns if timed else None,
            "average_ns": k.average_ns if timed else None,
            "min_ns": k.min_ns,
            "max_ns": k.max_ns,
            "share": (ranked_ns(k) / gpu_time if gpu_time else 0.0) if timed else None,
        }
        for (name, k), kind in zip(rows, classes, strict=True)
    ]
    by_category: dict[str, dict[str, Any]] = {
        c: {"category": c, "calls": 0, "total_ns": 0, "kernels": 0} for c in CATEGORIES
    }
    for row in kernel_rows:
        entry = by_category[row["category"]]
        entry["calls"] += row["calls"]
        entry["total_ns"] += (row["self_ns"] if by_self else row["total_ns"]) or 0
        entry["kernels"] += 1
    categories = [
        dict(e, share=e["total_ns"] / gpu_time if gpu_time else 0.0) if timed else dict(e, total_ns=None, share=None)
        for e in by_category.values()
    ]

    counters, by_kernel, counter_time = merge_counters(run)
    counter_rows = [
        {"name": n, "dispatches": s.dispatches, "total": s.total, "mean": s.mean, "min": s.min, "max": s.max}
        for n, s in sorted(counters.items())
    ]
    counter_names = sorted(counters)[:COUNTERS_PER_KERNEL]
    kernel_counters = {}
    for name in [r["name"] for r in kernel_rows[:20]] or sorted({k for k, _ in by_kernel}):
        values = {c: by_kernel[(name, c)].mean for c in counter_names if (name, c) in by_kernel}
        if values:
            kernel_counters[name] = values

    timeline = timeline_rows(run, steady_state)
    collectives = collectives_of_run(run)
    span_total = sum(t["span_ns"] for t in timeline)
    busy_total = sum(t["busy_ns"] for t in timeline) if timeline else None
    spans = [
        s.last_end_ns - s.first_start_ns
        for s in run.timing
        if s.first_start_ns is not None and s.last_end_ns is not None
    ]
    fmts = sorted({s.fmt for s in run.timing})
    notes = list(run.notes)
    manifest: Mapping[str, Any] = run.manifest or {}  # any folder: the wrapper's manifest may be absent
    if isinstance(manifest.get("dispatch_count"), int) and run.timing and manifest["dispatch_count"] != dispatches:
        notes.append(
            f"the wrapper's manifest says {manifest['dispatch_count']} dispatches, the files hold {dispatches}"
        )
    cpu_operators = any(s.cpu_operators for s in run.timing)
    if cpu_operators:
        # say what recorded them: a PyTorch profiler trace of the CPU only, or our tracer's rows without a GPU
        recorders = sorted({"a PyTorch profiler (Kineto) trace without GPU activity" if s.fmt == kineto_reader.FORMAT
                            else "the embedded tracer without a GPU" for s in run.timing if s.cpu_operators})
        notes.append(
            f"CPU operators on the host only ({' and '.join(recorders)}), so there is no device timeline and no "
            "device busy, idle or overlap"
            + (
                "; operators are ranked by self time (exclusive: nested operators subtracted), inclusive time beside it"
                if by_self
                else "; nested operators are all listed with inclusive times, which overlap: their sum exceeds the "
                "wall time"
            )
        )
    if run.timing and not any(s.dispatches for s in run.timing):  # a trace that holds no kernel is not statistics
        notes.append("no kernel dispatches were recorded: the profiled program ran no GPU kernel the profiler saw")
    elif any(s.counter_time is None for s in run.timing) and not any(s.has_timeline for s in run.timing):
        notes.append("only per-kernel statistics (no per-dispatch trace): no timeline, no Perfetto trace")
    time_from = _counter_time_note(run)
    if time_from:
        notes.append(time_from)
    profiler = manifest.get("profiler") if isinstance(manifest.get("profiler"), dict) else None
    return {
        "label": run.label,
        "path": str(run.path),
        "profiler": profiler,
        "outcome": manifest.get("outcome"),
        "run_status": run.run_info.get("status") if run.run_info else None,
        "sources": [
            {
                "file": s.rel,
                "format": s.fmt,
                "origin": s.process,
                "pass": s.pass_id,
                "dispatches": s.dispatches,
                "gpu_time_ns": None if s.counter_time == "untimed" else sum(k.total_ns for k in s.kernels.values()),
                "kernel_time_from": KERNEL_TIME_FROM[s.counter_time],
            }
            for s in run.timing
        ],
        "counter_sources": [
            {"file": s.rel, "format": s.fmt, "origin": s.process, "pass": s.pass_id} for s in run.counters
        ],
        "skipped_sources": [{"file": s.rel, "format": s.fmt, "pass": s.pass_id} for s in run.skipped_timing],
        "notes": notes,
        "summary": {
            "has_kernel_data": bool(run.timing),
            "timing_formats": fmts,
            "kernel_time_from": sorted({KERNEL_TIME_FROM[s.counter_time] for s in run.timing}),
            "cpu_operators": cpu_operators,
            # what gpu_time_ns, shares and categories sum: "total" (kernel durations) or "self" (CPU operators)
            "time_basis": "self" if by_self else "total",
            "definitions": definitions,
            "steady_state": steady_state,
            "iterations_marked": max((len(s.iterations) for s in run.timing), default=0),
            "processes": len(run.timing),
            "dispatches": dispatches,
            "unique_kernels": len(kernels),
            "gpu_time_ns": gpu_time,
            "longest_process_span_ns": max(spans) if spans else None,
            # over every process and device with a timeline (sums of the timeline rows)
            "busy_ns": busy_total,
            "idle_ns": None if busy_total is None else span_total - busy_total,
            "idle_share": None if busy_total is None else _ratio(span_total - busy_total, span_total),
            "overlap_ns": sum(t["overlap_ns"] for t in timeline) if timeline else None,
            "trace_peak_memory": _trace_peak_memory(run),
            # CPU operators: self time per training phase where the trace marks the phases (reports/phases.py)
            "phases": phases.summary([s.phase_ns for s in run.timing if s.cpu_operators],
                                     any(s.steps_marked for s in run.timing))
            if cpu_operators and by_self else None,
        },
        "timeline": timeline,
        "kernels": kernel_rows,
        "categories": categories,
        "roles": roles_of(
            [dict(r, total_ns=r["self_ns"]) for r in kernel_rows] if by_self else kernel_rows, gpu_time
        ),
        "counters": counter_rows,
        "derived_metrics": derived_metrics(counters, counter_time),
        "kernel_counters": kernel_counters,
        "memory_copies": [
            {"direction": d, "calls": c.calls, "total_ns": c.total_ns} for d, c in sorted(run.copies.items())
        ],
        "workload": _workload_summary(run),
        "per_rank": per_rank(run, timeline),
        "collectives": collectives,
        "multi_node": multinode.analyze(run, collectives),
        "efficiency": _released(run_efficiency.for_run(run)),
        "idle_causes": _released(idle.analyze_run(run, timeline)),
        "launch": _released(launch.analyze_run(run, timeline)),
    }


def _released(result: Any) -> Any:
    """An analysis' result, once the pages its frames freed are given back (heap.release: a 1M-kernel trace's
    analyses would otherwise each add their own to the report's peak)."""
    heap.release()
    return result


# where a timing source's kernel durations come from (TimingSource.counter_time -> words for the report)
KERNEL_TIME_FROM = {
    None: "kernel trace",
    "gpu__time_duration.sum": "counter collection (gpu__time_duration.sum)",
    "timestamps": "counter collection (End - Start)",
    "untimed": "counter collection (no timestamps)",
}


def _counter_time_note(run: RunData) -> str | None:
    """Say plainly that dispatches and times come from counter rows, and what such times mean."""
    derived = [s for s in run.timing if s.counter_time is not None]
    if not derived:
        return None
    kinds = {s.counter_time for s in derived}
    text = (
        f"no kernel trace for process(es) {', '.join(s.process for s in derived)}: dispatches and kernel times "
        f"come from the counter collection ({', '.join(s.rel for s in derived)}; one dispatch per Dispatch_Id, "
        "or per Correlation_Id where there is no Dispatch_Id)"
    )
    if "gpu__time_duration.sum" in kinds:
        text += (
            "; times are ncu's gpu__time_duration.sum per dispatch, measured while ncu replayed each kernel "
            "in isolation (per-replay durations, not a timeline of the real run)"
        )
    if "timestamps" in kinds:
        text += (
            "; times are End_Timestamp - Start_Timestamp of each dispatch while counters were read "
            "(dispatches serialized; with counter replay these are per-replay durations)"
        )
    if "untimed" in kinds:
        text += "; the counter file has no timestamps, so there are dispatch counts but no kernel times"
    return text + "; no timeline, no Perfetto trace"


def _ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def compare(runs: list[ReportRun], baseline: ReportRun) -> list[dict[str, Any]]:
    """One row per run; every ratio reads the same way: above 1 means better than the baseline (faster, or less
    memory): baseline / run for times and memory, run / baseline for throughput."""
    base_summary, base_work = baseline["summary"], baseline["workload"] or {}
    base_gpu = base_summary["gpu_time_ns"] if base_summary["has_kernel_data"] else None
    base_memory, base_kind = peak_memory(base_work)
    if base_memory is None:
        base_memory, base_kind = _trace_memory(base_summary)
    rows = []
    for run in runs:
        summary, work = run["summary"], run["workload"] or {}
        gpu = summary["gpu_time_ns"] if summary["has_kernel_data"] else None
        memory, memory_kind = peak_memory(work)
        if memory is None:  # no workload figure: the trace's own memory events, largest device
            memory, memory_kind = _trace_memory(summary)
        # CPU operator time and GPU kernel time are different things: no ratio between them
        comparable = summary.get("cpu_operators", False) == base_summary.get("cpu_operators", False)
        rows.append(
            {
                "label": run["label"],
                "baseline": run is baseline,
                "dispatches": summary["dispatches"] if summary["has_kernel_data"] else None,
                "unique_kernels": summary["unique_kernels"] if summary["has_kernel_data"] else None,
                "gpu_time_ns": gpu,
                "gpu_time_speedup": _ratio(base_gpu, gpu) if comparable else None,
                "cpu_operators": summary.get("cpu_operators", False),
                "top_kernel": run["kernels"][0]["name"] if run["kernels"] else None,
                "tokens_per_second": work.get("tokens_per_second"),
                "throughput_speedup": _ratio(work.get("tokens_per_second"), base_work.get("tokens_per_second")),
                "peak_memory_allocated_bytes": work.get("peak_memory_allocated_bytes"),
                "peak_host_rss_bytes": work.get("peak_host_rss_bytes"),
                "peak_memory_bytes": memory,
                "peak_memory_kind": memory_kind,  # "device" (allocated by torch) or "host" (peak RSS)
                "memory_saving": _ratio(base_memory, memory) if memory_kind == base_kind else None,
                "status": run.get("run_status") or work.get("status") or run.get("outcome"),
            }
        )
    return rows


def _trace_peak_memory(run: RunData) -> list[dict[str, Any]]:
    """Peak allocated memory per process and device from the trace's own memory events (PyTorch profiler
    `[memory]`: the allocator's Total Allocated), where the reader gives it (TimingSource.peak_memory_bytes)."""
    out = []
    for source in run.timing:
        peaks = getattr(source, "peak_memory_bytes", None) or {}  # only the readers of traces with memory events
        out += [{"origin": source.process, "device": device, "bytes": value} for device, value in peaks.items()]
    return out


def peak_memory(work: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The run's peak memory and where it was measured: the device's (torch allocator), else the host's peak RSS."""
    if work.get("peak_memory_allocated_bytes") is not None:
        return work["peak_memory_allocated_bytes"], "device"
    if work.get("peak_host_rss_bytes") is not None:
        return work["peak_host_rss_bytes"], "host"
    return None, None


def _trace_memory(summary: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The largest per-device peak of the trace's memory events. GPU devices only: the allocator's Total Allocated
    there is the device's; on the host torch.profiler counts only what was allocated after it started, which is no
    peak memory of the run."""
    peaks = summary.get("trace_peak_memory") or []
    gpu = [p["bytes"] for p in peaks if not str(p["device"]).upper().startswith("CPU")]
    return (max(gpu), "trace") if gpu else (None, None)


def pick_baseline(runs: list[RunData], baseline: str | None) -> int:
    """Index of the baseline run: by label or by path (as given or resolved); the first run by default."""
    if baseline is None:
        return 0
    wanted = Path(baseline).resolve() if Path(baseline).exists() else None
    for i, run in enumerate(runs):
        if run.label == baseline or (wanted is not None and run.path.resolve() == wanted):
            return i
    raise UserError(
        f"--baseline {baseline!r} is not one of the runs",
        where="--baseline",
        fix="name one of: " + ", ".join(r.label for r in runs),
    )


def build_report(
    runs: list[RunData], baseline: str | None = None, steady_state: bool = False, definitions: str = "ours"
) -> Report:
    """The report dict (the --json output); `steady_state` and `definitions`: see analyze_run."""
    if definitions not in DEFINITIONS:
        raise UserError(f"unknown definitions {definitions!r}", where="--definitions", fix="use ours, hta or both")
    index = pick_baseline(runs, baseline)
    analyzed = [analyze_run(run, steady_state, definitions) for run in runs]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "madengine-rocprof report",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "baseline": analyzed[index]["label"],
        "comparison": compare(analyzed, analyzed[index]),
        "runs": analyzed,
    }
