"""`madengine-rocprof compare BASE NEW [--gate]`: step times and kernel durations of two sets of repeated runs,
tested run against run; with --gate, exit 0 when passed (the step time's interval rules out a slowdown beyond the
threshold), 1 on a regression, 2 when inconclusive (too noisy, or one run on a side), on bad input and on any crash
(see docs/reports.md, 'Regression gate')."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from madengine_rocprof.cli.kernels import add_rules_option
from madengine_rocprof.cli.options import COUNT_OR_ZERO, NAME_WIDTH, PERCENT, number_option
from madengine_rocprof.errors import UserError

EXIT_REGRESSION = 1  # the only way to exit 1: a judged regression, never a crash


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="statistical comparison of two runs (or sets of repeated runs); --gate fails on a regression",
        description="Compare per-step times (workload_result.json step_times_ms) and per-kernel durations of NEW "
        "against BASE, run against run: each run gives one value per metric, the between-run spread gives the "
        "confidence interval of the speedup BASE/NEW (above 1: NEW is faster). The step time is the primary "
        "endpoint; kernels are secondary, Holm-corrected among themselves. BASE and NEW are run directories, or "
        "directories holding several repeated runs; with one run on a side nothing can be judged (repeat the runs: "
        "3 or more a side).",
    )
    p.add_argument("base", type=Path, metavar="BASE", help="baseline run directory (or a directory of repeated runs)")
    p.add_argument("new", type=Path, metavar="NEW", help="run directory to judge (or a directory of repeated runs)")
    p.add_argument(
        "--gate",
        action="store_true",
        help="exit 0 only when the step time's interval rules out a slowdown beyond --threshold (passed), 1 on a "
        "regression, 2 when inconclusive (too noisy or one run on a side)",
    )
    p.add_argument(
        "--threshold",
        type=number_option(0, 1000, low_open=False),
        default=5.0,
        metavar="PCT",
        help="a regression: NEW slower than BASE by more than PCT percent (default 5)",
    )
    p.add_argument(
        "--confidence", type=number_option(50, 99.999), default=95.0, metavar="PCT",
        help="confidence level of the intervals (default 95)",
    )
    p.add_argument(
        "--statistic",
        choices=("mean", "median"),
        default="median",
        help="each run's value: the median (default; robust to steps slowed by other load) or the mean of its steps "
        "or dispatches",
    )
    p.add_argument(
        "--top",
        type=COUNT_OR_ZERO,
        default=10,
        metavar="N",
        help="kernels compared: the base's top N by time (default 10; 0: step time only)",
    )
    p.add_argument(
        "--min-share",
        type=PERCENT,
        default=1.0,
        metavar="PCT",
        help="... with at least PCT percent of the base's kernel time (default 1)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="write the comparison as JSON")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="write the Markdown summary to FILE as well")
    p.add_argument("--name-width", type=NAME_WIDTH, default=60, metavar="N",
                   help="shorten kernel names to N characters")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the Markdown")
    add_rules_option(p)
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace):
    from madengine_rocprof.insights.compare import Settings

    return Settings(  # each value was checked by its option's type (cli/options.py)
        statistic=args.statistic,
        confidence=args.confidence / 100,
        threshold=args.threshold / 100,
        top=args.top,
        min_share=args.min_share / 100,
    )


def _value(row: dict) -> tuple[str, str]:
    from madengine_rocprof.reports.formatting import DASH

    def fmt(v, n, runs):
        if v is None:
            return DASH
        shown = f"{v:,.3f} ms" if row["unit"] == "ms" else f"{v / 1e3:,.2f} us"
        return f"{shown} (n={n:,}" + (f", {runs} runs)" if runs > 1 else ")")

    return fmt(row["base"], row["n_base"], row["runs_base"]), fmt(row["new"], row["n_new"], row["runs_new"])


def render_markdown(result: dict, name_width: int = 60) -> str:
    from madengine_rocprof.reports.formatting import DASH, display_name, shorten
    from madengine_rocprof.reports.markdown import escape, table

    s = result["settings"]
    conf = f"{s['confidence'] * 100:g}%"
    alpha = f"{(1 - s['confidence']) * 100:.3g}%"
    limit = 1 / (1 + s["threshold"])
    out = [
        "# Performance comparison",
        "",
        f"- base: `{result['base']['path']}` ({len(result['base']['runs'])} run(s))",
        f"- new: `{result['new']['path']}` ({len(result['new']['runs'])} run(s))",
        f"- {s['statistic']} per run; speedup = base / new, as in `report`: above 1x is faster, below 1x slower; "
        f"each run is one sample: {conf} CI from each side's between-run spread (Welch t test on log values)",
        f"- step time is the primary endpoint (tested alone); kernels are secondary (Holm among themselves, "
        f"family-wise error {alpha}); gate: `passed` when the CI's low end is above {limit:.3f}x (not slower by "
        f"more than {s['threshold'] * 100:g}%), `regression` when the slowdown is shown beyond it (the CI's high end "
        f"below {limit:.3f}x; kernels: Holm), else `inconclusive`",
        "",
    ]
    rows = []
    for m in result["metrics"]:
        base, new = _value(m)
        name = "step time" if m["kind"] == "step" else shorten(display_name(m["name"]), name_width)
        ci = DASH if m["ci_low"] is None else f"[{m['ci_low']:.3f}x, {m['ci_high']:.3f}x]"
        speedup = DASH if m["speedup"] is None else f"{m['speedup']:.3f}x"
        p = DASH if m["p_adjusted"] is None else f"{m['p_adjusted']:.3g}"
        gate = {"regression": "REGRESSION", None: DASH}.get(m["gate"], m["gate"])
        rows.append([name, m.get("category", DASH), base, new, speedup, ci, p, m["verdict"], gate])
    out += table(["metric", "category", "base", "new", "speedup", f"{conf} CI", "p (Holm: kernels)", "verdict",
                  "gate"], rows)
    gate = result["gate"]
    on = gate["primary"] or f"{gate['tested']} kernel(s)"
    if gate["verdict"] == "regression":
        out.append(f"**Gate: FAILED** ({len(gate['regressions'])} regression(s): slower by more than "
                   f"{s['threshold'] * 100:g}% at {conf} confidence)")
    elif gate["verdict"] == "passed":
        out.append(f"**Gate: passed** ({on}: the {conf} CI rules out a slowdown beyond {s['threshold'] * 100:g}%)")
    elif not gate["tested"]:
        out.append("**Gate: inconclusive** (one run on a side: its between-run spread is unknown; repeat the runs)")
    else:
        out.append(f"**Gate: inconclusive** ({on}: {too_noisy(gate)})")
    if gate["inconclusive"]:
        out.append("")
        out.append(
            f"{len(gate['inconclusive'])} metric(s) inconclusive: one run on a side, so run-to-run noise cannot "
            "be told from a change. Repeat the runs (2 or more a side: a directory of repeated runs)."
        )
    return escape("\n".join(out) + "\n")


def too_noisy(gate: dict) -> str:
    more = gate["more_runs"]
    if more is None:
        return ("too noisy: even 1,000 more runs a side would not decide at this spread and change (near the "
                "threshold, or the runs too scattered); repeat on a quieter machine")
    return f"too noisy: {more} more run(s) a side would decide (if the observed spread and change hold)"


def run(args: argparse.Namespace) -> int:
    # an unexpected exception reaches the CLI's top-level handler: exit 2 with the bug mark, never 1 (the verdict)
    from madengine_rocprof.insights.compare import compare_sides, load_side
    from madengine_rocprof.reports import categories
    from madengine_rocprof.reports.output import OutputSet

    settings = _settings(args)
    outputs = OutputSet([args.base, args.new, categories.rules_path(args.kernel_rules)])  # before anything is read
    outputs.claim("--json", args.json)
    outputs.claim("--markdown", args.markdown)
    categories.configure(args.kernel_rules)
    result = compare_sides(load_side(args.base, "base"), load_side(args.new, "new"), settings)
    text = render_markdown(result, args.name_width)
    if not args.quiet:
        sys.stdout.write(text)
    if args.gate and not result["gate"]["tested"]:
        raise UserError(  # before writing: a gate that cannot judge must not leave a report that reads as passed
            "the gate cannot judge: no metric has repeated runs on both sides (one run on a side leaves its "
            "run-to-run noise unknown)",
            where="BASE/NEW",
            fix="repeat the runs: give a directory of 2 or more repeated runs as BASE and as NEW",
        )
    if args.gate and result["gate"]["verdict"] == "inconclusive":
        raise UserError(  # exit 2: "no significant change" is not "no regression"
            f"the gate is inconclusive: {too_noisy(result['gate'])}",
            where=result["gate"]["primary"] or "kernels",
            fix="repeat the runs (a directory of repeated runs per side), or run on a quieter machine",
        )
    with outputs.files() as files:  # both or neither
        if args.json:
            files.write_text(args.json, json.dumps(result, indent=1, allow_nan=False) + "\n")
        if args.markdown:
            files.write_text(args.markdown, text)
    return EXIT_REGRESSION if args.gate and result["gate"]["verdict"] == "regression" else 0
