"""`madengine-rocprof tools list | show NAME | register FILE`."""
from __future__ import annotations

import json

from madengine_rocprof.models.tool import DEFAULT_COUNTERS_DIR, DEFAULT_WRAPPER
from madengine_rocprof.registry import CORE_PROFILES, get_tool, list_tools, register_tool
from madengine_rocprof.registry.store import is_builtin_tool


def register(subparsers) -> None:
    p = subparsers.add_parser("tools", help="list, show and register profiling tools")
    sub = p.add_subparsers(dest="tools_command", metavar="ACTION", required=True)
    lst = sub.add_parser("list", help="all tools: built-in and user-registered")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.set_defaults(func=run_list)
    show = sub.add_parser("show", help="one tool's definition and its madengine tools.json entry")
    show.add_argument("name")
    show.add_argument("--wrapper", default=DEFAULT_WRAPPER)
    show.add_argument("--counters-dir", default=DEFAULT_COUNTERS_DIR)
    show.set_defaults(func=run_show)
    reg = sub.add_parser(
        "register", help="validate a tool JSON file and add it to your registry ($MADENGINE_ROCPROF_HOME)"
    )
    reg.add_argument("file")
    reg.set_defaults(func=run_register)


def run_list(args) -> int:
    tools = list_tools()
    if args.json:
        print(json.dumps([t.model_dump() for t in tools], indent=2, allow_nan=False))
        return 0
    width = max(len(t.name) for t in tools)
    print(f"{'NAME':<{width}}  {'KIND':<9} {'OVERHEAD':<8} {'VENDORS':<11} DESCRIPTION")
    for t in tools:
        kind = "core" if t.name in CORE_PROFILES else ("built-in" if is_builtin_tool(t.name) else "user")
        print(f"{t.name:<{width}}  {kind:<9} {t.overhead:<8} {','.join(t.vendors):<11} {t.description}")
    return 0


def run_show(args) -> int:
    tool = get_tool(args.name)
    print(json.dumps({"definition": tool.model_dump(),
                      "madengine_entry": tool.madengine_entry(args.wrapper, args.counters_dir)},
                     indent=2, allow_nan=False))
    return 0


def run_register(args) -> int:
    target = register_tool(args.file)
    print(f"registered tool from {args.file} as {target}")
    return 0
