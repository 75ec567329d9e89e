"""Built-in profiling tools: every upstream madengine tool name keeps its meaning, with upstream's defects fixed
(no --perfetto-trace-filename, valid PC-sampling pairs, explicit output formats, per-process output names, every
tool through the wrapper), plus the five core profiles."""
from __future__ import annotations

from typing import Any

CORE_PROFILES = ("compute_bound", "memory_bound", "multi_gpu", "lightweight", "pc_sampling")

_SAMPLER_ENV = {"DEVICE": "all", "SAMPLING_RATE": "0.1", "DUAL_GCD": "false"}


def _sampler_scripts(kind: str, tool: str) -> dict:
    """madengine's own start/stop scripts for its gpu_info samplers (madengine copies scripts/common into the run)."""
    return {
        "pre_scripts": [{"path": "scripts/common/pre_scripts/gpu_info_pre.sh"},
                        {"path": f"scripts/common/pre_scripts/gpu_info_{kind}_start.sh"}],
        "post_scripts": [{"path": f"scripts/common/post_scripts/gpu_info_{kind}_stop.sh"},
                         {"path": "scripts/common/post_scripts/gpu_info_post.sh", "args": tool}],
    }

# Core profiles first; upstream names reuse them. Fields are ToolDefinition fields.
_CORE: dict[str, dict[str, Any]] = {
    "compute_bound": dict(
        description="Compute-bound kernels: HIP API + kernel trace and ALU/occupancy counters (1 counter pass)",
        trace=["hip", "kernel"], counters="compute_bound", output_formats=["csv", "pftrace"], overhead="medium"),
    "memory_bound": dict(
        description="Memory-bound kernels: kernel, copy and allocation traces plus fetch/write size counters",
        trace=["hip", "kernel", "memory_copy", "memory_allocation"], counters="memory_bound",
        output_formats=["csv", "pftrace"], overhead="medium"),
    "multi_gpu": dict(
        description="Multi-GPU communication: HIP, HSA, kernel, copy, RCCL and scratch traces (no counters)",
        trace=["hip", "hsa", "kernel", "memory_copy", "rccl", "scratch_memory"], output_formats=["csv", "pftrace"],
        env_vars={"RCCL_DEBUG": "INFO"}, overhead="medium"),
    "lightweight": dict(
        description="Lowest overhead: kernel trace with per-kernel statistics",
        trace=["kernel"], stats=True, output_formats=["csv"], overhead="low"),
    "pc_sampling": dict(
        description="PC sampling (host_trap, 1000 us; gfx90a and newer) with kernel trace",
        trace=["kernel"], pc_sampling={"method": "host_trap", "unit": "time", "interval": 1000},
        output_formats=["csv", "json"], overhead="high", vendors=["AMD"]),
}

_UPSTREAM = {
    "rocprof": dict(
        description="Runtime trace (upstream name; runs rocprofv3, or legacy rocprof when that is all there is)",
        trace=["runtime"],
        overhead="low",
    ),
    "rocprof_hip_only": dict(
        description="HIP API trace only (no kernels: add kernel tracing with rocprofv3_lightweight)",
        trace=["hip"],
        overhead="low",
    ),
    "rocprof_sys": dict(
        description="System trace: HIP, HSA, markers, kernels, copies, allocations", trace=["sys"], overhead="high"
    ),
    "rocprofv3": dict(
        description="rocprofv3 runtime trace (upstream called rocprofv3 directly; now through the wrapper)",
        trace=["runtime"],
        overhead="low",
    ),
    "rocprofv3_compute": dict(_CORE["compute_bound"], core_profile="compute_bound"),
    "rocprofv3_memory": dict(_CORE["memory_bound"], core_profile="memory_bound"),
    "rocprofv3_communication": dict(_CORE["multi_gpu"], core_profile="multi_gpu"),
    "rocprofv3_full": dict(
        description="Everything: all traces, full_profile counters (several passes) and statistics",
        trace=[
            "hip",
            "hsa",
            "kernel",
            "memory_copy",
            "memory_allocation",
            "rccl",
            "scratch_memory",
            "marker",
            "runtime",
        ],
        counters="full_profile",
        stats=True,
        output_formats=["csv", "pftrace"],
        env_vars={"RCCL_DEBUG": "INFO", "HSA_ENABLE_SDMA": "0"},
        overhead="high",
    ),
    "rocprofv3_lightweight": dict(
        description="HIP API and kernel trace with per-kernel statistics, CSV and JSON",
        trace=["hip", "kernel"],
        stats=True,
        output_formats=["csv", "json"],
        overhead="low",
        core_profile="lightweight",
    ),
    "rocprofv3_perfetto": dict(
        description="Perfetto trace of HIP, kernels and copies (results.pftrace; open in ui.perfetto.dev)",
        trace=["hip", "kernel", "memory_copy"],
        output_formats=["csv", "pftrace"],
        overhead="low",
    ),
    "rocprofv3_api_overhead": dict(
        description="API overhead: HIP, HSA, marker and runtime traces with statistics",
        trace=["hip", "hsa", "marker", "runtime"],
        stats=True,
        output_formats=["csv", "json"],
        overhead="medium",
    ),
    "rocprofv3_pc_sampling": dict(
        description="PC sampling with a valid method/unit pair (upstream paired stochastic with time, which fails)",
        trace=["hip", "kernel"],
        pc_sampling={"method": "host_trap", "unit": "time", "interval": 1000},
        output_formats=["csv", "json"],
        overhead="high",
        vendors=["AMD"],
        core_profile="pc_sampling",
    ),
    "gpu_info_power_profiler": dict(
        description="Background GPU power sampler (CSV: time, Power(Watt) GPU<i>); adds no command",
        profiler="sampler",
        overhead="none",
        env_vars={
            **{f"POWER_{k}": v for k, v in _SAMPLER_ENV.items()},
            "POWER_MODE": "power",
            "POWER_OUTPUT_FILE": "gpu_info_power_profiler_output.csv",
        },
        **_sampler_scripts("power", "gpu_info_power_profiler"),
    ),
    "gpu_info_vram_profiler": dict(
        description="Background GPU memory sampler (CSV: time, vram(%) GPU<i>); adds no command",
        profiler="sampler",
        overhead="none",
        env_vars={
            **{f"VRAM_{k}": v for k, v in _SAMPLER_ENV.items()},
            "VRAM_MODE": "vram",
            "VRAM_OUTPUT_FILE": "gpu_info_vram_profiler_output.csv",
        },
        **_sampler_scripts("vram", "gpu_info_vram_profiler"),
    ),
}


def builtin_tool_data() -> dict[str, dict]:
    """name -> ToolDefinition fields (fresh copies)."""
    import copy
    out = {}
    for name, fields in {**_CORE, **_UPSTREAM}.items():
        data = copy.deepcopy(fields)
        data["name"] = name
        out[name] = data
    return out
