"""Host cost per kernel launch of each embedded-tracer backend, on a launch-bound loop of tiny kernels.

One process per backend variant; inside it, blocks of LAUNCHES launches alternate untraced and traced (the tracer
started and stopped around each traced block), so each variant is compared with its own process's baseline.
Kernels: `empty` is torch.cuda._sleep(0) (a kernel that returns at once: launch cost only), `add` is x.add_(1) on
256 floats (an eager operator: dispatcher + TensorIterator + launch). Also counts the kernels each traced block
saw and the records CUPTI dropped.

    python3 benchmarks/wrapper/launch_overhead.py [--out DIR]         # all variants, JSON table to stdout
    python3 benchmarks/wrapper/launch_overhead.py --variant cupti     # one variant (what the driver runs)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = {
    "torch": "torch.profiler, CUDA activities, external correlation off (the torch backend's default)",
    "cupti": "CUPTI backend: concurrent kernel + memcpy + memset (per-thread buffers, CUPTI zeroes no buffer)",
    "cupti_api": "CUPTI backend + CUDA runtime API records (--hip-trace)",
    "cupti_driver": "CUPTI backend + CUDA driver API records (--hip-trace, API_DOMAIN=driver)",
    "cupti_small_buffers": "CUPTI backend with 256 KiB buffers: buffers complete during the loop (drain cost)",
}
LAUNCHES, BLOCKS = 2000, 8


def tracer(variant: str, torch):
    """(start, stop -> kernels seen, dropped)."""
    return _torch_tracer(torch) if variant == "torch" else _cupti_tracer(variant, torch)


def _torch_tracer(torch):
    from torch._C._profiler import _ExperimentalConfig
    from torch.profiler import ProfilerActivity, profile

    state: dict[str, Any] = {}

    def start():
        state["p"] = profile(activities=[ProfilerActivity.CUDA],
                             experimental_config=_ExperimentalConfig(disable_external_correlation=True))
        state["p"].start()

    def stop():
        torch.cuda.synchronize()
        state["p"].stop()
        evs = [e for e in state["p"].profiler.kineto_results.events()
               if e.device_type() == torch.autograd.DeviceType.CUDA
               and not e.name().startswith(("Memcpy", "Memset"))]
        return len(evs), None
    return start, stop


def _cupti_tracer(variant: str, torch):
    from madengine_rocprof.tracer import cupti_backend

    module = cupti_backend.load()
    size = (256 << 10) if variant == "cupti_small_buffers" else cupti_backend.BUFFER_BYTES
    state: dict[str, Any] = {}

    def start():
        state["b"] = cupti_backend.CuptiBackend(module, api=variant in ("cupti_api", "cupti_driver"),
                                                api_domain="driver" if variant == "cupti_driver" else "runtime",
                                                buffers=cupti_backend.Buffers(size))
        state["b"].start()

    def stop():
        torch.cuda.synchronize()
        b = state["b"]
        b.stop()
        with tempfile.TemporaryDirectory(prefix="launch_trace_") as tmp:
            path, counts = b.trace(os.path.join(tmp, "t.json"), demangle_names=True)
            with open(path, encoding="utf-8") as fh:
                trace = json.load(fh)
        return sum(1 for e in trace["traceEvents"] if e["cat"] == "kernel"), counts["dropped_records"]
    return start, stop


def one(variant: str) -> dict:
    import torch

    x = torch.zeros(256, device="cuda")
    kernels = {"empty": lambda: torch.cuda._sleep(0), "add": lambda: x.add_(1.0)}
    start, stop = tracer(variant, torch)

    def block(fn) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(LAUNCHES):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / LAUNCHES * 1e6

    out = {}
    for kname, fn in kernels.items():
        block(fn)
        start()
        block(fn)  # warm the traced path once (CUPTI initialisation)
        stop()
        base, traced, seen, dropped = [], [], [], []
        for i in range(BLOCKS):
            for traced_first in ((False, True) if i % 2 == 0 else (True, False)):
                if traced_first:
                    start()
                    traced.append(block(fn))
                    n, d = stop()
                    seen.append(n)
                    dropped.append(d)
                else:
                    base.append(block(fn))
        out[kname] = {"untraced_us_per_launch": statistics.median(base),
                      "traced_us_per_launch": statistics.median(traced),
                      "extra_us_per_launch": statistics.median(traced) - statistics.median(base),
                      "kernels_seen_per_block": sorted(set(seen)), "launches_per_block": LAUNCHES,
                      "dropped_records": dropped}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", choices=list(VARIANTS))
    args = p.parse_args()
    if args.variant:
        print(json.dumps(one(args.variant)))
        return 0
    import torch

    result: dict = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
              "launches_per_block": LAUNCHES, "blocks": BLOCKS, "variants": {}}
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name, what in [*VARIANTS.items(), ("cupti", VARIANTS["cupti"] + " (again, last: order check)")]:
        done = subprocess.run([sys.executable, __file__, "--variant", name], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            result["variants"][name + "_error"] = {"what": what, "error": done.stderr[-2000:]}
            continue
        key = name if name not in result["variants"] else name + "_again"
        result["variants"][key] = {"what": what, **json.loads(done.stdout.strip().splitlines()[-1])}
        print(key, json.dumps(result["variants"][key]), file=sys.stderr, flush=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
