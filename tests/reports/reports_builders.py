"""Builders for synthetic profiler output trees (the formats the real fixtures do not cover, and large runs)."""
from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path

from madengine_rocprof.reports import build_report, load_runs
from madengine_rocprof.wrapper.contracts import ReportRun

# rocprofv3 7.x and 6.2 kernel_trace.csv headers (docs/reference rocprofv3.md; real samples in tests/fixtures/rocprofv3)
HEADER_7 = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
            "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
            "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
            "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
HEADER_62 = ["Kind", "Agent_Id", "Queue_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name", "Correlation_Id",
             "Start_Timestamp", "End_Timestamp", "Private_Segment_Size", "Group_Segment_Size", "Workgroup_Size_X",
             "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
STATS_HEADER = ["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev"]

# kernel names in the style of a PyTorch training step on ROCm (rocBLAS/hipBLASLt, ATen, Triton)
TT_KERNELS = {
    "gemm": "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K1",
    "gemm_bwd": "Cijk_Ailk_Bjlk_SB_MT64x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K1",
    "softmax": "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(float*, float "
               "const*, int)",
    "rmsnorm": "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
               "float>>>(...)",
    "norm_triton": "_rmsnorm_fwd_kernel",
    "attn_triton": "_attn_fwd_kernel",
    "sdpa": "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>>(Flash_fwd_params)",
    "add": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, "
           "3ul>>(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
    "mul": "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
           "at::native::binary_internal::MulFunctor<float>>, std::array<char*, 3ul>>(int, ...)",
    "silu": "void at::native::vectorized_elementwise_kernel<4, "
            "at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}, std::array<char*, 2ul>>(int, ...)",
    "copy": "__amd_rocclr_copyBuffer",
    "adam": "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::FusedAdamMathFunctor<float, "
            "4>>(...)",
}


def dict_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def place(src: Path, dest: Path) -> Path:
    """Copy a fixture into a run tree."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    return dest


def report_one(run_dir: Path) -> ReportRun:
    return build_report(load_runs([run_dir]))["runs"][0]


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    """Quote strings and leave numbers bare, as rocprofv3 does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def trace_rows(dispatches, header=HEADER_7):
    """rocprofv3 rows for (name, start_ns, end_ns) dispatches."""
    rows = []
    for i, (name, start, end) in enumerate(dispatches, start=1):
        values = {"Kind": "KERNEL_DISPATCH", "Agent_Id": "Agent 4" if header is HEADER_7 else 1, "Queue_Id": 1,
                  "Stream_Id": 0, "Thread_Id": 100, "Dispatch_Id": i, "Kernel_Id": sum(map(ord, name)) % 1000,
                  "Kernel_Name": name, "Correlation_Id": i, "Start_Timestamp": start, "End_Timestamp": end}
        rows.append([values.get(column, 0) for column in header])
    return rows


def write_trace(path: Path, dispatches, header=HEADER_7) -> Path:
    return write_csv(path, header, trace_rows(dispatches, header))


def random_dispatches(names: list[str], count: int, seed: int, t0: int = 1_550_151_853_000_000):
    """Back-to-back dispatches with random durations, in launch order."""
    rng = random.Random(seed)
    out, t = [], t0
    for _ in range(count):
        name = rng.choice(names)
        duration = rng.randint(1_000, 400_000)
        out.append((name, t, t + duration))
        t += duration + rng.randint(0, 5_000)
    return out


def expected_from_dispatches(dispatches) -> dict[str, tuple[int, int, int, int]]:
    """Independent aggregation: name -> (calls, total, min, max) via sorted lists, not the reader's code."""
    by_name: dict[str, list[int]] = {}
    for name, start, end in dispatches:
        by_name.setdefault(name, []).append(end - start)
    return {n: (len(d), sum(d), min(d), max(d)) for n, d in by_name.items()}


TT_PLANS = {
    # version -> (kernel key, calls per step, duration ns); shapes loosely follow the public v1..v4 traces
    "v1": [("gemm", 40, 90_000), ("gemm_bwd", 48, 120_000), ("softmax", 16, 40_000), ("rmsnorm", 34, 15_000),
           ("add", 60, 8_000), ("mul", 70, 7_000), ("silu", 16, 9_000), ("adam", 4, 60_000), ("copy", 2, 20_000)],
    "v2": [("gemm", 30, 95_000), ("gemm_bwd", 40, 115_000), ("sdpa", 8, 60_000), ("rmsnorm", 34, 15_000),
           ("add", 50, 8_000), ("mul", 60, 7_000), ("silu", 16, 9_000), ("adam", 4, 60_000), ("copy", 2, 20_000)],
    "v3": [("gemm", 30, 95_000), ("attn_triton", 8, 45_000), ("norm_triton", 17, 6_000), ("add", 20, 8_000),
           ("silu", 8, 9_000), ("adam", 1, 20_000), ("copy", 2, 20_000)],
    "v4": [("gemm", 30, 95_000), ("sdpa", 8, 55_000), ("norm_triton", 1, 6_000), ("rmsnorm", 16, 15_000),
           ("add", 24, 8_000), ("silu", 8, 9_000), ("adam", 1, 20_000), ("copy", 2, 20_000)],
}
TT_THROUGHPUT = {"v1": 15201.0, "v2": 24065.0, "v3": 88729.0, "v4": 75814.0}
TT_MEMORY = {"v1": 2_400_000_000, "v2": 2_100_000_000, "v3": 900_000_000, "v4": 950_000_000}


def tt_dispatches(version: str, steps: int = 3, seed: int = 0):
    rng = random.Random(f"{version}-{seed}")
    out, t = [], 2_000_000_000_000
    for _ in range(steps):
        for key, calls, duration in TT_PLANS[version]:
            for _ in range(calls):
                d = duration + rng.randint(-duration // 10, duration // 10)
                out.append((TT_KERNELS[key], t, t + d))
                t += d + 1_000
    return out


def make_tt_run(root: Path, version: str, steps: int = 3, tool: str = "rocprofv3_compute") -> Path:
    """A runner-style run directory: run.json, workload_result.json, profiler/manifest.json, profiler/<host>/<pid>_*."""
    run_dir = root / f"tiny_llama_{version}__{tool}"
    dispatches = tt_dispatches(version, steps)
    write_trace(run_dir / "profiler" / "node01" / "4242_kernel_trace.csv", dispatches)
    (run_dir / "run.json").write_text(json.dumps({"status": "ok", "model": f"tiny_llama_{version}"}))
    (run_dir / "profiler" / "manifest.json").write_text(json.dumps({
        "schema_version": 1, "tool": "madengine-rocprof-wrapper",
        "profiler": {"name": "rocprofv3", "version": "1.0.0"}, "outcome": "ok", "dispatch_count": len(dispatches),
    }))
    (run_dir / "workload_result.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "model": "tiny_llama",
                "version": version,
                "device": {"type": "cuda", "name": "AMD Instinct MI300X"},
                "metrics": {
                    "tokens_per_second": TT_THROUGHPUT[version],
                    "step_time_ms": {"median": 2048 * 1000 / TT_THROUGHPUT[version]},
                    "peak_memory_allocated_bytes": TT_MEMORY[version],
                    "mfu": 0.01,
                },
                "status": "ok",
            }
        )
    )
    return run_dir


def exact_union(intervals) -> int:
    """Exact length of a union of [start, end) integer intervals, by a sweep over sorted starts: the independent
    computation the readers' busy, self and inclusive times are checked against."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start >= reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total
