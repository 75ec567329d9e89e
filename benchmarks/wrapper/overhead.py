"""Lightweight-tracing overhead, side by side: runs the TinyTransformer harness alternately without a profiler and
under the wrapper's embedded tracer (profile lightweight), and compares the harness's median step time (device
events, warm-up excluded). The tracer records during every timed step; its file export happens at exit, outside
the timed steps (reported separately as the wall time difference).

    python3 benchmarks/wrapper/overhead.py --pairs 3 -- --version v1 --num-steps 30 > overhead.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile

from overhead_inprocess import harness_run  # same folder: one way to run the harness, traced or not


def one(traced: bool, harness_args: list[str], workdir: str, tracer_env: dict) -> dict:
    r = harness_run(harness_args, workdir, traced, tracer_env)
    row = {"traced": traced, "wall_s": r["wall_s"], "step_time_ms_median": r["metrics"]["step_time_ms"]["median"],
           "tokens_per_second": r["metrics"]["tokens_per_second"]}
    if traced:
        row.update(outcome=r["outcome"], dispatch_count=r["dispatch_count"])
    return row


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--tracer-env", action="append", default=[], metavar="K=V", help="environment for the traced runs")
    p.add_argument("harness", nargs=argparse.REMAINDER)
    args = p.parse_args()
    harness = [a for a in args.harness if a != "--"]
    runs = []
    for i in range(args.pairs):
        for is_traced in ((False, True) if i % 2 == 0 else (True, False)):  # alternate the order
            with tempfile.TemporaryDirectory() as work:
                runs.append(one(is_traced, harness, work, dict(kv.split("=", 1) for kv in args.tracer_env)))
            print(json.dumps(runs[-1]), file=sys.stderr)
    plain = [r["step_time_ms_median"] for r in runs if not r["traced"]]
    traced = [r["step_time_ms_median"] for r in runs if r["traced"]]
    overhead = 100.0 * (statistics.median(traced) / statistics.median(plain) - 1.0)
    print(
        json.dumps(
            {
                "harness_args": harness,
                "tracer_env": args.tracer_env,
                "runs": runs,
                "plain_step_ms_median": statistics.median(plain),
                "traced_step_ms_median": statistics.median(traced),
                "overhead_pct": round(overhead, 2),
                "target_pct": 5.0,
                "met": overhead <= 5.0,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
