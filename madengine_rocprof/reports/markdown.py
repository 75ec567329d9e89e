"""Render the report dict as Markdown (what `madengine-rocprof report` prints by default)."""
from __future__ import annotations

from madengine_rocprof.reports import multinode
from madengine_rocprof.reports.categories import CATEGORIES
from madengine_rocprof.reports.formatting import DASH, count, display_name, gib, ms, number, pct, shorten, times, us


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


COUNTER_ROWS = 25  # counters listed per run in Markdown/HTML; the JSON report has all of them


def shown_counters(run: dict) -> tuple[list[dict], str | None]:
    """The first COUNTER_ROWS counters by name, and a line saying how many more there are (None if none)."""
    rows = run["counters"]
    if len(rows) <= COUNTER_ROWS:
        return rows, None
    return rows[:COUNTER_ROWS], (f"{len(rows) - COUNTER_ROWS} more counters not shown "
                                 f"(first {COUNTER_ROWS} by name); the JSON report (--json) has all {len(rows)}.")


def category_table(runs: list[dict]) -> tuple[list[str], list[list]]:
    """Run x category kernel time in ms (categories in their fixed order, those empty in every run left out)."""
    totals = [{c["category"]: c["total_ns"] for c in r["categories"]} for r in runs]
    present = [name for name in CATEGORIES if any(t.get(name) for t in totals)]
    return ["run"] + present, [[r["label"]] + [ms(t.get(name, 0)) for name in present] for r, t in zip(runs, totals)]


def render(report: dict, top: int = 10, name_width: int = 70) -> str:
    out = ["# Profiling report", ""]
    if len(report["runs"]) > 1 or any(r["workload"] for r in report["runs"]):
        out += [f"## Comparison (baseline: {report['baseline']})", ""]
        out += table(
            ["run", "dispatches", "unique kernels", "GPU time (ms)", "GPU-time speedup", "tokens/s",
             "throughput speedup", "peak memory (GiB)", "memory vs baseline", "status"],
            [
                [row["label"] + (" (baseline)" if row["baseline"] else ""), count(row["dispatches"]),
                 count(row["unique_kernels"]), ms(row["gpu_time_ns"]) + (" (CPU ops)" if row["cpu_operators"] else ""),
                 times(row["gpu_time_speedup"]),
                 number(row["tokens_per_second"]), times(row["throughput_speedup"]),
                 gib(row["peak_memory_allocated_bytes"]), times(row["memory_vs_baseline"]), row["status"] or DASH]
                for row in report["comparison"]
            ],
        )
        out += ["Speedups are baseline / run for GPU time and run / baseline for tokens/s (above 1x is faster).", ""]
        timed = [r for r in report["runs"] if r["summary"]["has_kernel_data"] and r["summary"]["gpu_time_ns"] is not None]
        if len(timed) > 1:
            out += ["### Kernel time by category (ms)", ""]
            out += table(*category_table(timed))
    for run in report["runs"]:
        out += _run(run, top, name_width)
    return "\n".join(out).rstrip() + "\n"


def _run(run: dict, top: int, name_width: int) -> list[str]:
    summary = run["summary"]
    out = [f"## Run: {run['label']}", "", f"- directory: `{run['path']}`"]
    if run["profiler"]:
        profiler = run["profiler"]
        out.append(f"- profiler: {profiler.get('name') or DASH} {profiler.get('version') or ''}".rstrip()
                   + (f" (outcome: {run['outcome']})" if run["outcome"] else ""))
    if run["workload"]:
        w = run["workload"]
        out.append(
            f"- workload: {w['model'] or DASH} {w['version'] or ''} on {w['device'] or DASH}: "
            f"{number(w['tokens_per_second'])} tokens/s, step {number(w['step_time_ms_median'])} ms (median), "
            f"peak memory {gib(w['peak_memory_allocated_bytes'])} GiB, MFU {pct(w['mfu'])}, status {w['status'] or DASH}"
        )
    if summary["has_kernel_data"]:
        origins = sorted({s["origin"] for s in run["sources"]})
        out.append(
            f"- {count(summary['dispatches'])} kernel dispatches, {count(summary['unique_kernels'])} unique kernels, "
            f"{ms(summary['gpu_time_ns'])} ms total GPU kernel time, from {len(run['sources'])} file(s) "
            f"({', '.join(summary['timing_formats'])}) of {len(origins)} process(es): {', '.join(origins)}"
        )
        if summary["kernel_time_from"] != ["kernel trace"]:
            out.append(f"- kernel times from: {', '.join(summary['kernel_time_from'])}")
    else:
        out.append("- no kernel timing in this run")
    for note in run["notes"]:
        out.append(f"- note: {note}")
    out.append("")
    if run["kernels"]:
        by = "total time" if summary["gpu_time_ns"] is not None else "calls"
        out += [f"### Top {min(top, len(run['kernels']))} kernels by {by}", ""]
        out += table(
            ["#", "kernel", "category", "calls", "total (ms)", "avg (us)", "min (us)", "max (us)", "share"],
            [
                [i + 1, shorten(display_name(k["name"]), name_width), k["category"], count(k["calls"]), ms(k["total_ns"]),
                 us(k["average_ns"]), us(k["min_ns"]), us(k["max_ns"]), pct(k["share"])]
                for i, k in enumerate(run["kernels"][:top])
            ],
        )
        out += ["### Kernel categories", ""]
        out += table(
            ["category", "kernels", "calls", "time (ms)", "share"],
            [[c["category"], c["kernels"], count(c["calls"]), ms(c["total_ns"]), pct(c["share"])]
             for c in sorted(run["categories"], key=lambda c: -(c["total_ns"] or 0)) if c["kernels"]],
        )
    if run["counters"]:
        out += ["### Counters (per dispatch)", ""]
        rows, more = shown_counters(run)
        out += table(
            ["counter", "dispatches", "mean", "min", "max", "total"],
            [[c["name"], count(c["dispatches"]), number(c["mean"]), number(c["min"]), number(c["max"]), number(c["total"])]
             for c in rows],
        )
        if more:
            out += [more, ""]
        if run["derived_metrics"]:
            out += ["Derived metrics:", ""]
            out += table(["metric", "value", "unit", "formula"],
                         [[d["name"], number(d["value"]), d["unit"], d["formula"]] for d in run["derived_metrics"]])
    if run["memory_copies"]:
        out += ["### Memory copies", ""]
        out += table(["direction", "copies", "time (ms)"],
                     [[c["direction"], count(c["calls"]), ms(c["total_ns"])] for c in run["memory_copies"]])
    for title, header, rows in multinode.tables(run.get("multi_node")):
        out += [f"### {title}", ""] + table(header, rows)
    return out
