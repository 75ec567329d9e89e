"""Lightweight-tracing overhead, side by side: runs the TinyTransformer harness alternately without a profiler and
under the wrapper's embedded tracer (profile lightweight), and compares the harness's median step time (device
events, warm-up excluded). The tracer records during every timed step; its file export happens at exit, outside
the timed steps (reported separately as the wall time difference).

    python3 benchmarks/wrapper/overhead.py --pairs 3 -- --version v1 --num-steps 30 > overhead.json
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

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one(traced: bool, harness_args: list[str], workdir: str, tracer_env: dict) -> dict:
    result_file = os.path.join(workdir, "result.json")
    app = [sys.executable, os.path.join(REPO, "scripts", "tinytransformer", "tt_harness.py"), *harness_args,
           "--json-out", result_file]
    env = dict(os.environ, PYTHONPATH=REPO)
    cmd = app
    if traced:
        env.update(tracer_env)
        cmd = [sys.executable, "-m", "madengine_rocprof.wrapper", "--profiler", "embedded", "--profile", "lightweight",
               "--kernel-trace", "--stats", "-d", os.path.join(workdir, "out"), "--", *app]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"run failed (traced={traced}): exit {done.returncode}")
    with open(result_file) as fh:
        res = json.load(fh)
    row = {"traced": traced, "wall_s": round(wall, 2), "step_time_ms_median": res["metrics"]["step_time_ms"]["median"],
           "tokens_per_second": res["metrics"]["tokens_per_second"]}
    if traced:
        with open(os.path.join(workdir, "out", "manifest.json")) as fh:
            m = json.load(fh)
        row.update(outcome=m["outcome"], dispatch_count=m["dispatch_count"])
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
        for traced in ((False, True) if i % 2 == 0 else (True, False)):  # alternate the order
            with tempfile.TemporaryDirectory() as work:
                runs.append(one(traced, harness, work, dict(kv.split("=", 1) for kv in args.tracer_env)))
            print(json.dumps(runs[-1]), file=sys.stderr)
    plain = [r["step_time_ms_median"] for r in runs if not r["traced"]]
    traced = [r["step_time_ms_median"] for r in runs if r["traced"]]
    overhead = 100.0 * (statistics.median(traced) / statistics.median(plain) - 1.0)
    print(json.dumps({"harness_args": harness, "tracer_env": args.tracer_env, "runs": runs, "plain_step_ms_median": statistics.median(plain),
                      "traced_step_ms_median": statistics.median(traced), "overhead_pct": round(overhead, 2),
                      "target_pct": 5.0, "met": overhead <= 5.0}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
