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
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import build_report, categories, html_page, load_runs, markdown, perfetto
from madengine_rocprof.reports.analyses import efficiency
from madengine_rocprof.reports.analysis import DEFINITIONS
from madengine_rocprof.reports.output import write_json, write_text


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
        "--top", type=int, default=10, metavar="N", help="kernels listed per run, in every output (default 10)"
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
        "--name-width", type=int, default=70, metavar="N", help="shorten kernel names to N characters in tables"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="do not print the Markdown")
    parser.add_argument("--peak-tflops", type=float, metavar="TFLOP/s",
                        help="one compute roof for every dtype, for the efficiency table (default: the datasheet's "
                        "per-dtype peaks of the trace's GPU; needed for a GPU without a datasheet entry)")
    parser.add_argument("--peak-bandwidth", type=float, metavar="GB/s",
                        help="device memory bandwidth for the efficiency table (default: datasheet)")
    parser.add_argument("--roofline-target", type=float, default=0.8, metavar="FRACTION",
                        help="the fraction of its roofline each operator is assumed to reach when ranking the time a "
                        "fix would save (default 0.8)")
    add_rules_option(parser)
    parser.set_defaults(func=run)


# Control bytes (ESC sequences, carriage returns, bells) in kernel names or labels must not drive the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text for the terminal: every control character except newline and tab shown as an escape (\\x1b)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "run"


def _positive(value: float | None, option: str, limit: float) -> float | None:
    """A positive, finite number up to `limit` (NaN and Infinity fail the comparison too), or None if not given."""
    if value is not None and not 0 < value <= limit:
        raise UserError(f"must be a positive number up to {limit:g}, got {value:g}", where=option,
                        fix="give the datasheet figure, e.g. --peak-tflops 989.4 --peak-bandwidth 3350"
                        if option != "--roofline-target" else "give a fraction in (0, 1], e.g. 0.8")
    return value


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UserError("--top must be at least 1", where="--top")
    categories.configure(args.kernel_rules)
    efficiency.configure(_positive(args.peak_tflops, "--peak-tflops", 1e7), _positive(
        args.peak_bandwidth, "--peak-bandwidth", 1e8), _positive(args.roofline_target, "--roofline-target", 1.0) or 0.8)
    runs = load_runs(args.runs)
    report = build_report(runs, args.baseline, steady_state=args.steady_state, definitions=args.definitions)
    text = markdown.render(report, top=args.top, name_width=args.name_width)
    page = html_page.render(report, top=args.top) if args.html else None
    if args.json:
        write_json(args.json, report)
    if page is not None:
        write_text(args.html, page)
    if args.markdown:
        write_text(args.markdown, text)
    if args.perfetto:
        for data in runs:
            if not perfetto.has_timeline(data):
                print(printable(f"perfetto: {data.label} has no per-dispatch trace, skipped"), file=sys.stderr)
                continue
            target = args.perfetto / f"{_slug(data.label)}.perfetto.json"
            events = perfetto.write_trace(data, target)
            print(printable(f"perfetto: wrote {target} ({events:,} kernel events)"), file=sys.stderr)
    if not args.quiet:
        sys.stdout.write(printable(text))
    return 0
