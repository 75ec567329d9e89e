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


def run(args) -> int:
    import os

    from madengine_rocprof.wrapper import detect, planner

    env = os.environ
    profile = args.profile or env.get(planner.ENV_PROFILE)
    core = planner.PROFILE_ALIASES.get(profile, profile) if profile else "lightweight"
    kind = planner.PROFILE_KINDS.get(core, "trace")
    found = detect.report(env)
    try:
        chosen, error = detect.choose(args.profiler, kind, env).to_json(), None
    except UserError as err:
        chosen, error = None, str(err)
    if args.json:
        print(json.dumps({"profile": profile, "profile_kind": kind, "found": found, "chosen": chosen, "error": error},
                         indent=2, allow_nan=False))
        return 0 if chosen else 127
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
    if chosen:
        print(f"chosen: {chosen['name']} -- {chosen['why']}")
        return 0
    print(f"error: {error}", file=sys.stderr)
    return 127
