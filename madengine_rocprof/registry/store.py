"""Built-in and user-registered tools and counter profiles, with closest-match errors.

User files live under $MADENGINE_ROCPROF_HOME (default ~/.config/madengine-rocprof):
    tools/<name>.json      a ToolDefinition as JSON
    counters/<name>.txt    a rocprofv3 text counter file
They are validated by the same models as the built-ins, on registration and on every load.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from madengine_rocprof import resources
from madengine_rocprof.atomic import atomic_write
from madengine_rocprof.errors import UserError
from madengine_rocprof.home import user_home
from madengine_rocprof.models._common import parse_json_object, read_text_file, unknown_name, validation_errors
from madengine_rocprof.models.counters import CounterProfile, parse_counter_text
from madengine_rocprof.models.tool import ToolDefinition
from madengine_rocprof.registry.builtin import builtin_tool_data

PACKAGE_ROOT = resources.ROOT  # checkout or installed copy: resources.py decides
BUILTIN_COUNTERS_DIR = resources.COUNTERS_DIR




# ---- tools -----------------------------------------------------------------------------------------------

def tool_from_data(data: dict, source: str | None = None, text: str | None = None) -> ToolDefinition:
    try:
        return ToolDefinition.model_validate(data)
    except ValidationError as err:
        raise validation_errors(err, source, {(): list(ToolDefinition.model_fields),
                                              ("pc_sampling",): ["method", "unit", "interval"]}, text) from None


def load_tool_file(path: str | os.PathLike[str]) -> ToolDefinition:
    text = read_text_file(path, "tool file")
    return tool_from_data(parse_json_object(text, str(path)), str(path), text)


def check_tool_references(tool: ToolDefinition, source: str | None = None) -> None:
    """The counter profile a tool names must exist (built-in or registered), and the wrapper must be able to run
    the tool's profile (`run` would fail otherwise, with the reason only in run.log)."""
    if tool.counters:
        try:
            counter_profile_path(tool.counters)
        except UserError as err:
            err.file, err.where = source, "counters"
            raise
    problem = tool.profile_problem()
    if problem:
        raise UserError(problem[0], file=source, where="core_profile", fix=problem[1])


def _builtin_tools() -> dict[str, ToolDefinition]:
    return {name: tool_from_data(data, f"built-in tool {name}") for name, data in builtin_tool_data().items()}


def _user_tools() -> dict[str, ToolDefinition]:
    folder = user_home() / "tools"
    tools = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        tool = load_tool_file(path)
        tools[tool.name] = tool
    return tools


def all_tools() -> dict[str, ToolDefinition]:
    """name -> definition; user tools cannot shadow built-ins (registration refuses that)."""
    return {**_user_tools(), **_builtin_tools()}


def list_tools() -> list[ToolDefinition]:
    return sorted(all_tools().values(), key=lambda t: t.name)


def is_builtin_tool(name: str) -> bool:
    return name in builtin_tool_data()


def get_tool(name: str) -> ToolDefinition:
    tools = all_tools()
    if name not in tools:
        raise unknown_name("tool", name, tools, "madengine-rocprof tools list")
    return tools[name]


def register_tool(path: str | os.PathLike[str]) -> Path:
    """Validate a tool JSON file and store it under the user home. Returns the stored path."""
    tool = load_tool_file(path)
    check_tool_references(tool, str(path))
    if is_builtin_tool(tool.name):
        raise UserError(f"'{tool.name}' is a built-in tool name", file=str(path), where="name",
                        fix="pick another name; override a built-in per run with a context tools entry (cmd/env_vars)")
    target = user_home() / "tools" / f"{tool.name}.json"
    data = tool.model_dump(exclude_defaults=True) | {"name": tool.name}
    atomic_write(target, json.dumps(data, indent=2, allow_nan=False) + "\n")
    return target


# ---- counter profiles -----------------------------------------------------------------------------------

def load_counter_file(path: str | os.PathLike[str], name: str | None = None) -> tuple[CounterProfile, dict[str, int]]:
    """Parse a text counter file strictly; the profile is named after the file unless `name` is given."""
    p = Path(path)
    if p.suffix.lower() != ".txt" and not p.is_dir() and p.exists():
        raise UserError("counter files must end in .txt (rocprofv3 picks the format by extension)", file=str(p),
                        fix=f"rename it to {p.stem}.txt")
    text = read_text_file(p, "counter file")
    return parse_counter_text(text, name or p.stem, str(p))


def _counter_files() -> dict[str, Path]:
    files = {}
    for folder in (user_home() / "counters", BUILTIN_COUNTERS_DIR):
        for path in sorted(folder.glob("*.txt")) if folder.is_dir() else []:
            files[path.stem] = path  # built-ins last: they win
    return files


def counter_profile_path(name: str) -> Path:
    files = _counter_files()
    if name not in files:
        raise unknown_name("counter profile", name, files, "madengine-rocprof counters list")
    return files[name]


def get_counter_profile(name: str) -> CounterProfile:
    return load_counter_file(counter_profile_path(name))[0]


def list_counter_profiles() -> list[CounterProfile]:
    return [load_counter_file(p)[0] for _, p in sorted(_counter_files().items())]


def register_counter_profile(path: str | os.PathLike[str], archs: list[str] | None = None, catalog=None) -> Path:
    """Validate a counter file (syntax, and every claimed or given arch against the counter definitions); store it."""
    from madengine_rocprof.registry.counter_check import check_counters
    from madengine_rocprof.registry.counter_defs import load_catalog

    profile, lines_of = load_counter_file(path)
    if (BUILTIN_COUNTERS_DIR / f"{profile.name}.txt").is_file():
        raise UserError(f"'{profile.name}' is a built-in counter profile name", file=str(path), fix="rename the file")
    catalog = catalog or load_catalog()
    for arch in archs or profile.architectures:
        check_counters(profile, arch, catalog, lines_of, str(path))
    target = user_home() / "counters" / f"{profile.name}.txt"
    atomic_write(target, read_text_file(path))
    return target
