"""The report as a list of sections, built once from the report dict; markdown.py and html_page.py only format them.

A section is a heading plus blocks: `Lines` (prose, with `code` and **bold** spans), `Table` (typed columns: the
renderers choose how a `ms` or `kernel` value looks), and charts (`Bars`, `Stacked`: drawn in HTML, left out of
Markdown, which has no charts). `build(report, top)` returns the sections in page order.

To add a section, write a function `(run, top) -> Section | None` (per run) or `(report, top) -> Section | None`
(across runs) and add it to RUN_SECTIONS or REPORT_SECTIONS; both renderers show it with no change.
"""

from __future__ import annotations

from collections.abc import Callable

from madengine_rocprof.reports import multinode
from madengine_rocprof.reports.blocks import Bars, Column, Lines, Section, Stacked, Table
from madengine_rocprof.reports.categories import CATEGORIES
from madengine_rocprof.reports.formatting import DASH, count, display_name, gib, ms, number, pct, times
from madengine_rocprof.reports.roles import role_table
from madengine_rocprof.wrapper.contracts import Report, ReportRun


def _timed(runs: list[ReportRun]) -> list[ReportRun]:
    return [r for r in runs if r["summary"]["has_kernel_data"] and r["summary"]["gpu_time_ns"] is not None]


def category_table(runs: list[ReportRun]) -> Table:
    """Run x category kernel time (categories in their fixed order, those empty in every run left out)."""
    totals = [{c["category"]: c["total_ns"] for c in r["categories"]} for r in runs]
    present = [name for name in CATEGORIES if any(t.get(name) for t in totals)]
    return Table(
        [Column("run", "label")] + [Column(name, "ms") for name in present],
        [[r["label"]] + [t.get(name, 0) for name in present] for r, t in zip(runs, totals, strict=True)],
    )


def _category_segments(run: ReportRun) -> list[tuple[str, float]]:
    by_name = {c["category"]: c["total_ns"] for c in run["categories"]}
    return [(c, (by_name.get(c) or 0) / 1e6) for c in CATEGORIES]


def _compares(report: Report) -> bool:
    """The cross-run sections are shown with several runs, or with one that has workload numbers."""
    return len(report["runs"]) > 1 or any(r["workload"] for r in report["runs"])


def comparison(report: Report, top: int) -> Section | None:
    if not _compares(report):
        return None
    rows = report["comparison"]
    section = Section(f"Comparison (baseline: {report['baseline']})", level=2, anchor="comparison")
    section.blocks.append(
        Table(
            [
                Column("run", "label"),
                Column("dispatches", "count"),
                Column("unique kernels", "count"),
                Column("GPU time (ms)"),
                Column("GPU-time speedup", "times"),
                Column("tokens/s", "number"),
                Column("throughput speedup", "times"),
                Column("peak memory (GiB)", "gib"),
                Column("memory vs baseline", "times"),
                Column("status"),
            ],
            [
                [
                    r["label"],
                    r["dispatches"],
                    r["unique_kernels"],
                    ms(r["gpu_time_ns"]) + (" (CPU ops)" if r["cpu_operators"] else ""),
                    r["gpu_time_speedup"],
                    r["tokens_per_second"],
                    r["throughput_speedup"],
                    r["peak_memory_allocated_bytes"],
                    r["memory_vs_baseline"],
                    r["status"] or DASH,
                ]
                for r in rows
            ],
            marked=[r["baseline"] for r in rows],
            note="Speedups are baseline / run for GPU time and run / baseline for tokens/s (above 1x is faster). "
            "GPU time is the sum of kernel durations (kernels that overlap count in full).",
        )
    )
    return section


def category_comparison(report: Report, top: int) -> Section | None:
    timed = _timed(report["runs"])
    if not timed or not _compares(report):
        return None
    section = Section(
        "Kernel time by category (ms)",
        blocks=[
            Stacked(
                [(r["label"], _category_segments(r)) for r in timed],
                [f"{ms(r['summary']['gpu_time_ns'])} ms" for r in timed],
            )
        ],
    )
    if len(timed) > 1:
        section.blocks.append(category_table(timed))
    return section


def role_comparison(report: Report, top: int) -> Section | None:
    """Kernel time by role across runs: runs on different GPUs compare by what their kernels do (docs/reports.md)."""
    timed = _timed(report["runs"])
    if len(timed) < 2:
        return None
    labels, rows = role_table(timed, report["baseline"])
    columns = [Column("role"), Column("category")]
    for label in labels:
        columns += [Column(f"{label} (ms)", "ms"), Column("vs baseline", "times")]
    return Section(
        "Kernel time by role (ms)",
        blocks=[
            Table(
                columns,
                rows,
                note="Roles are the same words on AMD and NVIDIA (`madengine-rocprof kernels classify`); "
                "vs baseline is run time / baseline time of that role (below 1x is faster).",
            )
        ],
    )


def throughput(report: Report, top: int) -> Section | None:
    rows = [r for r in report["comparison"] if r["tokens_per_second"] is not None]
    if not rows:
        return None
    return Section(
        "Workload throughput (tokens/s)",
        blocks=[
            Bars(
                [
                    (
                        r["label"],
                        r["tokens_per_second"],
                        number(r["tokens_per_second"])
                        + (f" ({times(r['throughput_speedup'])})" if r["throughput_speedup"] else ""),
                        "#56B4E9" if r["baseline"] else "#0072B2",
                        f"{r['label']}: {number(r['tokens_per_second'])} tokens/s",
                    )
                    for r in rows
                ],
                max_label_chars=36,
            )
        ],
    )


def run_header(run: ReportRun, top: int) -> Section:
    """The run's heading: where it came from, the workload's numbers, the kernel summary, notes."""
    summary = run["summary"]
    facts = [f"directory: `{run['path']}`"]
    if run["profiler"]:
        profiler = run["profiler"]
        facts.append(
            f"profiler: {profiler.get('name') or DASH} {profiler.get('version') or ''}".rstrip()
            + (f" (outcome: {run['outcome']})" if run["outcome"] else "")
        )
    if run["workload"]:
        w = run["workload"]
        facts.append(
            f"workload: {w['model'] or DASH} {w['version'] or ''} on {w['device'] or DASH}: "
            f"**{number(w['tokens_per_second'])} tokens/s**, step {number(w['step_time_ms_median'])} ms (median), "
            f"peak memory {gib(w['peak_memory_allocated_bytes'])} GiB, MFU {pct(w['mfu'])}, "
            f"status {w['status'] or DASH}"
        )
    if summary["has_kernel_data"]:
        origins = sorted({s["origin"] for s in run["sources"]})
        facts.append(
            f"**{count(summary['dispatches'])}** kernel dispatches, "
            f"**{count(summary['unique_kernels'])}** unique kernels, "
            f"**{ms(summary['gpu_time_ns'])} ms** kernel time (sum of durations), from {len(run['sources'])} file(s) "
            f"({', '.join(f'`{s}`' for s in sorted({s['file'] for s in run['sources']}))}; "
            f"{', '.join(summary['timing_formats'])}) of {len(origins)} process(es): {', '.join(origins)}"
        )
        if summary.get("busy_ns") is not None:
            facts.append(
                f"GPU busy {ms(summary['busy_ns'])} ms (union of kernel intervals per device), idle "
                f"{ms(summary['idle_ns'])} ms ({pct(summary['idle_share'])} of the devices' spans)"
            )
        if summary["kernel_time_from"] != ["kernel trace"]:
            facts.append(f"kernel times from: {', '.join(summary['kernel_time_from'])}")
    else:
        facts.append("no kernel timing in this run")
    section = Section(f"Run: {run['label']}", level=2, blocks=[Lines(facts)])
    if run["notes"]:
        section.blocks.append(Lines([f"note: {n}" for n in run["notes"]], kind="note"))
    return section


def top_kernels(run: ReportRun, top: int) -> Section | None:
    kernels = run["kernels"][:top]
    if not kernels:
        return None
    if run["summary"]["gpu_time_ns"] is None:  # counter rows without timestamps: calls only
        return Section(
            f"Top {len(kernels)} kernels by calls",
            blocks=[
                Table(
                    [Column("#"), Column("kernel", "kernel"), Column("category"), Column("calls", "count")],
                    [[i + 1, k["name"], k["category"], k["calls"]] for i, k in enumerate(kernels)],
                )
            ],
        )
    return Section(
        f"Top {len(kernels)} kernels by total time",
        blocks=[
            Bars(
                [
                    (
                        display_name(k["name"]),
                        k["total_ns"] / 1e6,
                        f"{ms(k['total_ns'])} ms ({pct(k['share'])})",
                        k["category"],
                        f"{k['name']}\n{k['category']}, {count(k['calls'])} calls, {ms(k['total_ns'])} ms",
                    )
                    for k in kernels
                ],
                width=1000,
                max_label_chars=64,
            ),
            Table(
                [
                    Column("#"),
                    Column("kernel", "kernel"),
                    Column("category"),
                    Column("calls", "count"),
                    Column("total (ms)", "ms"),
                    Column("avg (us)", "us"),
                    Column("min (us)", "us"),
                    Column("max (us)", "us"),
                    Column("share", "pct"),
                ],
                [
                    [
                        i + 1,
                        k["name"],
                        k["category"],
                        k["calls"],
                        k["total_ns"],
                        k["average_ns"],
                        k["min_ns"],
                        k["max_ns"],
                        k["share"],
                    ]
                    for i, k in enumerate(kernels)
                ],
            ),
        ],
    )


def categories(run: ReportRun, top: int) -> Section | None:
    if not run["kernels"] or run["summary"]["gpu_time_ns"] is None:
        return None
    rows = sorted((c for c in run["categories"] if c["kernels"]), key=lambda c: (-(c["total_ns"] or 0), c["category"]))
    return Section(
        "Kernel categories",
        blocks=[
            Stacked(
                [(run["label"], _category_segments(run))], [f"{ms(run['summary']['gpu_time_ns'])} ms"], normalize=True
            ),
            Table(
                [
                    Column("category"),
                    Column("kernels", "count"),
                    Column("calls", "count"),
                    Column("time (ms)", "ms"),
                    Column("share", "pct"),
                ],
                [[c["category"], c["kernels"], c["calls"], c["total_ns"], c["share"]] for c in rows],
            ),
        ],
    )


def timeline(run: ReportRun, top: int) -> Section | None:
    """Busy time per process and device (issue: the sum of durations double-counts overlapping kernels)."""
    rows = run.get("timeline") or []
    if not rows:
        return None
    return Section(
        "GPU busy time per process and device",
        blocks=[
            Lines(
                [
                    "busy = union of kernel intervals on the device; idle = span (first start to last end) - busy; "
                    "overlap = time when compute kernels and communication/memory-copy kernels ran at once "
                    "(compute busy + communication/copy busy - busy); sum = sum of kernel durations"
                ],
                kind="meta",
            ),
            Table(
                [
                    Column("process"),
                    Column("rank"),
                    Column("device"),
                    Column("dispatches", "count"),
                    Column("span (ms)", "ms"),
                    Column("busy (ms)", "ms"),
                    Column("idle (ms)", "ms"),
                    Column("idle", "pct"),
                    Column("sum of durations (ms)", "ms"),
                    Column("compute busy (ms)", "ms"),
                    Column("comm/copy busy (ms)", "ms"),
                    Column("overlap (ms)", "ms"),
                    Column("comm/copy overlapped", "pct"),
                ],
                [
                    [
                        t["origin"],
                        DASH if t["rank"] is None else t["rank"],
                        t["device"],
                        t["dispatches"],
                        t["span_ns"],
                        t["busy_ns"],
                        t["idle_ns"],
                        t["idle_share"],
                        t["kernel_time_sum_ns"],
                        t["compute_busy_ns"],
                        t["comm_busy_ns"],
                        t["overlap_ns"],
                        t["overlap_share"],
                    ]
                    for t in rows
                ],
            ),
        ],
    )


COUNTER_ROWS = 25  # counters listed per run in Markdown/HTML; the JSON report has all of them


def counters(run: ReportRun, top: int) -> Section | None:
    rows = run["counters"]
    if not rows:
        return None
    more = None
    if len(rows) > COUNTER_ROWS:
        more = (
            f"{len(rows) - COUNTER_ROWS} more counters not shown (first {COUNTER_ROWS} by name); "
            f"the JSON report (--json) has all {len(rows)}."
        )
        rows = rows[:COUNTER_ROWS]
    section = Section(
        "Counters (per dispatch)",
        blocks=[
            Table(
                [
                    Column("counter"),
                    Column("dispatches", "count"),
                    Column("mean", "number"),
                    Column("min", "number"),
                    Column("max", "number"),
                    Column("total", "number"),
                ],
                [[c["name"], c["dispatches"], c["mean"], c["min"], c["max"], c["total"]] for c in rows],
                note=more,
            )
        ],
    )
    if run["derived_metrics"]:
        section.blocks.append(
            Table(
                [Column("derived metric"), Column("value", "number"), Column("unit"), Column("formula")],
                [[d["name"], d["value"], d["unit"], d["formula"]] for d in run["derived_metrics"]],
            )
        )
    if run["kernel_counters"]:
        names = sorted({c for values in run["kernel_counters"].values() for c in values})
        section.blocks += [
            Lines(["Mean counter values per dispatch of the top kernels:"]),
            Table(
                [Column("kernel", "kernel")] + [Column(n, "number") for n in names],
                [[k] + [v.get(c) for c in names] for k, v in run["kernel_counters"].items()],
            ),
        ]
    return section


def memory_copies(run: ReportRun, top: int) -> Section | None:
    if not run["memory_copies"]:
        return None
    return Section(
        "Memory copies",
        blocks=[
            Table(
                [Column("direction"), Column("copies", "count"), Column("time (ms)", "ms")],
                [[c["direction"], c["calls"], c["total_ns"]] for c in run["memory_copies"]],
            )
        ],
    )


# sections across runs (shown once, before the runs), then per run, in page order
REPORT_SECTIONS: list[Callable[[Report, int], Section | None]] = [
    comparison,
    category_comparison,
    role_comparison,
    throughput,
]


def multi_node(run: ReportRun, top: int) -> Section | None:
    """Per node, per rank and stragglers: reports/multinode.py."""
    return multinode.section(run, top)


RUN_SECTIONS: list[Callable[[ReportRun, int], Section | None]] = [
    run_header,
    top_kernels,
    categories,
    timeline,
    counters,
    memory_copies,
    multi_node,
]


def build(report: Report, top: int) -> list[Section]:
    sections = [s for make in REPORT_SECTIONS if (s := make(report, top)) is not None]
    for run in report["runs"]:
        sections += [s for make in RUN_SECTIONS if (s := make(run, top)) is not None]
    return sections
