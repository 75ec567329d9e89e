"""`madengine-rocprof escalate RUN`: the top kernels of a lightweight run get a second, filtered counter pass of the
same workload; one report joins both (docs/reports.md, 'Escalation'). `run ... --escalate` does the same after run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from madengine_rocprof.cli.kernels import add_rules_option
from madengine_rocprof.cli.options import COUNT, COUNT_OR_ZERO, NAME_WIDTH, PEAK, SECONDS, number_option
from madengine_rocprof.errors import UserError


def add_selection_options(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """Options shared by `escalate` and `run --escalate` (prefix `escalate-` on run)."""
    p.add_argument(
        f"--{prefix}top",
        type=COUNT,
        default=None,
        metavar="N",
        help=f"escalate the top N kernels by kernel time (default 5, or all above --{prefix}min-share)",
    )
    p.add_argument(
        f"--{prefix}min-share",
        type=number_option(0, 100, low_open=True),
        default=None,
        metavar="PCT",
        help=f"escalate every kernel with at least PCT percent of the kernel time (capped by --{prefix}top if given)",
    )
    p.add_argument(
        f"--{prefix}launches-per-kernel",
        type=COUNT,
        default=10,
        metavar="N",
        help="ncu: about N launches per chosen kernel (ncu's --launch-count scaled by the rarest one; default 10)",
    )
    p.add_argument(
        f"--{prefix}launch-skip",
        type=COUNT_OR_ZERO,
        default=0,
        metavar="N",
        help="ncu: skip the first N matching launches (warm-up; default 0)",
    )
    p.add_argument(
        "--peak-bandwidth", type=PEAK, metavar="GB/s", help="device memory bandwidth peak (default: datasheet)"
    )
    p.add_argument("--peak-tflops", type=PEAK, metavar="TFLOP/s", help="device FP32 peak (default: datasheet)")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "escalate",
        help="counters for the top kernels of a lightweight run: a second, filtered pass and a joined report",
        description="Pick the top kernels of RUN (a run directory from `madengine-rocprof run`), re-run the same model "
        "under the counter profile fitting each kernel's category with the profiler's kernel filter, and "
        "report per kernel its time, calls and derived metrics against the device's peak.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN", help="run directory of the first (lightweight) pass")
    add_selection_options(p)
    p.add_argument(
        "--repo",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="MAD-style model repository of the second pass (default: the current directory), as for `run`",
    )
    p.add_argument(
        "--models",
        type=Path,
        default=Path("models.json"),
        metavar="FILE",
        help="models file, relative to --repo (default models.json)",
    )
    p.add_argument(
        "--runner", choices=("auto", "docker", "local"), help="runner of the second pass (default: the first pass's)"
    )
    p.add_argument("--timeout", type=SECONDS, metavar="S", help="second-pass workload time limit in seconds")
    p.add_argument("--dry-run", action="store_true", help="print the plan (kernels, profiles, filters) and run nothing")
    p.add_argument("--join-only", action="store_true", help="do not run: join the passes recorded in RUN.escalate/")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the joined report as JSON")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="write the Markdown to FILE as well")
    p.add_argument("--name-width", type=NAME_WIDTH, default=60, metavar="N",
                   help="shorten kernel names to N characters")
    p.add_argument("--quiet", action="store_true", help="do not echo workload output or print the Markdown")
    add_rules_option(p)
    p.set_defaults(func=run)


def check_selection(top: int | None, min_share: float | None) -> tuple:
    """(top, share as a fraction): top 5 when neither is given. The values were checked by the options' types."""
    return (5 if top is None and min_share is None else top), (None if min_share is None else min_share / 100)


def render_markdown(report: dict, name_width: int = 60) -> str:
    from madengine_rocprof.reports.formatting import DASH, display_name, ms, pct, shorten
    from madengine_rocprof.reports.markdown import escape, table

    peak = report["peak"]
    out = [
        "# Escalation: trace, then counters for the kernels that matter",
        "",
        f"- first pass: `{report['first_pass']}` ({ms(report['kernel_time_ns'])} ms of kernel time)",
    ]
    for p in report["passes"]:
        out.append(
            f"- second pass, {p['profile']}: `{p.get('run_dir') or 'not run'}`"
            + (f" (exit {p['exit_code']})" if p.get("exit_code") else "")
            + f"; kernel filter `{shorten(p['kernel_include_regex'], 80)}`"
        )
    out.append(
        f"- device: {report['device'] or DASH}; peaks: "
        + (
            f"{peak['bandwidth_gbs']:,.0f} GB/s, {peak['fp32_tflops']:g} TFLOP/s FP32 "
            f"({peak['source']}, {peak['device']})"
            if peak
            else "unknown (give --peak-bandwidth / --peak-tflops)"
        )
    )
    out.append("")
    rows = []
    for k in report["kernels"]:
        d = k.get("derived") or {}
        parts = []
        if "bandwidth_gbs" in d:
            parts.append(
                f"{d['bandwidth_gbs']:,.1f} GB/s"
                + (f" ({d['bandwidth_pct_of_peak']:.1f}% of peak)" if "bandwidth_pct_of_peak" in d else "")
            )
        if "fp32_tflops" in d:
            parts.append(
                f"FP32 {d['fp32_tflops']:,.3f} TFLOP/s"
                + (f" ({d['fp32_pct_of_peak']:.1f}% of peak)" if "fp32_pct_of_peak" in d else "")
            )
        if "tensor_tflops" in d:
            parts.append(
                f"tensor cores {d['tensor_tflops']:,.1f} TFLOP/s, {d['tensor_flops']:,.0f} FLOPs/launch"
                + (f" ({d['tensor_pct_of_peak']:.1f}% of {d['tensor_peak']})" if "tensor_pct_of_peak" in d else "")
            )
        for key, label in (
            ("ncu_sm_throughput_pct", "SM"),
            ("ncu_dram_throughput_pct", "DRAM"),
            ("ncu_tensor_pipe_pct", "tensor"),
            ("occupancy_pct", "occupancy"),
        ):
            if key in d:
                parts.append(f"{label} {d[key]:.1f}%")
        if "valu_per_wave" in d:
            parts.append(f"VALU/wave {d['valu_per_wave']:,.1f}")
        rows.append(
            [
                k["rank"],
                shorten(display_name(k["name"]), name_width),
                k["category"],
                k["role"],
                f"{k['calls']:,}",
                ms(k["total_ns"]),
                pct(k["share"]),
                k["profile"] or DASH,
                "; ".join(parts) or DASH,
                d.get("bound") or k["reason"] or DASH,
            ]
        )
    out += table(
        ["#", "kernel", "category", "role", "calls", "total (ms)", "share", "profile", "derived metrics", "bound"], rows
    )
    notes = [
        f"- #{k['rank']}: counters of `{shorten(display_name(j['name']), name_width)}` "
        f"({j['dispatches']} dispatches) joined by "
        + ("function name only (template arguments spelled differently)" if j["how"] == "function" else "key")
        for k in report["kernels"]
        for j in k.get("joined_from", [])
        if j["how"] != "exact"
    ]
    notes += [
        f"- not joined: `{shorten(display_name(n['name']), name_width)}` ({n['dispatches']} dispatches): {n['reason']}"
        for n in report.get("not_joined", [])
    ]
    if notes:
        out += ["", "Second-pass names as the profiler spelled them:", ""] + notes
    return escape("\n".join(out) + "\n")


def escalate(
    run_dir: Path,
    *,
    top,
    min_share,
    launches,
    skip,
    models: Path,
    runner,
    timeout,
    echo: bool,
    dry_run: bool = False,
    join_only: bool = False,
    peak_bandwidth=None,
    peak_tflops=None,
) -> tuple[dict, str]:
    """Plan, run (unless dry/join-only) and join; returns (report or plan, Markdown)."""
    from madengine_rocprof.insights import escalate as esc
    from madengine_rocprof.reports.analysis import merge_kernels
    from madengine_rocprof.reports.discover import load_run

    if join_only:
        plan_file = esc.escalation_dir(run_dir) / esc.PLAN_FILE
        if not plan_file.is_file():
            raise UserError(
                f"no {esc.PLAN_FILE} in {plan_file.parent}", fix="run `madengine-rocprof escalate RUN` first"
            )
        plan = esc.read_plan(plan_file)
    else:
        first = load_run(run_dir, run_dir.name)
        targets = esc.select_targets(first, top, min_share)
        calls = {name: stats.calls for name, stats in merge_kernels(first).items()}
        plan = esc.plan_second_pass(run_dir, targets, calls, launches, skip, esc.device_name(first))
        if dry_run:
            return plan, json.dumps(plan, indent=1, allow_nan=False) + "\n"
        plan = esc.run_second_pass(
            plan,
            models_file=models,
            runner=runner,
            timeout=timeout,
            echo=echo,
        )
    report = esc.build_report(run_dir, plan, peak_bandwidth, peak_tflops)
    from madengine_rocprof.reports.output import write_text

    write_text(esc.escalation_dir(run_dir) / esc.REPORT_FILE, json.dumps(report, indent=1, allow_nan=False) + "\n")
    return report, render_markdown(report)


def run(args: argparse.Namespace) -> int:
    from madengine_rocprof.reports import categories
    from madengine_rocprof.reports.output import OutputSet

    # before anything is read or run: an output never replaces an input
    outputs = OutputSet([args.run_dir, args.repo / args.models, categories.rules_path(args.kernel_rules)])
    outputs.claim("--json", args.json)
    outputs.claim("--markdown", args.markdown)
    categories.configure(args.kernel_rules)
    top, share = check_selection(args.top, args.min_share)
    result, text = escalate(
        args.run_dir,
        top=top,
        min_share=share,
        launches=args.launches_per_kernel,
        skip=args.launch_skip,
        models=args.repo / args.models,
        runner=args.runner,
        timeout=args.timeout,
        echo=not args.quiet,
        dry_run=args.dry_run,
        join_only=args.join_only,
        peak_bandwidth=args.peak_bandwidth,
        peak_tflops=args.peak_tflops,
    )
    if args.dry_run:
        sys.stdout.write(text)
        return 0
    text = render_markdown(result, args.name_width)
    with outputs.files() as files:  # both or neither
        if args.json:
            files.write_text(args.json, json.dumps(result, indent=1, allow_nan=False) + "\n")
        if args.markdown:
            files.write_text(args.markdown, text)
    if not args.quiet:
        sys.stdout.write(text)
    return 0 if all(not p.get("exit_code") for p in result["passes"]) else 1
