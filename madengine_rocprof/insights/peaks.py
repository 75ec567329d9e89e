"""Datasheet peaks of common data-center GPUs: memory bandwidth and FP32 (non-matrix) throughput.

Used to put an achieved bandwidth or FLOP rate against what the device can do. Figures are the vendors' published
peaks (boost clock); `--peak-bandwidth` / `--peak-tflops` override them for other parts or clocks. Sources, checked
2026-11-23 (docs/reports.md, 'Escalation', lists them too):
- MI300X: ROCm docs, docs/conceptual/gpu-arch/mi300.md ("Peak-performance capabilities of the MI300X": vector FP32
  256 FLOPS/clock/CU = 163.4 TFLOPS; "peak memory bandwidth of the GPU is 5.3 TB per second").
- MI250X: ROCm docs mi250.md gives vector FP32 128 FLOPS/clock/CU and 3.2 TB/s (8192-bit HBM2e at 3.2 Gb/s =
  3,276.8 GB/s); with the MI250X's 220 CUs at 1.7 GHz that is 47.9 TFLOPS (that page's 45.3 is the 208-CU MI250).
- MI325X: 6.0 TB/s (AMD product page as quoted by vendors' spec sheets); the same CDNA3 compute as MI300X (304 CUs,
  2.1 GHz): 163.4 TFLOPS.
- MI355X / MI350X: 8 TB/s HBM3E (AMD launch material, quoted by several spec sheets); FP32 derived, not read from a
  datasheet: 256 CUs (ROCm GPU specifications table) x 256 FLOPS/clock/CU (the CDNA3 vector rate) x 2.4 GHz
  (MI355X) or 2.2 GHz (MI350X) peak clock (AMD, Hot Chips 2025) = 157.3 / 144.2 TFLOPS.
- H100 SXM 67 TFLOPS / 3,350 GB/s, H100 PCIe 51 / 2,000, H200 (SXM) 67 / 4,800, A100 19.5 TFLOPS with 2,039 GB/s
  (80GB SXM) or 1,555 GB/s (40GB): NVIDIA datasheets.
AMD's vector FP32 peak counts packed FP32 (v_pk_fma_f32: two FMAs per lane); kernels without packed math top out
at half of it. The NVL boards (lower clocks) and a bare gfx target (gfx942 is MI300A, MI300X or MI325X) have no
entry: their peaks differ, so the user is asked to give them rather than get a wrong percentage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    device: str
    bandwidth_gbs: float | None  # GB/s (1e9 bytes per second)
    fp32_tflops: float | None  # FP32 vector / CUDA-core peak, TFLOP/s
    source: str = "datasheet"


# first match wins: specific names before families; None = known to differ from the family, no datasheet entry
_TABLE: tuple[tuple[str, Peak | None], ...] = (
    (r"H200.*NVL|H100.*NVL", None),
    (r"H200", Peak("NVIDIA H200", 4800, 67)),
    (r"H100.*PCIe", Peak("NVIDIA H100 PCIe", 2000, 51)),
    (r"H100", Peak("NVIDIA H100 SXM", 3350, 67)),
    (r"A100.*80", Peak("NVIDIA A100 80GB SXM", 2039, 19.5)),
    (r"A100", Peak("NVIDIA A100 40GB", 1555, 19.5)),
    (r"MI355X", Peak("AMD Instinct MI355X", 8000, 157.3)),
    (r"MI350X", Peak("AMD Instinct MI350X", 8000, 144.2)),
    (r"MI325X", Peak("AMD Instinct MI325X", 6000, 163.4)),
    (r"MI300X", Peak("AMD Instinct MI300X", 5300, 163.4)),
    (r"MI250X", Peak("AMD Instinct MI250X", 3277, 47.9)),
)


def device_peak(name: str | None, bandwidth_gbs: float | None = None, fp32_tflops: float | None = None) -> Peak | None:
    """The peak for a device name, with the given overrides; None when unknown and not given."""
    found = next((peak for pattern, peak in _TABLE if name and re.search(pattern, name, re.IGNORECASE)), None)
    if bandwidth_gbs is None and fp32_tflops is None:
        return found
    return Peak(
        name or (found.device if found else "given"),
        bandwidth_gbs if bandwidth_gbs is not None else (found.bandwidth_gbs if found else None),
        fp32_tflops if fp32_tflops is not None else (found.fp32_tflops if found else None),
        "given" if found is None else "datasheet, overridden",
    )
