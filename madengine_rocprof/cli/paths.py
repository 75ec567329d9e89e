"""`madengine-rocprof paths [--config NAME]`: where the shipped configs, counter files and wrapper are.

The configs are ordinary madengine additional-context files, so a user of an unmodified madengine passes them
directly: `madengine run --additional-context-file "$(madengine-rocprof paths --config rocprofv3_lightweight)"`.
"""

from __future__ import annotations

from madengine_rocprof import resources
from madengine_rocprof.errors import UserError
from madengine_rocprof.models._common import closest


def register(subparsers) -> None:
    p = subparsers.add_parser("paths", help="where the shipped configs, counter files, schema and wrapper are")
    p.add_argument(
        "--config", metavar="NAME", help="print only the path of this shipped config (e.g. rocprofv3_lightweight)"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    configs = resources.shipped_configs()
    if args.config:
        found = resources.shipped_file(args.config)
        if found is None or found.parent != resources.CONFIGS_DIR:
            names = [p.stem for p in configs]
            guess = closest(args.config.removesuffix(".json"), names)
            raise UserError(
                f"no shipped config named {args.config!r}",
                where="--config",
                fix=f"did you mean {guess}?" if guess else "shipped: " + " ".join(names),
            )
        print(found)
        return 0
    print(f"resources ({resources.SOURCE}): {resources.ROOT}")
    print(f"profiling configs: {resources.CONFIGS_DIR}")
    for path in configs:
        print(f"  {path}")
    print(f"config schema:     {resources.SCHEMA}")
    print(f"counter files:     {resources.COUNTERS_DIR}")
    for path in sorted(resources.COUNTERS_DIR.glob("*.txt")):
        print(f"  {path}")
    print(f"wrapper script:    {resources.WRAPPER_SCRIPT}")
    print(f"model repository:  {resources.ROOT} (models.json, docker/, scripts/: run --repo {resources.ROOT})")
    return 0
