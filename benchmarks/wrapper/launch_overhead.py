"""Per-kernel-launch cost of torch.profiler configurations on a launch-bound loop (small kernels back to back).

    python3 benchmarks/wrapper/launch_overhead.py > launch_overhead.json
Each variant times STEPS steps of LAUNCHES tiny kernels (wall time, synchronised), in alternating blocks."""
from __future__ import annotations

import json
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

LAUNCHES, STEPS, ROUNDS = 1000, 10, 3


def steps(x) -> list[float]:
    out = []
    for _ in range(STEPS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(LAUNCHES):
            x.add_(1.0)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def variant(name: str):
    if name == "none":
        return None
    if name == "cuda":
        return profile(activities=[ProfilerActivity.CUDA])
    if name == "cuda_no_correlation":
        from torch._C._profiler import _ExperimentalConfig

        return profile(activities=[ProfilerActivity.CUDA],
                       experimental_config=_ExperimentalConfig(disable_external_correlation=True))
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])


def main() -> None:
    x = torch.zeros(256, device="cuda")
    steps(x)  # warm-up
    names = ["none", "cuda", "cuda_no_correlation", "cpu_cuda"]
    times: dict[str, list[float]] = {n: [] for n in names}
    kernels = {}
    for _ in range(ROUNDS):
        for n in names:
            prof = variant(n)
            if prof is None:
                times[n] += steps(x)
                continue
            prof.start()
            times[n] += steps(x)
            prof.stop()
            kernels[n] = sum(e.count for e in prof.key_averages() if e.device_type.name == "CUDA")
    base = statistics.median(times["none"])
    print(
        json.dumps(
            {
                "launches_per_step": LAUNCHES,
                "step_ms_median": {n: statistics.median(t) for n, t in times.items()},
                "extra_us_per_launch": {
                    n: round((statistics.median(t) - base) * 1e3 / LAUNCHES, 3) for n, t in times.items()
                },
                "cuda_kernels_seen_last_round": kernels,
                "torch": torch.__version__,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
