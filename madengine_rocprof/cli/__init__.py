"""`madengine-rocprof` command line: a thin dispatcher.

Each subcommand lives in its own module under this package and exposes
`register(subparsers)`, which adds its parser and sets `func(args) -> int`.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from madengine_rocprof import __version__
from madengine_rocprof.errors import UserError

# Module names under madengine_rocprof.cli, in the order `--help` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "validate",
    "tools",
    "counters",
    "schema",
    "export_tools",
    "report",
    "compare",
    "kernels",
    "run",
    "escalate",
    "wrap",
    "doctor",
    "install",
    "paths",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="madengine-rocprof",
        description="One-command GPU profiling of AI workloads, in madengine's formats.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args, extra = parser.parse_known_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "accepts_extra", False):
        args.extra = extra
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
