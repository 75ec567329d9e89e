"""`madengine-rocprof export-tools OUTPUT`: write a madengine scripts/common/tools.json for our tools."""
from __future__ import annotations

import json
from pathlib import Path

from madengine_rocprof.models.tool import DEFAULT_COUNTERS_DIR, DEFAULT_WRAPPER
from madengine_rocprof.registry import get_tool, list_tools
from madengine_rocprof.reports.output import OutputSet


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export-tools",
        help="write a madengine tools.json using our wrapper and counter files",
        description='Write {"tools": {NAME: {pre_scripts, cmd, env_vars, post_scripts}}} in madengine\'s '
        "scripts/common/tools.json format. The file is written atomically.",
    )
    p.add_argument("output", type=Path, help="file to write, e.g. scripts/common/tools.json")
    p.add_argument("--tools", help="comma-separated tool names (default: all)")
    p.add_argument("--wrapper", default=DEFAULT_WRAPPER, help=f"command prefix (default: {DEFAULT_WRAPPER})")
    p.add_argument(
        "--counters-dir",
        default=DEFAULT_COUNTERS_DIR,
        help=f"where counter files are at run time (default: {DEFAULT_COUNTERS_DIR})",
    )
    p.add_argument("--wrapper-dir", type=Path, help="also place rocprof_wrapper.sh and its self-contained zipapp here "
                                                    "(madengine: scripts/common/tools)")
    p.set_defaults(func=run)


def build_tools_json(names: list[str] | None, wrapper: str, counters_dir: str) -> dict:
    tools = [get_tool(n) for n in names] if names else list_tools()
    return {"tools": {t.name: t.madengine_entry(wrapper, counters_dir) for t in tools}}


def run(args) -> int:
    outputs = OutputSet([])
    outputs.claim("OUTPUT", args.output)
    outputs.claim("--wrapper-dir", args.wrapper_dir, folder=True)
    names = [n.strip() for n in args.tools.split(",") if n.strip()] if args.tools else None
    data = build_tools_json(names, args.wrapper, args.counters_dir)
    placed: list[str] = []
    with outputs.files() as files:  # tools.json and the wrapper appear together: neither names a missing other
        if args.wrapper_dir:
            from madengine_rocprof.wrapper import bundle

            placed = bundle.install_into(str(args.wrapper_dir), files)
        files.write_text(args.output, json.dumps(data, indent=2, allow_nan=False) + "\n")
    if placed:
        print("wrote " + ", ".join(placed))
    print(f"wrote {len(data['tools'])} tools to {args.output}")
    return 0
