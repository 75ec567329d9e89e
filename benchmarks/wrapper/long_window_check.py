"""One long tracing window, as a product run has: do CUPTI's buffer hand-overs mid-window hang? (issue 10, round 10)

The alternating benchmarks open short windows, whose records never fill a 32 MiB buffer: CUPTI hands buffers back
only at the flush. A product run traces hundreds of steps in one window, so CUPTI completes and requests buffers
while the application launches kernels, from its own threads (the Python buffer callbacks here; the product's are
native since issue 26, benchmarks/tracer/README.md). This runs STEPS eager TinyTransformer steps in one
window with every runtime API call recorded (`--hip-trace`, CUPTI activity records: about 0.5 MiB per v1 step) into
small buffers (8 MiB: many completions), and reports the buffers requested and completed, the records and drops, and
the wall time. Run it under `timeout`: a hang is the failure it looks for.

    python3 benchmarks/wrapper/long_window_check.py [--steps 150] [--buffer-mb 8] -- --version v1 \
        --batch-size 8 --seq-len 128 --cuda-graphs off > long_window.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, harness = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--buffer-mb", type=float, default=8, help="activity buffer size (small: many completions)")
    args = p.parse_args(own)
    from overhead_alternating import warm_step

    _a, tt_train, step, feed, device = warm_step(["--steps", "0", "--", *harness])
    from madengine_rocprof.tracer import cupti_backend

    module = cupti_backend.load()
    buffers = cupti_backend.Buffers(int(args.buffer_mb * (1 << 20)))
    backend = cupti_backend.CuptiBackend(module, api=True, buffers=buffers)
    t0 = time.monotonic()
    backend.start()
    times, _losses, _wall = tt_train.timed_run(step, feed, 0, args.steps, device)
    backend.stop()
    window_s = time.monotonic() - t0
    counts = backend.counts({})  # the buffer accounting; records are counted below without parsing them
    out = {"steps": args.steps,
           "window_s": round(window_s, 2), "median_step_ms": sorted(times)[len(times) // 2],
           "records": sum(len(backend.offsets(raw)) for raw in backend.raw), "buffers_completed": len(backend.raw),
           **{k: counts[k] for k in ("buffers", "buffer_bytes", "completed_bytes", "dropped_records")}}
    json.dump(out, sys.stdout, indent=1)
    print(json.dumps(out), file=sys.stderr)
    return 0 if not counts["dropped_records"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
