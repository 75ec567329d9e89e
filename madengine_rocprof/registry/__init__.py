"""Registry of profiling tools and counter profiles: built-ins plus user-registered files."""
from madengine_rocprof.registry.builtin import CORE_PROFILES
from madengine_rocprof.registry.counter_check import CounterCheck, check_counters, pack_counters
from madengine_rocprof.registry.counter_defs import CounterCatalog, block_limits, load_catalog
from madengine_rocprof.registry.resolve import ResolvedTool, resolve_tools
from madengine_rocprof.registry.store import (
    BUILTIN_COUNTERS_DIR,
    counter_profile_path,
    get_counter_profile,
    get_tool,
    list_counter_profiles,
    list_tools,
    load_counter_file,
    load_tool_file,
    register_counter_profile,
    register_tool,
    user_home,
)

__all__ = [
    "BUILTIN_COUNTERS_DIR", "CORE_PROFILES", "CounterCatalog", "CounterCheck", "ResolvedTool", "block_limits",
    "check_counters", "counter_profile_path", "get_counter_profile", "get_tool", "list_counter_profiles", "list_tools",
    "load_catalog", "load_counter_file", "load_tool_file", "pack_counters", "register_counter_profile", "register_tool",
    "resolve_tools", "user_home",
]
