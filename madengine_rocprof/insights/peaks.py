"""Datasheet peaks of common data-center GPUs: memory bandwidth and FP32 (non-matrix) throughput.

Used to put an achieved bandwidth or FLOP rate against what the device can do. Figures are the vendors' published
peaks (boost clock); `--peak-bandwidth` / `--peak-tflops` override them for other parts or clocks.
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


# first match wins: specific names before families and architecture fallbacks
_TABLE = (
    (r"H200", Peak("NVIDIA H200", 4800, 67)),
    (r"H100.*PCIe", Peak("NVIDIA H100 PCIe", 2000, 51)),
    (r"H100", Peak("NVIDIA H100 SXM", 3350, 67)),
    (r"A100.*80", Peak("NVIDIA A100 80GB SXM", 2039, 19.5)),
    (r"A100", Peak("NVIDIA A100 40GB", 1555, 19.5)),
    (r"MI325X", Peak("AMD Instinct MI325X", 6000, 163.4)),
    (r"MI300X|gfx942", Peak("AMD Instinct MI300X", 5300, 163.4)),
    (r"MI250X|gfx90a", Peak("AMD Instinct MI250X", 3277, 47.9)),
)


def device_peak(name: str | None, bandwidth_gbs: float | None = None, fp32_tflops: float | None = None) -> Peak | None:
    """The peak for a device name (or gfx arch), with the given overrides; None when unknown and not given."""
    found = next((peak for pattern, peak in _TABLE if name and re.search(pattern, name, re.IGNORECASE)), None)
    if bandwidth_gbs is None and fp32_tflops is None:
        return found
    return Peak(
        name or (found.device if found else "given"),
        bandwidth_gbs if bandwidth_gbs is not None else (found.bandwidth_gbs if found else None),
        fp32_tflops if fp32_tflops is not None else (found.fp32_tflops if found else None),
        "given" if found is None else "datasheet, overridden",
    )
