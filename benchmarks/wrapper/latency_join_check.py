"""Could kernels join their launching call by time instead of by a CUPTI callback on every launch? (issue 10, round 10)

The interposer joins each kernel to its launch through a CUPTI callback on every driver launch. CUPTI can instead
stamp each kernel record with `queued`, the host time at which the launch was written into the command buffer
(cuptiActivityEnableLatencyTimestamps), which happens inside the launching call. One window of eager TinyTransformer
steps is traced with the interposer (and its callback join) and latency timestamps at once. For every kernel this
checks whether `queued` lies inside the call the callback joined it to; then a join by time alone (below) runs on the
same calls with the callback's ids taken off the cudaLaunch* calls, and every launch call must get back the same id.

The answer was yes (results/round10_call5), but the time join did not become the product's: with latency timestamps
on, CUPTI hangs a launch in the 29th tracing window of a process (README section 0f).

    python3 benchmarks/wrapper/latency_join_check.py [--steps 5] -- --version v1 --batch-size 8 --seq-len 128 \\
        --cuda-graphs off > latency_join_check.json
"""
from __future__ import annotations

import bisect
import json
import sys
from collections import Counter

UNKNOWN = (1 << 64) - 1  # CUPTI_TIMESTAMP_UNKNOWN


def join_by_time(calls: list[dict], kernels: list[dict]) -> int:
    """Gives each kernel's correlation id to the one cudaLaunch* call open when the driver queued it, in launch
    order, skipping calls already joined; returns how many kernels found no single such call."""
    launches = sorted((c for c in calls if c.get("name", "").startswith("cudaLaunch")), key=lambda c: c["start"])
    starts = [c["start"] for c in launches]
    longest = max((c["end"] - c["start"] for c in launches), default=0)
    taken = {c["correlation_id"] for c in calls if c["correlation_id"]}
    unjoined = 0
    for kernel in sorted(kernels, key=lambda k: k["correlation_id"]):
        if kernel["correlation_id"] in taken:
            continue
        q, holding = kernel["queued"], []
        if q not in (0, UNKNOWN):
            i = bisect.bisect_right(starts, q)
            while i > 0 and starts[i - 1] >= q - longest:
                i -= 1
                if launches[i]["end"] >= q and not launches[i]["correlation_id"]:
                    holding.append(launches[i])
        if len(holding) != 1:
            unjoined += 1
            continue
        holding[0]["correlation_id"] = kernel["correlation_id"]
        taken.add(kernel["correlation_id"])
    return unjoined


def main(argv=None) -> int:
    from api_recorder_check import percentiles, warm_step

    args, tt_train, step, feed, device = warm_step(argv)
    from madengine_rocprof.tracer import api_recorder, cupti_backend
    from madengine_rocprof.tracer import cupti_records as cr

    module = cupti_backend.load()
    module.activity_enable_latency_timestamps(1)
    backend = cupti_backend.CuptiBackend(module, api=True, api_recorder_choice="interpose")
    backend.start()
    recorder = backend.recorder
    if backend.warnings or not isinstance(recorder, api_recorder.Interposer):
        raise SystemExit(f"interposer not in use: {backend.api_mechanism} {backend.warnings}")
    tt_train.timed_run(step, feed, 0, args.steps, device)
    backend.stop()
    module.activity_enable_latency_timestamps(0)
    layout = cr.Layout(cr.KERNEL, module.activity_kernel10_dtype, cr.FIELDS[cr.KERNEL] + ("queued",))
    kernels = []
    for raw in backend.raw:
        recs, _seen = cr.parse(raw, backend.offsets(raw), {cr.KERNEL: layout})
        kernels += [r for _k, r in recs]
    recorded = recorder.records(0)
    calls = [r for _k, r in recorded]
    driver = {r["correlation_id"] for k, r in recorded if k == cr.DRIVER}
    by_corr = {r["correlation_id"]: r for r in calls if r["correlation_id"] < (1 << 32)}
    launching = {id(r) for r in calls if r.get("name", "").startswith("cudaLaunch")}
    copies = [dict(r, correlation_id=0) if id(r) in launching else dict(r) for r in calls]
    unjoined = join_by_time(copies, kernels)
    tally: Counter = Counter()
    after_start, before_end = [], []
    for k in kernels:
        call = by_corr.get(k["correlation_id"])
        q = k["queued"]
        if q in (0, UNKNOWN):
            tally["queued_unknown"] += 1
        elif call is not None:
            tally["joined_by_callback"] += 1
            if call["start"] <= q <= call["end"]:
                tally["queued_inside_the_callback_call"] += 1
            after_start.append(q - call["start"])
            before_end.append(call["end"] - q)
    for original, timed in zip(calls, copies, strict=True):
        if id(original) in launching:
            same = timed["correlation_id"] == original["correlation_id"]
            tally["launch_calls_same_id_both_joins" if same else "launch_calls_differing_id"] += 1
    out = {"steps": args.steps, "recorder": backend.api_mechanism, "kernels": len(kernels), "calls": len(calls),
           "launch_calls": len(launching), "kernels_the_time_join_left_without_a_call": unjoined,
           "kernels_launched_outside_libcudart (driver rows of the callback join)":
               sum(1 for k in kernels if k["correlation_id"] in driver),
           "tally": dict(tally), "queued_minus_call_start_ns": percentiles(after_start),
           "call_end_minus_queued_ns": percentiles(before_end),
           "queued_to_start_ns": percentiles([k["start"] - k["queued"] for k in kernels
                                              if k["queued"] not in (0, UNKNOWN)]),
           "queued_field": str(module.activity_kernel10_dtype.fields["queued"]),
           "dropped": backend.dropped, "lost": recorder.lost}
    backend.close()
    json.dump(out, sys.stdout, indent=1)
    print(json.dumps(out["tally"]), "unjoined", unjoined, file=sys.stderr)
    return 0 if not tally["launch_calls_differing_id"] and not out["dropped"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
