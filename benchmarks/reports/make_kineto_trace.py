"""Write a large synthetic PyTorch profiler (Kineto) trace, gzip-compressed, for the report benchmark.

Usage: python benchmarks/reports/make_kineto_trace.py OUT.json.gz [--gpu-events N] [--kernels K] [--seed S] [--rank R]

Laid out as torch.profiler's export_chrome_trace writes it: top-level schemaVersion, deviceProperties,
distributedInfo and baseTimeNanoseconds; then per GPU event the `cuda_runtime` launch on the host (with its
`ac2g` flow start and end), the GPU event (`kernel`, about 3% `gpu_memcpy` and 2% `gpu_memset`) with Kineto's args,
a `cpu_op` per 4 launches, and a `ProfilerStep#N` per 1,000 GPU events; `ts`/`dur` are microseconds with three
decimals relative to baseTimeNanoseconds. Kernels run back to back on 2 streams of device 0, with gaps.

Returns (in `write`) and prints the exact expected figures: GPU event count per category, per-kernel calls and total
ns, so a benchmark checks the report it times against them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

BASE_NS = 1_751_410_836_000_000_000
STEMS = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel_{}",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>) v{}",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*) v{}",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, "
    "false>(pytorch_flash::Flash_fwd_params) v{}",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*) v{}",
)
COPIES = ("Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoD (Device -> Device)")


def _us(ns: int) -> str:
    """Nanoseconds -> Kineto's microsecond text with three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def write(path: Path, gpu_events: int, kernels: int = 200, seed: int = 0, rank: int = 0) -> dict:
    rng = random.Random(seed)
    names = [STEMS[i % len(STEMS)].format(i) for i in range(kernels)]
    expected: dict = {"gpu_events": gpu_events, "by_category": {}, "kernels": {}}
    path.parent.mkdir(parents=True, exist_ok=True)
    host_ns = 1_000_000  # relative to BASE_NS
    gpu_ns = {7: 2_000_000, 20: 2_000_000}
    step = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) as fh:
        fh.write(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                                        "totalGlobalMem": 85029158912}],
                             "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 8}})[:-1])
        fh.write(f', "baseTimeNanoseconds": {BASE_NS}, "traceEvents": [\n')
        fh.write('  {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python"}}')
        step_start = host_ns
        for i in range(gpu_events):
            if i % 1000 == 0:
                if i:
                    fh.write(f',\n  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
                             f'"pid": 4242, "tid": 4242, "ts": {_us(step_start)}, "dur": {_us(host_ns - step_start)}}}')
                step += 1
                step_start = host_ns
            corr = i + 1
            roll = rng.random()
            stream = 7 if rng.random() < 0.8 else 20
            if roll < 0.03:
                cat, name = "gpu_memcpy", COPIES[i % len(COPIES)]
            elif roll < 0.05:
                cat, name = "gpu_memset", "Memset (Device)"
            else:
                cat, name = "kernel", names[rng.randrange(kernels)]
            launch_dur = rng.randrange(2_000, 9_000)
            if i % 4 == 0:
                fh.write(f',\n  {{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 4242, "tid": 4242, '
                         f'"ts": {_us(host_ns)}, "dur": {_us(4 * launch_dur + 3_000)}, '
                         f'"args": {{"External id": {corr}, "Record function id": 0, "Ev Idx": {i}}}}}')
            fh.write(f',\n  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, '
                     f'"tid": 4242, "ts": {_us(host_ns)}, "dur": {_us(launch_dur)}, '
                     f'"args": {{"cbid": 211, "correlation": {corr}, "External id": {corr}}}}}')
            fh.write(f',\n  {{"ph": "s", "id": {corr}, "pid": 4242, "tid": 4242, "ts": {_us(host_ns)}, '
                     f'"cat": "ac2g", "name": "ac2g"}}')
            start = max(gpu_ns[stream] + rng.randrange(0, 4_000), host_ns + launch_dur)
            dur = rng.randrange(1_000, 60_000)
            if cat == "kernel":
                args = (f'"queued": 0, "device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, '
                        f'"registers per thread": 128, "shared memory": 49152, "blocks per SM": 4.0, '
                        f'"warps per SM": 16.0, "grid": [528, 1, 1], "block": [128, 1, 1], '
                        f'"est. achieved occupancy %": 25')
            else:
                args = (f'"device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, '
                        f'"bytes": 4194304, "memory bandwidth (GB/s)": 1024.5')
            fh.write(f',\n  {{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": {stream}, '
                     f'"ts": {_us(start)}, "dur": {_us(dur)}, "args": {{{args}}}}}')
            fh.write(f',\n  {{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {_us(start)}, '
                     f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}')
            gpu_ns[stream] = start + dur
            host_ns += launch_dur + rng.randrange(500, 3_000)
            expected["by_category"][cat] = expected["by_category"].get(cat, 0) + 1
            if cat == "kernel":
                entry = expected["kernels"].setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += dur
        fh.write(f',\n  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 4242, '
                 f'"tid": 4242, "ts": {_us(step_start)}, "dur": {_us(host_ns - step_start)}}}')
        fh.write('\n], "traceName": "synthetic"}\n')
    expected["steps"] = step
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--gpu-events", type=int, default=1_000_000)
    parser.add_argument("--kernels", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rank", type=int, default=0)
    args = parser.parse_args(argv)
    expected = write(args.out, args.gpu_events, args.kernels, args.seed, args.rank)
    print(f"{args.out}: {args.out.stat().st_size / 2**20:.1f} MiB gzip, {expected['gpu_events']:,} GPU events "
          f"{expected['by_category']}, {expected['steps']} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
