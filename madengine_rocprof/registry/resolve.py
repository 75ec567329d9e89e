"""Resolve a context's `tools` entries against the registry the way madengine does: an entry's `cmd` replaces the
registry command entirely; its env_vars merge key by key over the registry's (entry wins)."""
from __future__ import annotations

from dataclasses import dataclass, field

from madengine_rocprof.models._common import unknown_name
from madengine_rocprof.models.context import AdditionalContext
from madengine_rocprof.models.tool import DEFAULT_COUNTERS_DIR, DEFAULT_WRAPPER, ScriptRef, ToolDefinition


@dataclass
class ResolvedTool:
    name: str
    definition: ToolDefinition
    cmd: str  # "" for samplers; otherwise ends with "--"
    env_vars: dict[str, str]
    pre_scripts: list[ScriptRef] = field(default_factory=list)
    post_scripts: list[ScriptRef] = field(default_factory=list)
    cmd_overridden: bool = False  # the context replaced the registry cmd


def resolve_tools(context: AdditionalContext, *, wrapper: str = DEFAULT_WRAPPER,
                  counters_dir: str = DEFAULT_COUNTERS_DIR, source: str | None = None) -> list[ResolvedTool]:
    """One ResolvedTool per context tools entry, in the context's order (the LAST one is the outermost command)."""
    from madengine_rocprof.registry.store import all_tools

    tools = all_tools()
    resolved = []
    for i, ref in enumerate(context.tools):
        if ref.name not in tools:
            raise unknown_name(
                "tool", ref.name, tools, "madengine-rocprof tools list", file=source, where=f"tools[{i}].name"
            )
        definition = tools[ref.name]
        entry = definition.madengine_entry(wrapper=wrapper, counters_dir=counters_dir)
        resolved.append(ResolvedTool(
            name=ref.name, definition=definition,
            cmd=ref.cmd if ref.cmd is not None else entry["cmd"],
            env_vars={**entry["env_vars"], **ref.env_vars},
            pre_scripts=list(ref.pre_scripts if ref.pre_scripts is not None else definition.pre_scripts),
            post_scripts=list(ref.post_scripts if ref.post_scripts is not None else definition.post_scripts),
            cmd_overridden=ref.cmd is not None,
        ))
    return resolved
