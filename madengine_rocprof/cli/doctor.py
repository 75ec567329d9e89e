"""`madengine-rocprof doctor`: which profilers are installed, which one a run would use, and why."""
from __future__ import annotations

import json
import sys

from madengine_rocprof.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="show the detected profilers and which one is chosen, and why")
    p.add_argument(
        "--profiler", help="override: auto|rocprofv3|rocprof|ncu|nsys|embedded (env MADENGINE_ROCPROF_PROFILER)"
    )
    p.add_argument(
        "--profile", help="profile to choose for, e.g. lightweight or compute_bound (env MADENGINE_ROCPROF_PROFILE)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def tracer_probes(env) -> list[str]:
    """What the embedded tracer would do in a traced process of this Python: its backend and its API recorder.
    Asked here, not in the wrapper: the wrapper stays standard-library only and imports nothing from the tracer."""
    from madengine_rocprof.tracer import api_recorder, native_rows, select
    from madengine_rocprof.wrapper import detect

    return [select.describe(env, detect.nvidia_present(env)), api_recorder.describe(env), native_rows.describe(env)]


def report_probe(env) -> str:
    """Which reader `report` uses for a PyTorch profiler trace (reports/kineto_native)."""
    from madengine_rocprof.reports import kineto_native

    return kineto_native.describe(env)


def tracer_settings_error(env) -> str | None:
    """The wrapper's refusal of the user's MADENGINE_ROCPROF_TRACER_* values, or None when they are fine."""
    from madengine_rocprof.wrapper import tracer_settings as settings

    try:
        settings.check(env)
    except UserError as err:
        return str(err)
    return None


def run(args) -> int:
    import os

    from madengine_rocprof.tracer import select
    from madengine_rocprof.wrapper import detect, planner

    env = os.environ
    profile = args.profile or env.get(planner.ENV_PROFILE)
    core = planner.PROFILE_ALIASES.get(profile, profile) if profile else "lightweight"
    kind = planner.PROFILE_KINDS.get(core, "trace")
    found = detect.report(env)
    probes = tracer_probes(env)
    for row in found:
        if row["name"] == "embedded":
            row["probes"] = [*row.get("probes", []), *probes]
    try:
        chosen, error, code = detect.choose(args.profiler, kind, env).to_json(), None, 0
    except UserError as err:  # 127: no profiler fits; 2: a bad --profiler or MADENGINE_ROCPROF_PROFILER
        chosen, error, code = None, str(err), err.exit_code
    if chosen and chosen["name"] == "embedded":
        chosen["probes"] = [*chosen.get("probes", []), *probes]
        chosen["why"] += f"; {probes[0]}"
    torch = select.torch_version()
    settings_error = tracer_settings_error(env)
    report_reader = report_probe(env)
    if args.json:
        print(json.dumps({"profile": profile, "profile_kind": kind, "found": found, "chosen": chosen, "error": error,
                          "torch": torch, "python": sys.executable, "tracer_settings_error": settings_error,
                          "report_kineto_reader": report_reader}, indent=2, allow_nan=False))
        return code
    for row in found:
        if row["found"]:
            extra = f" {row.get('version') or ''}".rstrip()
            print(f"  {row['name']:<10} found   {row.get('path') or '(built in)'}{extra}")
            for probe in row.get("probes") or []:
                print(f"  {'':<10}         {probe}")
        else:
            print(f"  {row['name']:<10} missing")
    override = args.profiler or env.get(detect.ENV_PROFILER)
    print(f"profile: {profile or '(none; inferred per run from the options)'} -> needs {kind}")
    print(f"override: {override or 'none (auto)'}")
    print(f"torch: {torch or 'not installed'} (in {sys.executable})")
    print(report_reader)
    if chosen:
        print(f"chosen: {chosen['name']} -- {chosen['why']}")
        if chosen["name"] == "embedded" and torch is None:
            print("warning: " + select.NO_TORCH.format(python=sys.executable), file=sys.stderr)
        if chosen["name"] == "embedded" and settings_error:
            print(f"warning: the wrapper will refuse these tracer settings:\n{settings_error}", file=sys.stderr)
        return 0
    print(f"error: {error}", file=sys.stderr)
    return code
