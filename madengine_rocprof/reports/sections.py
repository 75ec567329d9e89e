"""The report as a list of sections, built once from the report dict; markdown.py and html_page.py only format them.

A section is a heading plus blocks: `Lines` (prose, with `code` and **bold** spans), `Table` (typed columns: the
renderers choose how a `ms` or `kernel` value looks), and charts (`Bars`, `Stacked`: drawn in HTML, left out of
Markdown, which has no charts). `build(report, top)` returns the sections in page order.

To add a section, write a function `(run, top) -> Section | None` (per run) or `(report, top) -> Section | None`
(across runs) and add it to RUN_SECTIONS or REPORT_SECTIONS; both renderers show it with no change.
"""

from __future__ import annotations

from collections.abc import Callable

from madengine_rocprof.reports import multinode, phases
from madengine_rocprof.reports.blocks import Bars, Block, Column, Lines, Section, Stacked, Table
from madengine_rocprof.reports.categories import CATEGORIES
from madengine_rocprof.reports.formatting import DASH, count, display_name, gib, ms, number, pct, size, times
from madengine_rocprof.reports.roles import role_table
from madengine_rocprof.reports.views import collectives as collective_views
from madengine_rocprof.reports.views import efficiency as efficiency_view
from madengine_rocprof.reports.views import idle as idle_view
from madengine_rocprof.reports.views import launch as launch_view
from madengine_rocprof.reports.views import ranks as rank_views
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


def _time_words(runs: list) -> tuple[str, str]:
    """(what the time column holds, what its speedup is called): no GPU wording for CPU operators."""
    cpu = [bool(r.get("cpu_operators") or r.get("summary", {}).get("cpu_operators")) for r in runs]
    if all(cpu):
        return "CPU operator self time (ms)", "time speedup"
    if any(cpu):
        return "GPU kernel / CPU operator time (ms)", "time speedup"
    return "GPU kernel time (ms)", "GPU-time speedup"


MEMORY_KIND = {"host": " (host RSS)", "trace": " (trace)", "trace host": " (trace, host)"}
RATIO_NOTE = (
    "Every ratio is against the baseline and reads the same way, above 1x is better: baseline / run for times "
    "and memory (faster, less memory), run / baseline for tokens/s."
)


def comparison(report: Report, top: int) -> Section | None:
    if not _compares(report):
        return None
    rows = report["comparison"]
    section = Section(f"Comparison (baseline: {report['baseline']})", level=2, anchor="comparison")
    time_title, speedup_title = _time_words(rows)
    all_cpu = all(r["cpu_operators"] for r in rows)
    host = any(r["peak_memory_kind"] == "host" for r in rows)
    notes = [RATIO_NOTE]
    if any(not r["cpu_operators"] for r in rows):
        notes.append("GPU kernel time is the sum of kernel durations (kernels that overlap count in full).")
    if any(r["cpu_operators"] for r in rows):
        notes.append(
            "CPU operator time is the sum of self times where the trace gives them (else of inclusive times); "
            "it is not compared with GPU kernel time."
        )
    if any(str(r["peak_memory_kind"]).startswith("trace") for r in rows):
        notes.append(
            "Peak memory marked trace is the largest per-device peak of the allocator's Total Allocated in the "
            "trace's memory events (the workload recorded none)."
        )
    if host:
        notes.append(
            "Peak memory marked host RSS is the process's peak resident set size on the host, not GPU memory."
        )
    section.blocks.append(
        Table(
            [
                Column("run", "label"),
                Column("operator calls" if all_cpu else "dispatches", "count"),
                Column("unique operators" if all_cpu else "unique kernels", "count"),
                Column(time_title),
                Column(speedup_title, "times"),
                Column("tokens/s", "number"),
                Column("throughput speedup", "times"),
                Column("peak memory (GiB)"),
                Column("memory saving", "times"),
                Column("status"),
            ],
            [
                [
                    r["label"],
                    r["dispatches"],
                    r["unique_kernels"],
                    ms(r["gpu_time_ns"])
                    + (" (CPU ops)" if r["cpu_operators"] and time_title.startswith("GPU") else ""),
                    r["gpu_time_speedup"],
                    r["tokens_per_second"],
                    r["throughput_speedup"],
                    gib(r["peak_memory_bytes"]) + MEMORY_KIND.get(r["peak_memory_kind"], ""),
                    r["memory_saving"],
                    r["status"] or DASH,
                ]
                for r in rows
            ],
            marked=[r["baseline"] for r in rows],
            note=" ".join(notes),
        )
    )
    return section


def category_comparison(report: Report, top: int) -> Section | None:
    timed = _timed(report["runs"])
    if not timed or not _compares(report):
        return None
    section = Section(
        "Time by category (ms)"
        if any(r["summary"]["cpu_operators"] for r in timed)
        else "Kernel time by category (ms)",
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
        columns += [Column(f"{label} (ms)", "ms"), Column("speedup", "times")]
    return Section(
        "Time by role (ms)" if any(r["summary"]["cpu_operators"] for r in timed) else "Kernel time by role (ms)",
        blocks=[
            Table(
                columns,
                rows,
                note="Roles are the same words on AMD and NVIDIA (`madengine-rocprof kernels classify`); "
                "speedup is baseline time / run time of that role (above 1x is faster), as in the comparison.",
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
        if w.get("peak_memory_allocated_bytes") is None and w.get("peak_host_rss_bytes") is not None:
            memory = f"peak host memory {gib(w['peak_host_rss_bytes'])} GiB (RSS)"
        else:
            memory = f"peak device memory {gib(w['peak_memory_allocated_bytes'])} GiB (allocated)"
        facts.append(
            f"workload: {w['model'] or DASH} {w['version'] or ''} on {w['device'] or DASH}: "
            f"**{number(w['tokens_per_second'])} tokens/s**, step {number(w['step_time_ms_median'])} ms (median), "
            f"{memory}, MFU {pct(w['mfu'])}, status {w['status'] or DASH}"
        )
    if summary["has_kernel_data"] and summary.get("cpu_operators"):
        origins = sorted({s["origin"] for s in run["sources"]})
        basis = "self time (exclusive)" if summary.get("time_basis") == "self" else "inclusive time (nested: overlaps)"
        facts.append(
            f"**{count(summary['dispatches'])}** CPU operator calls, **{count(summary['unique_kernels'])}** unique "
            f"operators, **{ms(summary['gpu_time_ns'])} ms** host {basis}, from {len(run['sources'])} file(s) "
            f"({', '.join(f'`{s}`' for s in sorted({s['file'] for s in run['sources']}))}) of {len(origins)} "
            f"process(es): {', '.join(origins)}"
        )
        facts.append("no device timeline: CPU operators give no device busy, idle or overlap")
    elif summary["has_kernel_data"]:
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
                f"GPU busy {ms(summary['busy_ns'])} ms (union of kernels, copies and memsets per device), idle "
                f"{ms(summary['idle_ns'])} ms ({pct(summary['idle_share'])} of the devices' spans)"
                + (" (all processes together)" if rank_views.headline(run) else "")
            )
            facts += rank_views.headline(run)
        if summary["kernel_time_from"] != ["kernel trace"]:
            facts.append(f"kernel times from: {', '.join(summary['kernel_time_from'])}")
    else:
        facts.append("no kernel timing in this run")
    peaks = summary.get("trace_peak_memory") or []
    several = len({p["origin"] for p in peaks}) > 1  # name the process only where there are several
    device_peaks = [p for p in peaks if not str(p["device"]).upper().startswith("CPU")]
    host_peaks = [p for p in peaks if str(p["device"]).upper().startswith("CPU")]
    if device_peaks:
        facts.append(
            "peak allocated memory in the trace (memory events): "
            + ", ".join(
                f"{p['device']} {gib(p['bytes'])} GiB" + (f" ({p['origin']})" if several else "")
                for p in device_peaks
            )
        )
    if host_peaks:
        # torch.profiler counts host allocations only from its start: no peak of the process's memory
        facts.append(
            "host memory allocated while the profiler recorded, at most (memory events; memory allocated before it "
            "started, such as the weights, is not counted): "
            + ", ".join(size(p["bytes"]) + (f" ({p['origin']})" if several else "") for p in host_peaks)
        )
    section = Section(f"Run: {run['label']}", level=2, blocks=[Lines(facts)])
    if run["notes"]:
        section.blocks.append(Lines([f"note: {n}" for n in run["notes"]], kind="note"))
    return section


def top_kernels(run: ReportRun, top: int) -> Section | None:
    kernels = run["kernels"][:top]
    if not kernels:
        return None
    if run["summary"].get("cpu_operators"):
        return _top_operators(run, kernels)
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
        f"Top {len(kernels)} kernels by total time" + (" (all processes together)" if run.get("per_rank") else ""),
        blocks=[
            _time_bars(kernels, "total_ns", lambda k: f"{ms(k['total_ns'])} ms"),
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


def _time_bars(kernels: list[dict], measure: str, times: Callable[[dict], str]) -> Bars:
    """One bar per kernel (or operator) by `measure`; the tooltip gives its category, calls and `times`."""
    return Bars(
        [
            (
                display_name(k["name"]),
                (k[measure] or 0) / 1e6,
                f"{ms(k[measure])} ms ({pct(k['share'])})",
                k["category"],
                f"{k['name']}\n{k['category']}, {count(k['calls'])} calls, {times(k)}",
            )
            for k in kernels
        ],
        width=1000,
        max_label_chars=64,
    )


def _top_operators(run: ReportRun, kernels: list[dict]) -> Section:
    """CPU operators: by self (exclusive) time when the trace gives it, inclusive time beside it."""
    by_self = run["summary"].get("time_basis") == "self"
    measure = "self_ns" if by_self else "total_ns"
    what = "self time" if by_self else "inclusive time"
    return Section(
        f"Top {len(kernels)} CPU operators by {what}",
        blocks=[
            _time_bars(kernels, measure,
                       lambda k: f"self {ms(k['self_ns'])} ms, inclusive {ms(k['total_ns'])} ms"),
            Table(
                [
                    Column("#"),
                    Column("operator", "kernel"),
                    Column("category"),
                    Column("calls", "count"),
                    Column("self (ms)", "ms"),
                    Column("self share" if by_self else "share", "pct"),
                    Column("inclusive (ms)", "ms"),
                    Column("avg inclusive (us)", "us"),
                ],
                [
                    [i + 1, k["name"], k["category"], k["calls"], k["self_ns"], k["share"], k["total_ns"],
                     k["average_ns"]]
                    for i, k in enumerate(kernels)
                ],
                note="self = time in the operator itself, nested operators subtracted; inclusive = with nested "
                "operators (an aten::linear includes its aten::addmm)."
                + ("" if by_self else " This trace gives no self times: inclusive times overlap and over-count."),
            ),
        ],
    )


def categories(run: ReportRun, top: int) -> Section | None:
    if not run["kernels"] or run["summary"]["gpu_time_ns"] is None:
        return None
    rows = sorted((c for c in run["categories"] if c["kernels"]), key=lambda c: (-(c["total_ns"] or 0), c["category"]))
    return Section(
        ("Operator categories (self time)" if run["summary"].get("time_basis") == "self" else "Operator categories")
        if run["summary"].get("cpu_operators")
        else "Kernel categories",
        blocks=[
            Stacked(
                [(run["label"], _category_segments(run))], [f"{ms(run['summary']['gpu_time_ns'])} ms"], normalize=True
            ),
            Table(
                [
                    Column("category"),
                    Column("operators" if run["summary"].get("cpu_operators") else "kernels", "count"),
                    Column("calls", "count"),
                    Column("time (ms)", "ms"),
                    Column("share", "pct"),
                ],
                [[c["category"], c["kernels"], c["calls"], c["total_ns"], c["share"]] for c in rows],
                note="Inclusive times of nested operators: a category holds its operators' nested calls too, "
                "so categories over-count (the trace gives no self times)."
                if run["summary"].get("cpu_operators") and run["summary"].get("time_basis") != "self"
                else None,
            ),
        ],
    )


OUR_DEFINITIONS = (
    "Our definitions: busy = union of kernels, copies and memsets on the device; idle = span (first start to last "
    "end) - busy; compute = kernels other than communication and copy kernels; communication = collective and "
    "peer-to-peer kernels (NCCL/RCCL); copies = copy and fill kernels on the SMs plus the copy engines' copies and "
    "memsets; overlap = time compute and communication ran at once, its share of the communication time (the rest "
    "is exposed communication); sum = sum of kernel durations (overlapping kernels count in full)."
)
HTA_DEFINITIONS = (
    "Holistic Trace Analysis's definitions (HTA 0.5.0 temporal breakdown and comm/comp overlap): busy = union of all "
    "GPU events (kernels, copies, memsets), idle = span - busy as ours; communication = kernels named `nccl...Kernel`; "
    "memory = copies and memsets; compute = every other kernel, copy and fill kernels on the SMs included; "
    "non-compute = busy - compute; overlap = compute and communication at once, its share of the communication time. "
    "HTA itself also drops the GPU work launched in the last ProfilerStep (complete iterations only); these numbers "
    "cover the whole trace: compare per iteration."
)


def _identity(t: dict) -> list:
    return [t["origin"], DASH if t["rank"] is None else t["rank"], t["device"]]


def _ours_table(rows: list[dict], first: str = "process") -> Table:
    return Table(
        [
            Column(first),
            Column("rank"),
            Column("device"),
            Column("kernels", "count"),
            Column("copies", "count"),
            Column("span (ms)", "ms"),
            Column("busy (ms)", "ms"),
            Column("idle (ms)", "ms"),
            Column("idle", "pct"),
            Column("compute (ms)", "ms"),
            Column("communication (ms)", "ms"),
            Column("copies (ms)", "ms"),
            Column("overlap (ms)", "ms"),
            Column("communication overlapped", "pct"),
            Column("sum of kernel durations (ms)", "ms"),
        ],
        [
            _identity(t)
            + [
                t["dispatches"],
                t["copies"],
                t["span_ns"],
                t["busy_ns"],
                t["idle_ns"],
                t["idle_share"],
                t["compute_busy_ns"],
                t["comm_busy_ns"],
                t["copy_busy_ns"],
                t["overlap_ns"],
                t["overlap_share"],
                t["kernel_time_sum_ns"],
            ]
            for t in rows
        ],
    )


def _hta_table(rows: list[dict]) -> Table:
    return Table(
        [
            Column("process"),
            Column("rank"),
            Column("device"),
            Column("span (ms)", "ms"),
            Column("busy (ms)", "ms"),
            Column("idle (ms)", "ms"),
            Column("idle", "pct"),
            Column("compute (ms)", "ms"),
            Column("non-compute (ms)", "ms"),
            Column("communication (ms)", "ms"),
            Column("overlap (ms)", "ms"),
            Column("comm/comp overlap", "pct"),
        ],
        [
            _identity(t)
            + [
                t["span_ns"],
                t["busy_ns"],
                t["idle_ns"],
                t["idle_share"],
                t["hta"]["compute_busy_ns"],
                t["hta"]["non_compute_ns"],
                t["hta"]["comm_busy_ns"],
                t["hta"]["overlap_ns"],
                t["hta"]["overlap_share"],
            ]
            for t in rows
        ],
    )


def _differences(rows: list[dict]) -> list[str]:
    """Where the two definitions give different numbers (busy and idle never differ)."""
    out = []
    for t in rows:
        hta = t["hta"]
        where = f"{t['origin']} {t['device']}"
        if hta["compute_busy_ns"] != t["compute_busy_ns"]:
            out.append(
                f"{where}: compute {ms(t['compute_busy_ns'])} ms (ours) vs {ms(hta['compute_busy_ns'])} ms (HTA: "
                "copy and fill kernels count as compute"
                + (", communication named otherwise than nccl...Kernel too" if hta["comm_busy_ns"] != t["comm_busy_ns"]
                   else "")
                + ")"
            )
        if hta["overlap_ns"] != t["overlap_ns"]:
            out.append(
                f"{where}: overlap {ms(t['overlap_ns'])} ms, {pct(t['overlap_share'])} of communication (ours) vs "
                f"{ms(hta['overlap_ns'])} ms, {pct(hta['overlap_share'])} (HTA)"
            )
    return out


def timeline(run: ReportRun, top: int) -> Section | None:
    """Busy time per process and device (issue: the sum of durations double-counts overlapping kernels)."""
    rows = run.get("timeline") or []
    if not rows:
        return None
    definitions = run["summary"].get("definitions", "ours")
    blocks: list[Block] = []
    if definitions in ("ours", "both"):
        blocks += [Lines([OUR_DEFINITIONS], kind="meta"), _ours_table(rows)]
    if definitions in ("hta", "both"):
        blocks += [Lines([HTA_DEFINITIONS], kind="meta"), _hta_table(rows)]
    if definitions == "both":
        differ = _differences(rows)
        same = ["the two definitions give the same numbers for this run"]
        blocks.append(Lines(differ or same, kind="note" if differ else "item"))
    return Section("GPU busy time per process and device", blocks=blocks)


ITERATION_ROWS = 50  # iterations listed per device; the JSON has all of them
BY_HOST_WINDOW = (
    "Each iteration's window is its ProfilerStep span on the host clock; device intervals are cut at the window's "
    "edges. The GPU runs behind the host, so work launched in one step can fall in the next window: each window is "
    "the device's activity during that wall-clock time (this trace links no kernel to its launch)."
)
BY_LAUNCH = (
    "Each iteration owns the kernels its ProfilerStep launched (correlation ids), wherever they ran: its window on "
    "the device runs from the later of the step's start and the end of the work launched before it, to the later of "
    "the step's end and the end of the work it launched. Kernels without a launch link count where they start."
)


def iterations(run: ReportRun, top: int) -> Section | None:
    """Per marked iteration (ProfilerStep#N) and device: busy, idle and overlap inside the iteration's window."""
    rows = [t for t in run.get("timeline") or [] if t.get("iterations")]
    if not rows:
        return None
    steady = run["summary"].get("steady_state", False)
    blocks: list[Block] = [
        Lines(
            [
                (BY_LAUNCH if any(it.get("assigned_by") == "launch" for t in rows for it in t["iterations"])
                 else BY_HOST_WINDOW)
                + " Definitions as above (ours)."
                + (" Steady state: the first and the last iteration are left out of the summary." if steady else "")
            ],
            kind="meta",
        )
    ]
    summary_rows = []
    for t in rows:
        shown = t["iterations"][:ITERATION_ROWS]
        kept = set((t["iteration_summary"] or {}).get("iterations", [])) if steady else None
        table = Table(
            [
                Column("iteration"),
                Column("window (ms)", "ms"),
                Column("kernels", "count"),
                Column("busy (ms)", "ms"),
                Column("idle (ms)", "ms"),
                Column("idle", "pct"),
                Column("compute (ms)", "ms"),
                Column("communication (ms)", "ms"),
                Column("copies (ms)", "ms"),
                Column("overlap (ms)", "ms"),
                Column("communication overlapped", "pct"),
            ],
            [
                [
                    f"{r['iteration']}" + ("" if kept is None or r["iteration"] in kept else " (left out)"),
                    r["span_ns"],
                    r["dispatches"],
                    r["busy_ns"],
                    r["idle_ns"],
                    r["idle_share"],
                    r["compute_busy_ns"],
                    r["comm_busy_ns"],
                    r["copy_busy_ns"],
                    r["overlap_ns"],
                    r["overlap_share"],
                ]
                for r in shown
            ],
            note=f"{len(t['iterations']) - len(shown)} more iterations in the JSON report"
            if len(t["iterations"]) > len(shown)
            else None,
        )
        rank = "" if t["rank"] is None else f"rank {t['rank']}, "
        blocks += [Lines([f"{rank}`{t['origin']}`, device {t['device']}:"]), table]
        if t["iteration_summary"]:
            summary_rows.append((t, t["iteration_summary"]))
    if summary_rows:
        blocks += [
            Lines(["Over " + ("the steady-state iterations" if steady else "all marked iterations") + ":"]),
            Table(
                [
                    Column("process"),
                    Column("rank"),
                    Column("device"),
                    Column("iterations"),
                    Column("median iteration (ms)", "number"),
                    Column("median busy (ms)", "number"),
                    Column("busy (ms)", "ms"),
                    Column("idle", "pct"),
                    Column("communication overlapped", "pct"),
                ],
                [
                    _identity(t)
                    + [
                        _span_text(summary["iterations"]),
                        summary["iteration_ms_median"],
                        summary["busy_ms_median"],
                        summary["busy_ns"],
                        summary["idle_share"],
                        summary["overlap_share"],
                    ]
                    for t, summary in summary_rows
                ],
            ),
        ]
    return Section("Device time per iteration" + (" (steady state)" if steady else ""), blocks=blocks)


def _span_text(numbers: list[int]) -> str:
    if not numbers:
        return DASH
    if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 2:
        return f"{numbers[0]}-{numbers[-1]} ({len(numbers)})"
    return ", ".join(str(n) for n in numbers)


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


def training_phases(run: ReportRun, top: int) -> Section | None:
    """Forward / backward / optimizer host time of CPU operators: reports/phases.py."""
    return phases.section(dict(run), top)


RUN_SECTIONS: list[Callable[[ReportRun, int], Section | None]] = [
    run_header,
    top_kernels,
    rank_views.top_kernels,
    categories,
    training_phases,
    timeline,
    idle_view.section,
    launch_view.section,
    iterations,
    counters,
    memory_copies,
    collective_views.section,
    multi_node,
    efficiency_view.section,
]


def build(report: Report, top: int) -> list[Section]:
    sections = [s for make in REPORT_SECTIONS if (s := make(report, top)) is not None]
    for run in report["runs"]:
        sections += [s for make in RUN_SECTIONS if (s := make(run, top)) is not None]
    return sections
