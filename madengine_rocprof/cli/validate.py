"""`madengine-rocprof validate FILE...`: check configs, tool files and counter files (kind detected by content)."""
from __future__ import annotations

import sys
from pathlib import Path

from madengine_rocprof import inputs, resources
from madengine_rocprof.errors import UserError, UserErrors
from madengine_rocprof.models._common import parse_json_object, read_text_file
from madengine_rocprof.models.context import validate_context
from madengine_rocprof.registry import resolve_tools
from madengine_rocprof.registry.store import check_tool_references, tool_from_data
from madengine_rocprof.runner.planning import check_context, unrunnable_here

TOOL_ONLY_KEYS = {
    "profiler",
    "trace",
    "counters",
    "pc_sampling",
    "output_formats",
    "overhead",
    "vendors",
    "core_profile",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate",
        help="validate profiling configs, tool files and counter files",
        description="Each FILE is detected by content: a JSON object with 'name' and tool fields is a "
        "tool definition, any other JSON object an additional-context config, and "
        "'pmc:' text a counter file. Exit 0 when all are valid.",
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a path, or a shipped config/counter file's name (rocprofv3_lightweight, compute_bound.txt)",
    )
    p.add_argument(
        "--arch", action="append", metavar="gfxNNN", help="architecture(s) for counter files (default: the file's own)"
    )
    p.add_argument("--counter-defs", metavar="YAML", help="counter_defs.yaml for counter files")
    p.set_defaults(func=run)


def _looks_like_json(stripped: str) -> bool:
    """JSON of any top level (null, a number, a string: refused as "not an object" with a fix), or JSON that starts
    with a comment (refused by the JSON reader with its line): not a counter file, whose lines are `pmc:` and `#`."""
    if stripped.startswith(("//", "/*")):
        return True
    if stripped[0] in '{["-0123456789':
        return True
    word = stripped.split(None, 1)[0].rstrip(",")
    return word in ("null", "true", "false")


def detect_kind(path: str, text: str) -> str:
    """'context', 'tool', 'counters' or 'schema' (a JSON Schema such as profiling-configs/schema.json)."""
    stripped = text.lstrip()
    if path.endswith(".txt") or (stripped and not _looks_like_json(stripped)):
        return "counters"
    try:
        data = inputs.loads(text, path)
    except UserError:
        return "context"  # the JSON reader then reports line and column, or the nesting
    if isinstance(data, dict) and "json-schema.org" in str(data.get("$schema", "")):
        return "schema"
    # a top-level "name" is no context key: a tool file, checked as `tools register` will check it (a file with
    # only a name validated as a context, then failed to register)
    if isinstance(data, dict) and "tools" not in data and ("name" in data or TOOL_ONLY_KEYS & data.keys()):
        return "tool"
    return "context"


def validate_file(path: str, archs: list[str] | None = None, counter_defs: str | None = None) -> str:
    """Validate one file; returns a one-line summary (warnings on extra lines), raises UserError(s)."""
    text = read_text_file(path)
    kind = detect_kind(path, text)
    if kind == "counters":
        from madengine_rocprof.cli.counters import check_file
        from madengine_rocprof.registry import load_catalog, load_counter_file
        from madengine_rocprof.registry.counter_check import check_known_somewhere

        profile, lines_of = load_counter_file(path)
        if not (archs or profile.architectures):
            catalog = load_catalog(counter_defs)
            everywhere = check_known_somewhere(profile, catalog, lines_of, path)
            on_all = " ".join(everywhere) or "no single architecture"
            return (f"OK {path}: counter file, {len(profile.passes)} pass(es); every counter exists on some "
                    f"architecture in {catalog.source} (all of them on: {on_all}); "
                    "pass --arch gfxNNN to check one architecture and its pass limits")
        return f"OK {path}: counter file\n  " + "\n  ".join(check_file(Path(path), archs, counter_defs))
    if kind == "schema":
        from madengine_rocprof.models.schema import render_schema

        if text != render_schema():
            raise UserError("JSON Schema differs from the one the models generate", file=path,
                            fix="madengine-rocprof schema --write")
        return f"OK {path}: JSON Schema, up to date with the models"
    data = parse_json_object(text, path)
    if kind == "tool":
        tool = tool_from_data(data, path, text)
        check_tool_references(tool, path)
        return f"OK {path}: tool '{tool.name}' ({tool.profiler}, overhead {tool.overhead})"
    ctx, warnings = validate_context(data, path, text)
    check_context(ctx, path)  # the checks `run` makes before it starts
    resolved = resolve_tools(ctx, source=path)
    problems = []
    for i, r in enumerate(resolved):
        if ctx.gpu_vendor and ctx.gpu_vendor not in r.definition.vendors:
            problems.append(
                UserError(
                    f"tool '{r.name}' does not support {ctx.gpu_vendor} (supports {', '.join(r.definition.vendors)})",
                    file=path,
                    where=f"tools[{i}].name",
                    fix="remove it or pick a tool for this vendor",
                )
            )
        if r.cmd_overridden and r.cmd.strip() and not r.cmd.rstrip().endswith("--"):
            warnings.append(f"{path}: tools[{i}].cmd does not end with '--': rocprofv3 would read the model command "
                            "as an option value (add ' --' at the end)")
    if problems:
        raise UserErrors(problems)
    import os

    # about this machine, not the file (the config may be meant for a container or a cluster): a note on stderr
    for err in unrunnable_here([r.name for r in resolved if not r.cmd_overridden], dict(os.environ)):
        print(f"note: {path}: {err.what}: `run --runner local` refuses it here; {err.fix}", file=sys.stderr)
    summary = f"OK {path}: config, tools: {', '.join(r.name for r in resolved) or '(none)'}"
    return "\n".join([summary] + [f"  warning: {w}" for w in warnings])


def run(args) -> int:
    failed = 0
    for path in args.files:
        try:
            print(validate_file(resources.path_or_shipped(path), args.arch, args.counter_defs))
        except UserError as err:
            failed += 1
            print(f"error: {err}", file=sys.stderr)
    if failed:
        print(f"{failed} of {len(args.files)} file(s) invalid", file=sys.stderr)
        return 2
    return 0
