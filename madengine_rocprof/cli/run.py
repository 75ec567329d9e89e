"""`madengine-rocprof run`: profiled, containerized runs of models from models.json (see docs/runner.md)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from madengine_rocprof.cli.options import SECONDS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run models under a profiling tool chain, in a container or locally",
        description="Select models by name, tag, 'all' or name:key=value; deep-merge the additional context; run each "
                    "model under its tool chain (last listed tool outermost, as madengine does); write one run "
                    "directory per model and a madengine perf.csv.")
    p.add_argument("--tags", nargs="+", action="extend", required=True, metavar="TAG",
                   help="model names, tags, 'all', or name:key=value (appends --KEY VALUE to the model's args)")
    p.add_argument("--additional-context-file", metavar="FILE",
                   help="madengine additional context JSON file, or a shipped config's name (madengine-rocprof paths)")
    p.add_argument("--additional-context", metavar="JSON", help="JSON merged deeply over the file")
    p.add_argument("--runner", choices=("auto", "docker", "local", "slurm"), default="auto",
                   help="auto: docker when a Docker engine answers, else local (default); slurm: one SLURM job per "
                        "model on the nodes of the context's slurm block (sbatch from this login node)")
    p.add_argument("--output-dir", default="runs", metavar="DIR", help="results folder (default runs/)")
    p.add_argument("--timeout", type=SECONDS, metavar="S", help="workload time limit in seconds "
                   "(default: context timeout, else the model card's, else 7200)")
    p.add_argument("--hook-timeout", type=SECONDS, default=600.0, metavar="S",
                   help="time limit for each pre/post script (default 600)")
    p.add_argument("--repo", default=".", metavar="DIR",
                   help="MAD-style model repository: models.json, docker/, scripts/ (default: the current directory)")
    p.add_argument("--models", default="models.json", metavar="FILE",
                   help="models file, relative to --repo (default models.json)")
    p.add_argument("--first-tool-outermost", action="store_true",
                   help="reverse madengine's chaining order: the FIRST listed tool becomes the outermost")
    p.add_argument("--quiet", action="store_true", help="do not echo workload output (it is always in logs/)")
    p.add_argument("--escalate", action="store_true",
                   help="then re-run each model once per counter profile its top kernels need, counters only for them "
                        "(see `escalate --help`); the joined report goes to <run>.escalate/")
    from madengine_rocprof.cli.escalate import add_selection_options

    add_selection_options(p, prefix="escalate-")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from madengine_rocprof import resources
    from madengine_rocprof.runner.lifecycle import RunOptions, run_models

    selection = None
    if args.escalate:
        from madengine_rocprof.cli.escalate import check_selection

        selection = check_selection(args.escalate_top, args.escalate_min_share)
    started = time.time()
    context_file = resources.path_or_shipped(args.additional_context_file) if args.additional_context_file else None
    code = run_models(RunOptions(
        tags=args.tags, context_file=context_file, context_json=args.additional_context,
        runner=args.runner, output_dir=Path(args.output_dir), timeout=args.timeout, hook_timeout=args.hook_timeout,
        models_file=Path(args.repo) / args.models, first_outermost=args.first_tool_outermost, echo=not args.quiet,
        require_profilers=True))
    if selection is None:
        return code
    return max(code, _escalate_new_runs(args, Path(args.output_dir), started, selection))


def _escalate_new_runs(args: argparse.Namespace, out: Path, started: float, selection: tuple) -> int:
    """Escalate every run directory this invocation wrote (run.json newer than its start) that succeeded."""
    import json
    import sys

    from madengine_rocprof.cli.escalate import escalate
    from madengine_rocprof.wrapper.contracts import RunJson

    code = 0
    for run_json in sorted(out.glob("*/run.json")):
        if run_json.stat().st_mtime < started:
            continue
        info: RunJson = json.loads(run_json.read_text(encoding="utf-8"))  # written by this invocation's runner
        if info["status"] != "SUCCESS":
            print(f"[escalate] {run_json.parent.name}: first pass failed, not escalated", file=sys.stderr)
            code = 1
            continue
        print(f"[escalate] {run_json.parent.name}: second pass", flush=True)
        report, text = escalate(run_json.parent, top=selection[0], min_share=selection[1],
                                launches=args.escalate_launches_per_kernel, skip=args.escalate_launch_skip,
                                models=Path(args.repo) / args.models, runner=args.runner, timeout=args.timeout,
                                echo=not args.quiet, peak_bandwidth=args.peak_bandwidth, peak_tflops=args.peak_tflops)
        sys.stdout.write(text)
        code = max(code, 0 if all(not p.get("exit_code") for p in report["passes"]) else 1)
    return code
