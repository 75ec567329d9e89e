"""`madengine-rocprof run`: profiled, containerized runs of models from models.json (see docs/runner.md)."""
from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run models under a profiling tool chain, in a container or locally",
        description="Select models by name, tag, 'all' or name:key=value; deep-merge the additional context; run each "
                    "model under its tool chain (last listed tool outermost, as madengine does); write one run "
                    "directory per model and a madengine perf.csv.")
    p.add_argument("--tags", nargs="+", action="extend", required=True, metavar="TAG",
                   help="model names, tags, 'all', or name:key=value (appends --key value to the model's args)")
    p.add_argument("--additional-context-file", metavar="FILE",
                   help="madengine additional context JSON file, or a shipped config's name (madengine-rocprof paths)")
    p.add_argument("--additional-context", metavar="JSON", help="JSON merged deeply over the file")
    p.add_argument("--runner", choices=("auto", "docker", "local"), default="auto",
                   help="auto: docker when a Docker engine answers, else local (default)")
    p.add_argument("--output-dir", default="runs", metavar="DIR", help="results folder (default runs/)")
    p.add_argument("--timeout", type=float, metavar="S", help="workload time limit in seconds "
                   "(default: context timeout, else the model card's, else 7200)")
    p.add_argument("--hook-timeout", type=float, default=600.0, metavar="S",
                   help="time limit for each pre/post script (default 600)")
    p.add_argument("--repo", default=".", metavar="DIR",
                   help="MAD-style model repository: models.json, docker/, scripts/ (default: the current directory)")
    p.add_argument("--models", default="models.json", metavar="FILE", help="models file, relative to --repo (default models.json)")
    p.add_argument("--first-tool-outermost", action="store_true",
                   help="reverse madengine's chaining order: the FIRST listed tool becomes the outermost")
    p.add_argument("--quiet", action="store_true", help="do not echo workload output (it is always in logs/)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from madengine_rocprof import resources
    from madengine_rocprof.errors import UserError
    from madengine_rocprof.runner.lifecycle import RunOptions, run_models

    for name in ("timeout", "hook_timeout"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UserError(f"must be a positive number of seconds, got {value:g}", where=f"--{name.replace('_', '-')}")
    context_file = resources.path_or_shipped(args.additional_context_file) if args.additional_context_file else None
    return run_models(RunOptions(
        tags=args.tags, context_file=context_file, context_json=args.additional_context,
        runner=args.runner, output_dir=Path(args.output_dir), timeout=args.timeout, hook_timeout=args.hook_timeout,
        models_file=Path(args.repo) / args.models, first_outermost=args.first_tool_outermost, echo=not args.quiet))
