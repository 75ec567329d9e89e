"""Checks the native API recorder against CUPTI's own API activity records of the same calls, on a GPU.

One window of eager TinyTransformer steps is traced with both at once: the native CUPTI callback
(madengine_rocprof/tracer/native/api_recorder.c) and CUPTI's runtime API activity records. Every call should appear
in both with the same correlation id, callback id and thread, and close timestamps (the native clock is mapped onto
CUPTI's by calibration pairs). Every kernel launched by a runtime call must find that call by its correlation id, and
no launch call may begin after its kernel started on the GPU (that would be an error in the clock mapping).

    python3 benchmarks/wrapper/api_recorder_check.py [--steps 5] -- --version v1 --batch-size 8 --seq-len 128 \\
        --cuda-graphs off > api_recorder_check.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def percentiles(values: list[float]) -> dict:
    if not values:
        return {}
    v = sorted(values)
    pick = {f"p{q}": v[min(len(v) - 1, int(q / 100 * len(v)))] for q in (0, 1, 50, 99)}
    return {**pick, "max": v[-1], "mean": round(statistics.fmean(v), 1)}


def warm_step(argv) -> tuple:
    """(args, tt_train, step, feed, device): the harness's training step after 10 untraced warm-up steps."""
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("harness", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    sys.path[:0] = [REPO, HERE]
    from overhead_alternating import build_step

    _torch, tt_train, step, feed, device, _args = build_step([a for a in args.harness if a != "--"])
    tt_train.timed_run(step, feed, 10, 0, device)
    return args, tt_train, step, feed, device


def main(argv=None) -> int:
    args, tt_train, step, feed, device = warm_step(argv)
    from madengine_rocprof.tracer import cupti_backend
    from madengine_rocprof.tracer import cupti_records as cr

    module = cupti_backend.load()
    backend = cupti_backend.CuptiBackend(module, api=True, api_recorder_choice="callbacks")
    backend.kinds.append(module.ActivityKind.RUNTIME)  # CUPTI's own records of the same calls, to compare with
    backend.start()
    if backend.warnings or backend.recorder is None:
        raise SystemExit(f"native recorder not in use: {backend.api_mechanism} {backend.warnings}")
    tt_train.timed_run(step, feed, 0, args.steps, device)
    backend.stop()

    activity: dict[int, dict] = {}
    kernels: list[dict] = []
    for raw in backend.raw:
        recs, _seen = cr.parse(raw, backend.offsets(raw), backend.layouts)
        for kind, r in recs:
            if kind == cr.RUNTIME:
                activity[r["correlation_id"]] = r
            elif kind == cr.KERNEL:
                kernels.append(r)
    native = {r["correlation_id"]: r for _k, r in backend.recorder.records(os.getpid())}
    both = sorted(set(activity) & set(native))
    start_diff = [native[c]["start"] - activity[c]["start"] for c in both]
    end_diff = [native[c]["end"] - activity[c]["end"] for c in both]
    kernel_found = sum(1 for k in kernels if k["correlation_id"] in native)
    kernel_runtime = sum(1 for k in kernels if k["correlation_id"] in activity)
    after_kernel = sum(1 for k in kernels if k["correlation_id"] in native
                       and native[k["correlation_id"]]["start"] > k["start"])
    out = {
        "steps": args.steps, "recorder": backend.api_mechanism, "lost": backend.recorder.lost,
        "calls": {"activity": len(activity), "native": len(native), "both": len(both),
                  "only_activity": len(set(activity) - set(native)), "only_native": len(set(native) - set(activity))},
        "cbid_mismatches": sum(1 for c in both if activity[c]["cbid"] != native[c]["cbid"]),
        "thread_mismatches": sum(1 for c in both if activity[c]["thread_id"] != native[c]["thread_id"]),
        "start_minus_activity_start_ns": percentiles(start_diff),
        "end_minus_activity_end_ns": percentiles(end_diff),
        "kernels": len(kernels), "kernels_with_a_runtime_call_activity": kernel_runtime,
        "kernels_with_a_runtime_call_native": kernel_found,
        "launch_started_after_its_kernel": after_kernel,
        "dropped_records": backend.dropped,
    }
    by_cbid = Counter(r["cbid"] for r in native.values())
    out["calls_per_step_by_function"] = {
        str(module.get_callback_name(module.CallbackDomain.RUNTIME_API, cbid)): round(n / args.steps, 1)
        for cbid, n in by_cbid.most_common(25)}
    json.dump(out, sys.stdout, indent=1)
    print(json.dumps(out["calls"]), out["start_minus_activity_start_ns"], file=sys.stderr)
    ok = (not out["calls"]["only_activity"] and not out["calls"]["only_native"] and not out["cbid_mismatches"]
          and not out["thread_mismatches"] and kernel_found == kernel_runtime and not after_kernel)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
