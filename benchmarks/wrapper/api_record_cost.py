"""What one CUDA runtime API record costs the host under the CUPTI backend, without any GPU work in the way.

The eager v1 step makes about 11 runtime calls per kernel (cudaGetDevice, cudaGetLastError, ...), and `--hip-trace`
records each of them. This loop calls two of those cheap runtime functions through ctypes, in blocks of CALLS calls,
alternating an untraced block with a block traced by each CUPTI configuration (the tracer started before and stopped
after the block, outside its timing). The ctypes call itself costs the same in every block, so the difference from
the untraced blocks is what CUPTI adds per call; the records each traced block wrote are counted.

    python3 benchmarks/wrapper/api_record_cost.py [--calls 200000] [--blocks 6] [--plt] > api_record_cost.json

With --plt the calls come from a loop in C that calls libcudart through its PLT/GOT, as torch's libraries do, instead
of through ctypes (which looks the function up once and calls it directly): the only way the libcudart interposer
(variant cupti_runtime_interpose) sees them. The loop is compiled with the system's C compiler.
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
    "cupti_runtime_activity": "plus CUDA runtime API activity records (--hip-trace, the default; until round 7 this"
                              " was `cupti_runtime`)",
    "cupti_driver_activity": "plus CUDA driver API activity records (API_DOMAIN=driver, API_RECORDER=activity)",
}
PLT_VARIANTS = {"cupti_runtime_interpose": "plus every CUDA runtime call, recorded by the libcudart interposer"
                                           " (API_RECORDER=interpose; --plt only)"}
LOOP_C = """
int cudaGetDevice(int *device);
int cudaGetLastError(void);
void loop_get_device(long n) { int d; for (long i = 0; i < n; i++) cudaGetDevice(&d); }
void loop_get_last_error(long n) { for (long i = 0; i < n; i++) cudaGetLastError(); }
"""


def plt_loop(path: str):
    """A C loop that calls libcudart at `path` through its own PLT (compiled into a temporary folder)."""
    import subprocess
    import tempfile

    from madengine_rocprof.tracer import api_recorder

    folder = tempfile.mkdtemp(prefix="api-record-cost-")
    source, lib = f"{folder}/loop.c", f"{folder}/libloop.so"
    with open(source, "w") as fh:
        fh.write(LOOP_C)
    subprocess.run([api_recorder.compiler() or "cc", "-O1", "-shared", "-fPIC", "-o", lib, source, path,
                    f"-Wl,-rpath,{path.rsplit('/', 1)[0]}"], check=True)
    loop = ctypes.CDLL(lib)
    loop.loop_get_device.argtypes = loop.loop_get_last_error.argtypes = [ctypes.c_long]
    return loop


def cudart_path() -> str:
    """The libcudart that torch loaded (the one CUPTI sees the application call)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in path:
                return path
    raise SystemExit("api_record_cost: torch did not load a libcudart (is this a CUDA build of torch?)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--plt", action="store_true", help="call from a C loop through the PLT (see above)")
    args = p.parse_args(argv)
    import torch

    from madengine_rocprof.tracer import cupti_backend

    torch.zeros(1, device="cuda")  # context and libcudart loaded
    variants = {**VARIANTS, **PLT_VARIANTS} if args.plt else VARIANTS
    module = cupti_backend.load()
    if args.plt:
        loop = plt_loop(cudart_path())
        calls = {"cudaGetDevice": lambda: loop.loop_get_device(args.calls),
                 "cudaGetLastError": lambda: loop.loop_get_last_error(args.calls)}

        def timed(fn) -> float:
            t = time.perf_counter_ns()
            fn()
            return (time.perf_counter_ns() - t) / args.calls
    else:
        rt = ctypes.CDLL(cudart_path())
        dev = ctypes.c_int()
        calls = {"cudaGetDevice": lambda: rt.cudaGetDevice(ctypes.byref(dev)),
                 "cudaGetLastError": rt.cudaGetLastError}

        def timed(fn) -> float:
            t = time.perf_counter_ns()
            for _ in range(args.calls):
                fn()
            return (time.perf_counter_ns() - t) / args.calls

    def traced(variant: str, fn) -> tuple[float, dict]:
        b = cupti_backend.CuptiBackend(module, api=variant != "cupti_kernel",
                                       api_domain="driver" if variant.startswith("cupti_driver") else "runtime",
                                       api_recorder_choice="interpose" if variant.endswith("_interpose") else
                                       "activity")
        b.start()
        if b.warnings:
            raise SystemExit(f"{variant}: {b.warnings}")
        ns = timed(fn)
        torch.cuda.synchronize()
        b.stop()
        _records, seen = b.records()
        b.close()  # a new backend per block: CUPTI takes one callback subscriber at a time
        return ns, b.counts(seen)

    out: dict = {"calls_per_block": args.calls, "blocks": args.blocks, "via": "PLT (C loop)" if args.plt else "ctypes",
                 "variants": variants, "results": {}}
    for name, fn in calls.items():
        timed(fn)
        for v in variants:
            traced(v, fn)  # CUPTI's one-time set-up for this configuration, untimed
        base: list[float] = []
        per: dict[str, list[float]] = {v: [] for v in variants}
        counts: dict[str, dict] = {}
        for i in range(args.blocks):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
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
