"""`madengine-rocprof wrap [options] -- APP ARGS`: run APP under the detected profiler (see docs/wrapper.md)."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    # '+' as the only prefix: argparse then passes every token (rocprofv3 options, `--`, the app) through verbatim.
    p = subparsers.add_parser("wrap", prefix_chars="+", add_help=False,
                              help="run an app under rocprofv3 / rocprof / ncu / nsys / the embedded tracer",
                              description="madengine-rocprof wrap [wrapper and rocprofv3 options] -- APP [ARGS...]")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args) -> int:
    from madengine_rocprof.wrapper.cli import main

    return main(list(args.argv), prog="madengine-rocprof wrap")
