"""Busy, idle, compute and overlap under HTA's definitions, as Holistic Trace Analysis itself computes them.

Writes two small synthetic PyTorch-profiler (Kineto) traces, one per rank, with GEMM, NCCL, copy and fill kernels
(SM-resident copies: FillFunctor, direct_copy_kernel_cuda, CatArrayBatchedCopy), memcpys and memsets on several
streams that overlap, then runs HTA's temporal breakdown and comm/comp overlap on them and stores the values.
tests/reports/test_reports_hta_values.py feeds the same traces' intervals to reports/dispatches.py and checks that
`--definitions hta` gives HTA's numbers, and that ours differ exactly where the definitions do.

The traces mark no ProfilerStep, so HTA keeps every GPU event (with two or more steps it drops the last one).

Usage (HTA is not a dependency of this project; use a separate environment):
    python3 -m venv /tmp/hta_venv && /tmp/hta_venv/bin/pip install HolisticTraceAnalysis==0.5.0
    /tmp/hta_venv/bin/python benchmarks/reports/hta_check/make_and_run.py tests/fixtures/hta_check
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

KERNELS = [
    "ampere_sgemm_128x64_nn",
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
    "void at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>"
    "(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, "
    "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
]
COPIES = [("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)"), ("gpu_memcpy", "Memcpy DtoD (Device -> Device)"),
          ("gpu_memset", "Memset (Device)")]


def trace(rank: int, seed: int, count: int = 400) -> dict:
    """Kernels and copies on streams 7, 13, 21 of GPU `rank`, each with a launching runtime call (correlation)."""
    rng = random.Random(seed)
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::step", "pid": 100, "tid": 100, "ts": 0, "dur": 10,
               "args": {"External id": 1}}]
    t = {7: 1_000, 13: 1_000, 21: 1_000}
    for i in range(count):
        stream = rng.choice([7, 7, 13, 21])
        start = t[stream] + rng.choice([0, 1, 5, 40])
        dur = rng.randint(1, 60)
        t[stream] = start + dur
        correlation = 10 + i
        if rng.random() < 0.15:
            cat, name = rng.choice(COPIES)
        else:
            cat, name = "kernel", rng.choice(KERNELS)
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100,
                       "ts": start - 3, "dur": 2, "args": {"correlation": correlation, "External id": 1}})
        events.append({"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": stream, "ts": start, "dur": dur,
                       "args": {"device": rank, "stream": stream, "correlation": correlation, "External id": 1}})
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "deviceProperties": [], "traceEvents": events}


def main(out: Path) -> None:
    from hta.trace_analysis import TraceAnalysis  # type: ignore[import-not-found]  # HTA 0.5.0, own venv

    out.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        (out / f"rank{rank}.pt.trace.json").write_text(json.dumps(trace(rank, seed=40 + rank)))
    analysis = TraceAnalysis(trace_dir=str(out))
    temporal = analysis.get_temporal_breakdown(visualize=False)
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    ranks: dict[str, dict] = {}
    values = {"hta_version": "0.5.0", "command": "/tmp/hta_venv/bin/python benchmarks/reports/hta_check/"
              "make_and_run.py tests/fixtures/hta_check", "ranks": ranks}
    for row in temporal.to_dict("records"):
        ranks[str(int(row["rank"]))] = {
            "idle_time_us": int(row["idle_time(us)"]), "compute_time_us": int(row["compute_time(us)"]),
            "non_compute_time_us": int(row["non_compute_time(us)"]), "kernel_time_us": int(row["kernel_time(us)"]),
        }
    for row in overlap.to_dict("records"):
        # HTA returns the percentage rounded to 2 decimals
        ranks[str(int(row["rank"]))]["comp_comm_overlap_pctg"] = float(row["comp_comm_overlap_pctg"])
    (out / "hta_values.json").write_text(json.dumps(values, indent=1) + "\n")
    print(json.dumps(values, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("hta_check_out"))
