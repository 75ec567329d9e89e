"""Datasheet peaks of common data-center GPUs: memory bandwidth, vector (SIMT) rates and dense matrix rates per dtype.

Used to put an achieved bandwidth or FLOP rate against what the device can do. Figures are the vendors' published
peaks (boost clock), dense (a datasheet's "with sparsity" figure is twice the dense one; the dense one is used).
`--peak-bandwidth` / `--peak-tflops` override them for other parts or clocks. Sources, checked 2026-11-27
(docs/reports.md, 'Peaks', lists them per device too):
- MI300X: ROCm docs, docs/conceptual/gpu-arch/mi300.md ("Peak-performance capabilities of the MI300X": vector FP64
  81.7, vector FP32 163.4 = 256 FLOPS/clock/CU; matrix FP64 and FP32 163.4, TF32 653.7, FP16 and BF16 1307.4, FP8
  2614.9 TFLOPS; "peak memory bandwidth of the GPU is 5.3 TB per second"); AMD Instinct MI300X data sheet (same).
- MI325X: AMD Instinct MI325X data sheet: the MI300X's compute (304 CUs, 2.1 GHz) with 6.0 TB/s HBM3E.
- MI355X / MI350X: AMD Instinct MI350 series data sheet: matrix FP16/BF16 2.5 / 2.3 PFLOPS, FP8 5.0 / 4.6 PFLOPS
  (dense), matrix and vector FP32 157.3 / 144.2, FP64 78.6 / 72.1 TFLOPS, 8 TB/s HBM3E; CDNA4 has no TF32 matrix
  instruction (TF32 is emulated with BF16), so no TF32 entry.
- MI250X: ROCm docs mi250.md and the MI250X data sheet: matrix FP16/BF16 383.0, matrix FP32 and FP64 95.7, vector
  FP32 (packed) and FP64 47.9 TFLOPS; 8192-bit HBM2e at 3.2 Gb/s = 3,276.8 GB/s. No TF32 or FP8.
- MI210: AMD Instinct MI210 data sheet: matrix FP16/BF16 181.0, matrix FP32 and FP64 45.3, vector FP32 and FP64
  22.6 TFLOPS, 1.6 TB/s (1,638.4 GB/s).
- H100 SXM / PCIe, H200: NVIDIA H100 and H200 data sheets: SXM (and H200) FP64 34, FP64 Tensor Core 67, FP32 67
  TFLOPS, and dense Tensor Core TF32 494.7, FP16/BF16 989.4, FP8 1978.9 (the H100 white paper's dense figures; the
  data sheets print twice these, "with sparsity"); PCIe FP64 26, FP64 Tensor Core 51, FP32 51, TF32 378, FP16/BF16
  756.5, FP8 1513 (the data sheet's sparse figures halved); 3,350 / 2,000 / 4,800 GB/s. FP16/BF16 on the CUDA
  cores (not tensor cores) run at twice FP32 (H100 white paper): 133.8 SXM, 102 PCIe.
- A100: NVIDIA A100 data sheet: TF32 156, FP16/BF16 312 (dense), FP64 Tensor Core 19.5, FP32 19.5 TFLOPS; 2,039 GB/s
  (80GB SXM) or 1,555 GB/s (40GB). No FP8.
- B200: NVIDIA HGX B200 data sheet (eight GPUs; per GPU and dense: the sparse figures halved): FP8 4.5 PFLOPS,
  FP16/BF16 2.25 PFLOPS, TF32 1.1 PFLOPS, FP64 Tensor Core and FP64 37, FP32 75 TFLOPS, 8 TB/s HBM3E.
AMD's vector FP32 peak counts packed FP32 (v_pk_fma_f32: two FMAs per lane); kernels without packed math top out
at half of it. The NVL boards (lower clocks) and a bare gfx target (gfx942 is MI300A, MI300X or MI325X) have no
entry: their peaks differ, so the user is asked to give them rather than get a wrong percentage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MATRIX_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class Peak:
    device: str
    bandwidth_gbs: float | None  # GB/s (1e9 bytes per second)
    fp32_tflops: float | None  # FP32 vector / CUDA-core peak, TFLOP/s
    source: str = "datasheet"
    matrix: tuple[tuple[str, float], ...] = ()  # (dtype, dense TFLOP/s) on tensor / matrix cores
    vector: tuple[tuple[str, float], ...] = ()  # (dtype, TFLOP/s) on the SIMT / vector units, fp32 included

    def matrix_tflops(self, dtype: str) -> float | None:
        return dict(self.matrix).get(dtype)

    def vector_tflops(self, dtype: str) -> float | None:
        return dict(self.vector).get(dtype)


def _peak(device: str, bandwidth: float, vector: dict[str, float], matrix: dict[str, float]) -> Peak:
    return Peak(device, bandwidth, vector["fp32"], "datasheet", tuple(matrix.items()), tuple(vector.items()))


_H100_SXM_MATRIX = {"fp64": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}
_H100_SXM_VECTOR = {"fp64": 34.0, "fp32": 67.0, "fp16": 133.8, "bf16": 133.8}
_MI300X_MATRIX = {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9}
_MI300X_VECTOR = {"fp64": 81.7, "fp32": 163.4}
_A100_MATRIX = {"fp64": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}
_A100_VECTOR = {"fp64": 9.7, "fp32": 19.5, "fp16": 78.0, "bf16": 39.0}

# first match wins: specific names before families; None = known to differ from the family, no datasheet entry
_TABLE: tuple[tuple[str, Peak | None], ...] = (
    (r"H200.*NVL|H100.*NVL", None),
    (r"H200", _peak("NVIDIA H200", 4800, _H100_SXM_VECTOR, _H100_SXM_MATRIX)),
    (r"H100.*PCIe", _peak("NVIDIA H100 PCIe", 2000, {"fp64": 26.0, "fp32": 51.0, "fp16": 102.0, "bf16": 102.0},
                          {"fp64": 51.0, "tf32": 378.0, "fp16": 756.5, "bf16": 756.5, "fp8": 1513.0})),
    (r"H100", _peak("NVIDIA H100 SXM", 3350, _H100_SXM_VECTOR, _H100_SXM_MATRIX)),
    (r"A100.*80", _peak("NVIDIA A100 80GB SXM", 2039, _A100_VECTOR, _A100_MATRIX)),
    (r"A100", _peak("NVIDIA A100 40GB", 1555, _A100_VECTOR, _A100_MATRIX)),
    (r"B200", _peak("NVIDIA B200", 8000, {"fp64": 37.0, "fp32": 75.0},
                    {"fp64": 37.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0})),
    (r"MI355X", _peak("AMD Instinct MI355X", 8000, {"fp64": 78.6, "fp32": 157.3},
                      {"fp64": 78.6, "fp32": 157.3, "fp16": 2516.6, "bf16": 2516.6, "fp8": 5033.2})),
    (r"MI350X", _peak("AMD Instinct MI350X", 8000, {"fp64": 72.1, "fp32": 144.2},
                      {"fp64": 72.1, "fp32": 144.2, "fp16": 2306.9, "bf16": 2306.9, "fp8": 4613.7})),
    (r"MI325X", _peak("AMD Instinct MI325X", 6000, _MI300X_VECTOR, _MI300X_MATRIX)),
    (r"MI300X", _peak("AMD Instinct MI300X", 5300, _MI300X_VECTOR, _MI300X_MATRIX)),
    (r"MI250X", _peak("AMD Instinct MI250X", 3277, {"fp64": 47.9, "fp32": 47.9},
                      {"fp64": 95.7, "fp32": 95.7, "fp16": 383.0, "bf16": 383.0})),
    (r"MI210", _peak("AMD Instinct MI210", 1638, {"fp64": 22.6, "fp32": 22.6},
                     {"fp64": 45.3, "fp32": 45.3, "fp16": 181.0, "bf16": 181.0})),
)


def device_peak(name: str | None, bandwidth_gbs: float | None = None, fp32_tflops: float | None = None,
                compute_tflops: float | None = None) -> Peak | None:
    """The peak for a device name, with the given overrides; None when unknown and not given.

    `fp32_tflops` (escalate's `--peak-tflops`) replaces the FP32 vector peak only. `compute_tflops` (report's
    `--peak-tflops`) becomes the one compute roof for every dtype and unit: a user who gives one figure for the
    efficiency table means the rate their part reaches, and mixing it with datasheet figures for other dtypes would
    compare unlike things.
    """
    found = next((peak for pattern, peak in _TABLE if name and re.search(pattern, name, re.IGNORECASE)), None)
    if bandwidth_gbs is None and fp32_tflops is None and compute_tflops is None:
        return found
    matrix = found.matrix if found else ()
    vector = found.vector if found else ()
    if fp32_tflops is not None:
        vector = tuple((d, fp32_tflops if d == "fp32" else v) for d, v in vector) or (("fp32", fp32_tflops),)
    if compute_tflops is not None:
        fp32_tflops = compute_tflops
        matrix = tuple((d, compute_tflops) for d in MATRIX_DTYPES)
        vector = tuple((d, compute_tflops) for d in ("fp64", "fp32", "fp16", "bf16"))
    return Peak(
        name or (found.device if found else "given"),
        bandwidth_gbs if bandwidth_gbs is not None else (found.bandwidth_gbs if found else None),
        fp32_tflops if fp32_tflops is not None else (found.fp32_tflops if found else None),
        "given" if found is None else "datasheet, overridden",
        matrix,
        vector,
    )
