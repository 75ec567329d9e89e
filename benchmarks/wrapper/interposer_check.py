"""Checks the libcudart interposer (MADENGINE_ROCPROF_TRACER_API_RECORDER=interpose) against CUPTI on a GPU.

Window A traces eager TinyTransformer steps with the interposer and CUPTI's runtime API activity records at once,
and compares them: per function, and per thread in order. The interposer sees the calls made through libcudart.so;
CUPTI also sees those made by libraries that link the runtime statically (cuBLAS), which the counts show.
Window B is the product's configuration (interposer only, kernel records from CUPTI): every kernel must join a host
call by CUPTI's correlation id (the interposed runtime call, or the driver launch of a library outside
libcudart.so), and no launch may start after its kernel.

    python3 benchmarks/wrapper/interposer_check.py [--steps 5] -- --version v1 --batch-size 8 --seq-len 128 \\
        --cuda-graphs off > interposer_check.json
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def window(backend, tt_train, step, feed, device, steps: int) -> dict:
    from madengine_rocprof.tracer import cupti_records as cr

    backend.start()
    if backend.warnings or backend.recorder is None:
        raise SystemExit(f"interposer not in use: {backend.api_mechanism} {backend.warnings}")
    tt_train.timed_run(step, feed, 0, steps, device)
    backend.stop()
    activity, kernels, memory = [], [], []
    for raw in backend.raw:
        recs, _seen = cr.parse(raw, backend.offsets(raw), backend.layouts)
        activity += [r for k, r in recs if k == cr.RUNTIME]
        kernels += [r for k, r in recs if k == cr.KERNEL]
        memory += [r for k, r in recs if k in (cr.MEMCPY, cr.MEMSET)]
    calls = backend.recorder.records(0)
    return {"activity": activity, "kernels": kernels, "memory": memory,
            "interposed": [r for k, r in calls if k == cr.RUNTIME], "driver": [r for k, r in calls if k == cr.DRIVER],
            "slots": backend.recorder.slots, "foreign": backend.recorder.foreign_slots, "lost": backend.recorder.lost,
            "dropped": backend.dropped}


def main(argv=None) -> int:
    sys.path[:0] = [REPO, HERE]
    from overhead_alternating import percentiles, warm_step

    args, tt_train, step, feed, device = warm_step(argv)
    from madengine_rocprof.tracer import cupti_backend
    from madengine_rocprof.tracer import cupti_records as cr

    module = cupti_backend.load()

    def name(r: dict) -> str:
        return cr.api_name(str(module.get_callback_name(module.CallbackDomain.RUNTIME_API, r["cbid"])))

    # A: both recorders at once
    a_backend = cupti_backend.CuptiBackend(module, api=True, api_recorder_choice="interpose")
    a_backend.kinds.append(module.ActivityKind.RUNTIME)
    a = window(a_backend, tt_train, step, feed, device, args.steps)
    a_backend.close()
    per_thread: dict[str, dict[int, list]] = {"activity": defaultdict(list), "interposed": defaultdict(list)}
    for r in sorted(a["activity"], key=lambda r: r["start"]):
        per_thread["activity"][r["thread_id"]].append((name(r), r))
    for r in sorted(a["interposed"], key=lambda r: r["start"]):
        per_thread["interposed"][r["thread_id"]].append((r["name"], r))
    same_order, start_diff, end_diff, threads = 0, [], [], {}
    for tid in set(per_thread["activity"]) | set(per_thread["interposed"]):
        act, ins = per_thread["activity"].get(tid, []), per_thread["interposed"].get(tid, [])
        equal = [n for n, _r in act] == [n for n, _r in ins]
        threads[str(tid)] = {"activity": len(act), "interposed": len(ins), "same_sequence": equal}
        if equal:
            same_order += len(act)
            start_diff += [i["start"] - c["start"] for (_n, c), (_m, i) in zip(act, ins, strict=True)]
            end_diff += [i["end"] - c["end"] for (_n, c), (_m, i) in zip(act, ins, strict=True)]
    count_a = Counter(name(r) for r in a["activity"])
    count_i = Counter(r["name"] for r in a["interposed"])
    differing = {n: [count_a.get(n, 0), count_i.get(n, 0)] for n in set(count_a) | set(count_i)
                 if count_a.get(n, 0) != count_i.get(n, 0)}

    # B: the product's configuration
    b_backend = cupti_backend.CuptiBackend(module, api=True, api_recorder_choice="interpose")
    b = window(b_backend, tt_train, step, feed, device, args.steps)
    b_backend.close()
    driver_name: dict[int, str] = {}
    for r in b["driver"]:
        r["name"] = driver_name.setdefault(r["cbid"], cr.api_name(str(module.get_callback_name(
            module.CallbackDomain.DRIVER_API, r["cbid"]))))
    by_corr = {r["correlation_id"]: r for r in b["interposed"] + b["driver"] if r["correlation_id"] < (1 << 32)}
    joined = [k for k in b["kernels"] if k["correlation_id"] in by_corr]
    out = {
        "steps": args.steps, "recorder": b_backend.api_mechanism,
        "A_both": {"calls": {"activity": len(a["activity"]), "interposed": len(a["interposed"]),
                             "in_the_same_per_thread_order": same_order},
                   "threads": threads, "functions_whose_counts_differ (activity, interposed)": differing,
                   "start_minus_activity_start_ns": percentiles(start_diff),
                   "end_minus_activity_end_ns": percentiles(end_diff),
                   "got_slots_patched": a["slots"], "foreign_slots": a["foreign"]},
        "B_product": {"calls": len(b["interposed"]), "kernels": len(b["kernels"]),
                      "kernels_joined_to_an_interposed_call": len(joined),
                      "joined_by_function": dict(Counter(by_corr[k["correlation_id"]]["name"] for k in joined)),
                      "launch_started_after_its_kernel": sum(
                          1 for k in joined if by_corr[k["correlation_id"]]["start"] > k["start"]),
                      "memcpy_memset": len(b["memory"]),
                      "memcpy_memset_joined": sum(1 for m in b["memory"] if m["correlation_id"] in by_corr),
                      "driver_calls_outside_libcudart": len(b["driver"]),
                      "driver_calls_by_function": dict(Counter(r["name"] for r in b["driver"])),
                      "calls_with_a_correlation_id": len(by_corr), "lost": b["lost"], "dropped": b["dropped"]},
        "calls_per_step_by_function": {n: round(c / args.steps, 1) for n, c in count_i.most_common(25)},
    }
    json.dump(out, sys.stdout, indent=1)
    print(json.dumps(out["A_both"]["calls"]), json.dumps({k: v for k, v in out["B_product"].items()
                                                           if k != "joined_by_function"}), file=sys.stderr)
    ok = (len(joined) == len(b["kernels"]) and not out["B_product"]["launch_started_after_its_kernel"]
          and not b["lost"] and not b["dropped"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
