"""Write a large synthetic rocprofv3 7.x kernel_trace.csv (default 1,000,000 dispatches) for the report benchmark.

Usage: python benchmarks/reports/make_kernel_trace.py OUT_DIR [--dispatches N] [--kernels K] [--seed S]
Writes OUT_DIR/bench-node/4242_kernel_trace.csv and prints its size. Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

HEADER = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count",'
    '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
)
STEMS = (
    "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K{}",
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>>"
        "(int, v{})"
    ),
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, v{})",
    "_attn_fwd_kernel_{}",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, v{}>>(...)",
)


def kernel_names(kernels: int) -> list[str]:
    return [STEMS[i % len(STEMS)].format(i) for i in range(kernels)]


def write(path: Path, dispatches: int, kernels: int, seed: int, pid: int = 4242) -> tuple[int, int]:
    """Write the trace; returns (file size in bytes, sum of the durations written: the benchmark's check)."""
    rng = random.Random(seed)
    total = 0
    names = kernel_names(kernels)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = 1_550_151_853_000_000
    with open(path, "w", newline="") as fh:
        fh.write(HEADER)
        lines = []
        for n in range(1, dispatches + 1):
            k = rng.randrange(kernels)
            duration = rng.randint(1_000, 200_000)
            total += duration
            lines.append(
                f'"KERNEL_DISPATCH","Agent 4",1,1,{pid},{n},{k},"{names[k]}",{n},{t},{t + duration},'
                f"0,0,8,0,16,256,1,1,{256 * (k + 1)},1,1\n"
            )
            t += duration + rng.randint(100, 3_000)
            if len(lines) == 10_000:
                fh.writelines(lines)
                lines.clear()
        fh.writelines(lines)
    return path.stat().st_size, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--dispatches", type=int, default=1_000_000)
    parser.add_argument("--kernels", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    path = args.out_dir / "bench-node" / "4242_kernel_trace.csv"
    size, _ = write(path, args.dispatches, args.kernels, args.seed)
    print(f"wrote {path}: {args.dispatches:,} dispatches, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
