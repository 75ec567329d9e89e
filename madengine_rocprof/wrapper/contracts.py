"""The JSON files the parts hand each other, as TypedDicts: manifest.json (wrapper), run.json (runner),
workload_result.json (TinyTransformer harness) and the report's --json. Writers build these types and readers read
them; docs/architecture.md shows one example of each, and tests check those and real files with `problems()`.

Stdlib only and in wrapper/ because the wrapper is bundled into containers (wrapper/bundle.py takes every module
here). Keys added after schema_version 1 first shipped sit in the `total=False` halves, so older files still read.
scripts/tinytransformer/ writes workload_result.json without importing this package (it runs in containers that lack
it): WorkloadResult types that file for its readers only, and the tests keep the harness's output in line with it.
"""
from __future__ import annotations

import types
import typing
from typing import Any, Literal, TypedDict, Union

# --- manifest.json (wrapper -> runner, reports) ---------------------------------------------------------------------
WrapperOutcome = Literal["ok", "app_failed", "no_output", "profiler_failed", "no_profiler", "records_dropped"]


class ProfilerInfo(TypedDict):
    name: str | None
    path: str | None
    version: str | None
    why: str


class _OutputFileRequired(TypedDict):
    path: str
    size_bytes: int
    kind: str


class OutputFile(_OutputFileRequired, total=False):
    rows: int | None
    dispatches: int | None


class TracerSummary(TypedDict):
    backends: list[str]
    dropped_records: int | None
    processes: list[dict[str, Any]]


class _ManifestRequired(TypedDict):
    schema_version: int
    tool: str
    profiler: ProfilerInfo
    profile: str | None
    argv: list[str]
    app_argv: list[str]
    env_added: dict[str, str]
    output_dir: str
    started_at: str
    duration_s: float
    exit_code: int
    app_exit_code: int | None
    outcome: WrapperOutcome
    outputs: list[OutputFile]
    dispatch_count: int | None
    messages: list[str]


class Manifest(_ManifestRequired, total=False):
    tracer: TracerSummary  # only when the embedded tracer ran


# --- workload_result.json (harness -> runner, reports; written without this module) ---------------------------------
WorkloadStatus = Literal["ok", "failed"]


class WorkloadDevice(TypedDict, total=False):
    type: str
    name: str
    arch: str  # read by the runner when a workload gives it
    index: int | None
    total_memory_bytes: int
    multiprocessors: int
    capability: str
    runtime: str
    threads: int  # cpu


class WorkloadMetrics(TypedDict, total=False):
    tokens_per_second: float | None
    step_time_ms: dict[str, float]
    samples_per_second: float | None
    tokens_per_second_end_to_end: float | None
    end_to_end_seconds: float | None
    performance_line: str
    peak_memory_allocated_bytes: int | None
    peak_memory_reserved_bytes: int | None
    peak_host_rss_bytes: int | None  # the process's peak resident set size on the host (any device)
    mfu: float | None
    flops_per_step: float | None
    peak_flops: float | None
    tokens_per_second_mean: float | None
    peak_flops_source: str | None
    flops_formula: str
    parameters: int
    tokens_per_step: int
    timing: str
    timing_end_to_end: str
    memory: str
    step_time_ms_median_per_rank: list[float]  # several ranks: each rank's own median step time, by rank


class _WorkloadResultRequired(TypedDict):
    schema_version: int
    model: str
    status: WorkloadStatus


class WorkloadResult(_WorkloadResultRequired, total=False):
    version: str
    description: str
    git_sha: str
    versions: dict[str, Any]
    device: WorkloadDevice
    settings: dict[str, Any]
    metrics: WorkloadMetrics
    world_size: int
    step_times_ms: list[float]
    losses: list[float]
    validation: dict[str, Any]


# --- run.json (runner -> reports, cli) -------------------------------------------------------------------------------
RunStatus = Literal["SUCCESS", "FAILURE"]
ProfilerOutcome = Literal["ok", "app_failed", "no_output", "profiler_failed", "no_profiler", "records_dropped",
                          "no_manifest", "bad_manifest"]


class _ProfilerEntryRequired(TypedDict):
    tool: str
    output_dir: str
    outcome: ProfilerOutcome


class ProfilerEntry(_ProfilerEntryRequired, total=False):  # the rest only when the manifest was read
    profiler: ProfilerInfo
    outputs: int
    dispatch_count: int | None
    exit_code: int | None


class Step(TypedDict):
    name: str
    exit_code: int | None
    duration_s: float
    timed_out: bool
    interrupted: bool
    outcome: str
    log: str


class Performance(TypedDict):
    value: float
    metric: str


class _RunJsonRequired(TypedDict):
    schema_version: int
    tool: str
    model: str
    card: dict[str, Any]
    args: str
    status: RunStatus
    failures: list[str]
    warnings: list[str]
    started_at: str
    duration_s: float
    runner: str
    context: dict[str, Any]
    chain: dict[str, Any]
    timeout_s: float | None
    performance: Performance | None


class RunJson(_RunJsonRequired, total=False):
    gpu_vendor: dict[str, str | None]  # local and docker runners
    image: dict[str, Any]
    steps: list[Step]
    profilers: list[ProfilerEntry]
    samplers: list[dict[str, Any]]
    slurm: dict[str, Any]  # the slurm runner
    nodes: list[dict[str, Any]]


# --- the report's --json (reports) -----------------------------------------------------------------------------------
class _ReportRunRequired(TypedDict):
    label: str
    path: str
    # passed on as found: a report reads any folder, whose manifest.json or run.json may be of another shape
    profiler: dict[str, Any] | None
    outcome: str | None
    run_status: str | None
    sources: list[dict[str, Any]]
    counter_sources: list[dict[str, Any]]
    skipped_sources: list[dict[str, Any]]
    notes: list[str]
    summary: dict[str, Any]
    timeline: list[dict[str, Any]]
    kernels: list[dict[str, Any]]
    categories: list[dict[str, Any]]
    roles: list[dict[str, Any]]
    counters: list[dict[str, Any]]
    derived_metrics: list[dict[str, Any]]
    kernel_counters: dict[str, dict[str, float]]
    memory_copies: list[dict[str, Any]]
    workload: dict[str, Any] | None
    per_rank: list[dict[str, Any]] | None  # busy, idle and top kernels per rank (several processes)
    collectives: dict[str, Any] | None  # matched across ranks: count, skew_ns, late_rank, per_rank wait/transfer
    multi_node: dict[str, Any] | None
    efficiency: dict[str, Any] | None  # reports/analyses/efficiency.py; None without recorded shapes
    idle_causes: dict[str, Any] | None  # reports/analyses/idle.py; None without a device timeline
    launch: dict[str, Any] | None  # reports/analyses/launch.py; None without launch links


class ReportRun(_ReportRunRequired):
    """One run of a report (the keys are always there; an analysis that does not apply gives null)."""


class Report(TypedDict):
    schema_version: int
    tool: str
    generated_at: str
    baseline: str
    comparison: list[dict[str, Any]]
    runs: list[ReportRun]


def missing_keys(value: object, shape: type) -> list[str]:
    """The required keys of the TypedDict `shape` that `value` lacks (all of them when it is not an object)."""
    required = sorted(shape.__required_keys__)  # type: ignore[attr-defined]
    return [k for k in required if not isinstance(value, dict) or k not in value]


# --- a small shape checker for tests and for anyone reading these files ----------------------------------------------
def problems(value: object, shape: object, where: str = "$") -> list[str]:
    """What in `value` (parsed JSON) does not fit `shape` (a TypedDict or type above): missing or unknown keys,
    values outside a Literal, wrong basic types. An empty list means it fits."""
    if shape is Any:
        return []
    origin = typing.get_origin(shape)
    if origin is Literal:
        return [] if value in typing.get_args(shape) else [f"{where}: {value!r} is not one of {typing.get_args(shape)}"]
    if origin in (Union, types.UnionType):
        per_arm = [problems(value, arm, where) for arm in typing.get_args(shape)]
        return [] if any(not f for f in per_arm) else min(per_arm, key=len)  # the closest arm's problems
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {type(value).__name__}"]
        (item,) = typing.get_args(shape)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        _, item = typing.get_args(shape)
        return [p for k, v in value.items() for p in problems(v, item, f"{where}.{k}")]
    if isinstance(shape, type) and typing.is_typeddict(shape):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        hints = typing.get_type_hints(shape)
        found = [f"{where}: missing key {k!r}" for k in missing_keys(value, shape)]
        found += [f"{where}: unknown key {k!r}" for k in value if k not in hints]
        return found + [p for k, v in value.items() if k in hints for p in problems(v, hints[k], f"{where}.{k}")]
    if shape is type(None) or shape is None:
        return [] if value is None else [f"{where}: expected null, got {value!r}"]
    if shape is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif shape is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, shape)  # type: ignore[arg-type]
    return [] if ok else [f"{where}: expected {getattr(shape, '__name__', shape)}, got {value!r}"]
