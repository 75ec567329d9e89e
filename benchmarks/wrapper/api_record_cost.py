"""What one CUDA runtime API record costs the host under the CUPTI backend, without any GPU work in the way.

The eager v1 step makes about 11 runtime calls per kernel (cudaGetDevice, cudaGetLastError, ...), and `--hip-trace`
records each of them. This loop calls two of those cheap runtime functions through ctypes, in blocks of CALLS calls,
alternating an untraced block with a block traced by each CUPTI configuration (the tracer started before and stopped
after the block, outside its timing). The ctypes call itself costs the same in every block, so the difference from
the untraced blocks is what CUPTI adds per call; the records each traced block wrote are counted.

    python3 benchmarks/wrapper/api_record_cost.py [--calls 200000] [--blocks 6] > api_record_cost.json
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time

VARIANTS = {
    "cupti_kernel": "kernel + memcpy + memset activities only (no API records: the control)",
    "cupti_runtime": "plus every CUDA runtime call, recorded by the native CUPTI callback (API_RECORDER=callbacks)",
    "cupti_runtime_activity": "plus CUDA runtime API activity records (--hip-trace, the default; until round 7 this"
                              " was `cupti_runtime`)",
    "cupti_driver": "plus CUDA driver calls, recorded by the native CUPTI callback (API_DOMAIN=driver)",
    "cupti_driver_activity": "plus CUDA driver API activity records (API_DOMAIN=driver, API_RECORDER=activity)",
}


def cudart():
    """The libcudart that torch loaded (the one CUPTI sees the application call)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in path:
                return ctypes.CDLL(path)
    raise SystemExit("api_record_cost: torch did not load a libcudart (is this a CUDA build of torch?)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--blocks", type=int, default=6)
    args = p.parse_args(argv)
    import torch

    from madengine_rocprof.tracer import cupti_backend

    torch.zeros(1, device="cuda")  # context and libcudart loaded
    rt = cudart()
    dev = ctypes.c_int()
    calls = {"cudaGetDevice": lambda: rt.cudaGetDevice(ctypes.byref(dev)), "cudaGetLastError": rt.cudaGetLastError}
    module = cupti_backend.load()

    def timed(fn) -> float:
        t = time.perf_counter_ns()
        for _ in range(args.calls):
            fn()
        return (time.perf_counter_ns() - t) / args.calls

    def traced(variant: str, fn) -> tuple[float, dict]:
        b = cupti_backend.CuptiBackend(module, api=variant != "cupti_kernel",
                                       api_domain="driver" if variant.startswith("cupti_driver") else "runtime",
                                       api_recorder_choice="activity" if variant.endswith("_activity") else "callbacks")
        b.start()
        if b.warnings:
            raise SystemExit(f"{variant}: {b.warnings}")
        ns = timed(fn)
        torch.cuda.synchronize()
        b.stop()
        _records, seen = b.records()
        b.close()  # a new backend per block: CUPTI takes one callback subscriber at a time
        return ns, b.counts(seen)

    out: dict = {"calls_per_block": args.calls, "blocks": args.blocks, "variants": VARIANTS, "results": {}}
    for name, fn in calls.items():
        timed(fn)
        for v in VARIANTS:
            traced(v, fn)  # CUPTI's one-time set-up for this configuration, untimed
        base: list[float] = []
        per: dict[str, list[float]] = {v: [] for v in VARIANTS}
        counts: dict[str, dict] = {}
        for i in range(args.blocks):
            order = list(VARIANTS) if i % 2 == 0 else list(reversed(VARIANTS))
            for v in order:
                base.append(timed(fn))
                ns, counts[v] = traced(v, fn)
                per[v].append(ns)
        b = statistics.median(base)
        out["results"][name] = {
            "untraced_ns_per_call": round(b, 1),
            **{v: {"ns_per_call": round(statistics.median(x), 1),
                   "extra_ns_per_call": round(statistics.median(x) - b, 1),
                   "min_max_ns": [round(min(x), 1), round(max(x), 1)],
                   "last_block": {k: counts[v][k] for k in ("records", "dropped_records")}}
               for v, x in per.items()},
        }
        print(name, json.dumps(out["results"][name]), file=sys.stderr, flush=True)
    json.dump(out, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
