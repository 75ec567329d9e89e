"""`madengine-rocprof report RUN...`: hotspots per run and a comparison across runs.

Prints Markdown; `--html`, `--json`, `--markdown` and `--perfetto` write files (atomically, after
everything was read and checked, so a bad input leaves nothing half-written).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from madengine_rocprof.cli.kernels import add_rules_option
from madengine_rocprof.cli.options import COUNT, NAME_WIDTH, number_option
from madengine_rocprof.reports import build_report, categories, html_page, load_runs, markdown, perfetto
from madengine_rocprof.reports.analyses import efficiency
from madengine_rocprof.reports.analysis import DEFINITIONS
from madengine_rocprof.reports.output import OutputSet, write_json_to


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="hotspots, categories, counters and a run-vs-run comparison from profiler output",
        description="Read profiler output below each RUN directory (run directories, rocprofv3/rocprof output "
        "trees, the wrapper's OUT) and report hotspots per run and a comparison against a baseline.",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", type=Path, help="directory holding profiler output")
    parser.add_argument("--baseline", metavar="RUN", help="run to compare against (label or path; default: the first)")
    parser.add_argument(
        "--top", type=COUNT, default=10, metavar="N", help="kernels listed per run, in every output (default 10)"
    )
    parser.add_argument(
        "--definitions",
        choices=DEFINITIONS,
        default="ours",
        help="busy/idle/overlap definitions shown: ours (default), hta (Holistic Trace Analysis's: copy kernels count "
        "as compute) or both, with the differences listed; the JSON always has both",
    )
    parser.add_argument(
        "--steady-state",
        action="store_true",
        help="per-iteration summaries leave out the first and the last marked iteration (ProfilerStep#N)",
    )
    parser.add_argument("--html", type=Path, metavar="FILE", help="write a self-contained HTML page with charts")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the full report as JSON")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write the Markdown to FILE as well")
    parser.add_argument("--perfetto", type=Path, metavar="DIR",
                        help="write DIR/<run>.perfetto.json per run (open in ui.perfetto.dev)")
    parser.add_argument(
        "--name-width", type=NAME_WIDTH, default=70, metavar="N", help="shorten kernel names to N characters in tables"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="do not print the Markdown")
    parser.add_argument("--peak-tflops", type=number_option(0, 1e7, low_open=True), metavar="TFLOP/s",
                        help="one compute roof for every dtype, for the efficiency table (default: the datasheet's "
                        "per-dtype peaks of the trace's GPU; needed for a GPU without a datasheet entry)")
    parser.add_argument("--peak-bandwidth", type=number_option(0, 1e8, low_open=True), metavar="GB/s",
                        help="device memory bandwidth for the efficiency table (default: datasheet)")
    parser.add_argument("--roofline-target", type=number_option(0, 1, low_open=True), default=0.8, metavar="FRACTION",
                        help="the fraction of its roofline each operator is assumed to reach when ranking the time a "
                        "fix would save (default 0.8)")
    add_rules_option(parser)
    parser.set_defaults(func=run)


# Control bytes (ESC sequences, carriage returns, bells) in kernel names or labels must not drive the terminal.
printable = markdown.show_controls


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "run"


def run(args: argparse.Namespace) -> int:
    # before anything is read: an output never replaces an input
    outputs = OutputSet([*args.runs, categories.rules_path(args.kernel_rules)])
    for option in ("--json", "--html", "--markdown"):
        outputs.claim(option, getattr(args, option[2:]))
    outputs.claim("--perfetto", args.perfetto, folder=True)
    categories.configure(args.kernel_rules)
    efficiency.configure(args.peak_tflops, args.peak_bandwidth, args.roofline_target)
    runs = load_runs(args.runs)
    report = build_report(runs, args.baseline, steady_state=args.steady_state, definitions=args.definitions)
    text = markdown.render(report, top=args.top, name_width=args.name_width)
    page = html_page.render(report, top=args.top) if args.html else None
    traces = []
    if args.perfetto:
        for data in runs:
            if not perfetto.has_timeline(data):
                print(printable(f"perfetto: {data.label} has no per-dispatch trace, skipped"), file=sys.stderr)
                continue
            target = args.perfetto / f"{_slug(data.label)}.perfetto.json"
            outputs.claim("--perfetto", target)  # two runs whose labels give one file name are refused too
            traces.append((data, target))
    written = []
    with outputs.files() as files:  # all outputs appear together, or none does
        if args.json:
            write_json_to(files, args.json, report)
        if page is not None:
            files.write_text(args.html, page)
        if args.markdown:
            files.write_text(args.markdown, text)
        for data, target in traces:
            events = perfetto.write_trace(data, target, files)
            written.append(f"perfetto: wrote {target} ({events:,} kernel events)")
    for line in written:
        print(printable(line), file=sys.stderr)
    if not args.quiet:
        sys.stdout.write(printable(text))
    return 0
