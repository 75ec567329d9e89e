"""Render the report dict as one self-contained HTML page: inline CSS, inline SVG charts, no scripts, no network."""
from __future__ import annotations

from html import escape

from madengine_rocprof.reports import multinode
from madengine_rocprof.reports.categories import CATEGORIES
from madengine_rocprof.reports.markdown import category_table, shown_counters
from madengine_rocprof.reports.formatting import DASH, count, display_name, gib, ms, number, pct, shorten, times, us
from madengine_rocprof.reports.svg import CATEGORY_COLORS, hbars, stacked_hbars

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1100px;padding:0 16px;color:#1f2328}
h1{font-size:1.6em;margin-bottom:4px}h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:36px}
h3{margin-top:24px;font-size:1.05em}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f6f8fa}td.l,th.l{text-align:left}td.name{text-align:left;font-family:ui-monospace,Menlo,Consolas,monospace;max-width:520px;word-break:break-all}
tr.base td{background:#fff8c5}.meta{color:#57606a;font-size:13px;margin:2px 0}.note{color:#9a6700;font-size:13px}
.chart{max-width:100%;height:auto;display:block;margin:8px 0}.swatch{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}
"""


def _td(value, cls="") -> str:
    return f'<td class="{cls}">{escape(str(value))}</td>' if cls else f"<td>{escape(str(value))}</td>"


def _table(header: list[str], rows: list[list], left: int = 1, name_col: int | None = None, row_classes=None) -> str:
    head = "".join(f'<th class="l">{escape(h)}</th>' if i < left or i == name_col else f"<th>{escape(h)}</th>"
                   for i, h in enumerate(header))
    body = []
    for n, row in enumerate(rows):
        cells = []
        for i, value in enumerate(row):
            if i == name_col:
                full, short = value
                cells.append(f'<td class="name" title="{escape(full)}">{escape(short)}</td>')
            else:
                cells.append(_td(value, "l" if i < left else ""))
        cls = f' class="{row_classes[n]}"' if row_classes and row_classes[n] else ""
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _category_segments(run: dict) -> list[tuple[str, float, str]]:
    by_name = {c["category"]: c["total_ns"] for c in run["categories"]}
    return [(c, by_name.get(c, 0) / 1e6, CATEGORY_COLORS[c]) for c in CATEGORIES]


def render(report: dict, top: int = 15, name_width: int = 240) -> str:
    runs = report["runs"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>Profiling report: {escape(', '.join(r['label'] for r in runs))}</title><style>{CSS}</style></head><body>",
        "<h1>Profiling report</h1>",
        f"<p class='meta'>{len(runs)} run(s), baseline <b>{escape(report['baseline'])}</b>, generated {escape(report['generated_at'])} "
        "by madengine-rocprof report. Kernel time is the sum of kernel durations on the GPU (overlapping kernels count twice).</p>",
    ]
    parts.append(_comparison(report))
    for n, run in enumerate(runs):
        parts.append(_run(run, n, top, name_width))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _comparison(report: dict) -> str:
    rows = report["comparison"]
    runs = report["runs"]
    out = ["<h2 id='comparison'>Comparison</h2>"]
    out.append(_table(
        ["run", "dispatches", "unique kernels", "GPU time (ms)", "GPU-time speedup", "tokens/s", "throughput speedup",
         "peak memory (GiB)", "memory vs baseline", "status"],
        [[r["label"], count(r["dispatches"]), count(r["unique_kernels"]),
          ms(r["gpu_time_ns"]) + (" (CPU ops)" if r["cpu_operators"] else ""), times(r["gpu_time_speedup"]),
          number(r["tokens_per_second"]), times(r["throughput_speedup"]), gib(r["peak_memory_allocated_bytes"]),
          times(r["memory_vs_baseline"]), r["status"] or DASH] for r in rows],
        row_classes=["base" if r["baseline"] else "" for r in rows],
    ))
    out.append("<p class='meta'>GPU-time speedup = baseline GPU time / run GPU time; throughput speedup = run tokens/s / "
               "baseline tokens/s; above 1x is better than the baseline.</p>")
    timed = [r for r in runs if r["summary"]["has_kernel_data"] and r["summary"]["gpu_time_ns"] is not None]
    if timed:
        out.append("<h3>GPU kernel time per run, by category</h3>")
        out.append(stacked_hbars(
            [(r["label"], _category_segments(r)) for r in timed],
            [f"{ms(r['summary']['gpu_time_ns'])} ms" for r in timed],
        ))
        if len(timed) > 1:
            out.append(_table(*category_table(timed)))
    with_tps = [r for r in rows if r["tokens_per_second"] is not None]
    if with_tps:
        out.append("<h3>Workload throughput (tokens/s)</h3>")
        out.append(hbars([
            (r["label"], r["tokens_per_second"],
             f"{number(r['tokens_per_second'])}" + (f" ({times(r['throughput_speedup'])})" if r["throughput_speedup"] else ""),
             "#0072B2" if not r["baseline"] else "#56B4E9", f"{r['label']}: {number(r['tokens_per_second'])} tokens/s")
            for r in with_tps
        ], max_label_chars=36))
    return "\n".join(out)


def _run(run: dict, n: int, top: int, name_width: int) -> str:
    summary = run["summary"]
    out = [f"<h2 id='run-{n}'>Run: {escape(run['label'])}</h2>", f"<p class='meta'>directory <code>{escape(run['path'])}</code></p>"]
    if run["profiler"]:
        p = run["profiler"]
        name = " ".join(str(v) for v in (p.get("name") or DASH, p.get("version")) if v)
        out.append(f"<p class='meta'>profiler {escape(name)}"
                   + (f", outcome {escape(str(run['outcome']))}" if run["outcome"] else "") + "</p>")
    if run["workload"]:
        w = run["workload"]
        out.append(
            f"<p class='meta'>workload {escape(str(w['model'] or DASH))} {escape(str(w['version'] or ''))} on "
            f"{escape(str(w['device'] or DASH))}: <b>{number(w['tokens_per_second'])} tokens/s</b>, median step "
            f"{number(w['step_time_ms_median'])} ms, peak memory {gib(w['peak_memory_allocated_bytes'])} GiB, MFU "
            f"{pct(w['mfu'])}, status {escape(str(w['status'] or DASH))}</p>")
    if summary["has_kernel_data"]:
        out.append(
            f"<p><b>{count(summary['dispatches'])}</b> kernel dispatches, <b>{count(summary['unique_kernels'])}</b> unique "
            f"kernels, <b>{ms(summary['gpu_time_ns'])} ms</b> GPU kernel time; sources: "
            + ", ".join(f"<code>{escape(s['file'])}</code> ({escape(s['format'])})" for s in run["sources"])
            + "; kernel times from " + escape(", ".join(summary["kernel_time_from"])) + "</p>")
    else:
        out.append("<p>No kernel timing in this run.</p>")
    for note in run["notes"]:
        out.append(f"<p class='note'>Note: {escape(note)}</p>")
    kernels = run["kernels"][:top]
    if kernels and summary["gpu_time_ns"] is None:  # counter rows without timestamps: calls only, no bars
        out.append(f"<h3>Top {len(kernels)} kernels by calls</h3>")
        out.append(_table(["#", "kernel", "category", "calls"],
                          [[i + 1, (k["name"], shorten(k["name"], name_width)), k["category"], count(k["calls"])]
                           for i, k in enumerate(kernels)], left=1, name_col=1))
    elif kernels:
        out.append(f"<h3>Top {len(kernels)} kernels by total time</h3>")
        out.append(hbars([
            (display_name(k["name"]), k["total_ns"] / 1e6, f"{ms(k['total_ns'])} ms ({pct(k['share'])})",
             CATEGORY_COLORS[k["category"]], f"{k['name']}\n{k['category']}, {count(k['calls'])} calls, {ms(k['total_ns'])} ms")
            for k in kernels
        ], width=1000, max_label_chars=64))
        legend = sorted({k["category"] for k in kernels}, key=CATEGORIES.index)
        out.append("<p class='meta'>" + " ".join(
            f"<span class='swatch' style='background:{CATEGORY_COLORS[c]}'></span>{escape(c)}&nbsp;&nbsp;" for c in legend) + "</p>")
        out.append(_table(
            ["#", "kernel", "category", "calls", "total (ms)", "avg (us)", "min (us)", "max (us)", "share"],
            [[i + 1, (k["name"], shorten(k["name"], name_width)), k["category"], count(k["calls"]), ms(k["total_ns"]),
              us(k["average_ns"]), us(k["min_ns"]), us(k["max_ns"]), pct(k["share"])] for i, k in enumerate(kernels)],
            left=1, name_col=1,
        ))
        out.append("<h3>Kernel categories</h3>")
        out.append(stacked_hbars([(run["label"], _category_segments(run))], [f"{ms(summary['gpu_time_ns'])} ms"],
                                 normalize=True))
        out.append(_table(
            ["category", "kernels", "calls", "time (ms)", "share"],
            [[c["category"], c["kernels"], count(c["calls"]), ms(c["total_ns"]), pct(c["share"])]
             for c in sorted(run["categories"], key=lambda c: -c["total_ns"]) if c["kernels"]],
        ))
    if run["counters"]:
        out.append("<h3>Counters (per dispatch)</h3>")
        rows, more = shown_counters(run)
        out.append(_table(["counter", "dispatches", "mean", "min", "max", "total"],
                          [[c["name"], count(c["dispatches"]), number(c["mean"]), number(c["min"]), number(c["max"]),
                            number(c["total"])] for c in rows]))
        if more:
            out.append(f"<p class='meta'>{escape(more)}</p>")
        if run["derived_metrics"]:
            out.append(_table(["derived metric", "value", "unit", "formula"],
                              [[d["name"], number(d["value"]), d["unit"], d["formula"]] for d in run["derived_metrics"]]))
        if run["kernel_counters"]:
            names = sorted({c for values in run["kernel_counters"].values() for c in values})
            out.append(_table(["kernel"] + names,
                              [[(k, shorten(display_name(k), 60))] + [number(v.get(c)) for c in names] for k, v in run["kernel_counters"].items()],
                              left=1, name_col=0))
    if run["memory_copies"]:
        out.append("<h3>Memory copies</h3>")
        out.append(_table(["direction", "copies", "time (ms)"],
                          [[c["direction"], count(c["calls"]), ms(c["total_ns"])] for c in run["memory_copies"]]))
    for title, header, rows in multinode.tables(run.get("multi_node")):
        out.append(f"<h3>{escape(title)}</h3>" + _table(header, rows))
    return "\n".join(out)
