"""`madengine-rocprof schema [--write | --check]`: the JSON Schema of additional-context files."""
from __future__ import annotations

import sys
from pathlib import Path

from madengine_rocprof import inputs, resources
from madengine_rocprof.errors import UserError
from madengine_rocprof.models.schema import render_schema
from madengine_rocprof.reports.output import OutputSet

SCHEMA_PATH = resources.SCHEMA


def register(subparsers) -> None:
    p = subparsers.add_parser("schema", help="print the JSON Schema of profiling configs (additional-context files)",
                              description="Print the JSON Schema generated from the models. --write regenerates "
                                          f"{SCHEMA_PATH.relative_to(resources.ROOT)}; "
                                          "--check exits 1 when it is stale.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write profiling-configs/schema.json")
    mode.add_argument("--check", action="store_true", help="exit 1 when profiling-configs/schema.json is stale")
    p.add_argument("--path", type=Path, default=SCHEMA_PATH, help="schema file for --write/--check")
    p.set_defaults(func=run)


def run(args) -> int:
    text = render_schema()
    if args.write:
        outputs = OutputSet([])
        outputs.claim("--path", args.path)
        with outputs.files() as files:
            files.write_text(args.path, text)
        print(f"wrote {args.path}")
        return 0
    if args.check:
        if args.path.exists() and not args.path.is_file():  # a folder or a pipe is not a stale schema: bad input
            raise UserError("is not a regular file", file=str(args.path), where="--path",
                            fix="give the schema file (profiling-configs/schema.json)")
        current = inputs.read_text(args.path, "schema") if args.path.is_file() else None
        if current != text:
            print(f"error: {args.path} is stale (fix: madengine-rocprof schema --write)", file=sys.stderr)
            return 1
        print(f"{args.path} is up to date")
        return 0
    sys.stdout.write(text)
    return 0
