"""Typed models: madengine additional context, profiling tool definitions, counter profiles."""
from madengine_rocprof.models.context import (
    AdditionalContext,
    Distributed,
    Slurm,
    ToolRef,
    deep_merge,
    load_context,
    validate_context,
)
from madengine_rocprof.models.counters import CounterProfile, parse_counter_text
from madengine_rocprof.models.tool import (
    DEFAULT_COUNTERS_DIR,
    DEFAULT_WRAPPER,
    PROFILE_ENV,
    PcSampling,
    ScriptRef,
    ToolDefinition,
)

__all__ = [
    "AdditionalContext", "CounterProfile", "DEFAULT_COUNTERS_DIR", "DEFAULT_WRAPPER", "Distributed", "PROFILE_ENV",
    "PcSampling", "ScriptRef", "Slurm", "ToolDefinition", "ToolRef", "deep_merge", "load_context",
    "parse_counter_text", "validate_context",
]
