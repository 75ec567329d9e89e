"""What the gate's default run count can decide: its verdicts (passed / regression / inconclusive) simulated at the
run-to-run spreads of real repeated runs.

The spread is the standard deviation of log(median step time) between runs of the same config, measured per chunk
of repeated runs (each chunk: one stretch of time on the machine). For each spread and true slowdown, SIMS
comparisons of RUNS runs a side draw each run's value as exp(normal(log slowdown, spread)) and go through the gate's
own code (insights.compare: compare_metric, judge, gate_verdict; defaults: median, 95%, threshold 5%).

--drift D adds what independent draws leave out: the machine's load drifting while the runs are made. The runs are
made alternating (base, new, base, ...) and each adds a load level that moves by normal(0, D) from one run to the
next (a random walk on the log scale), so neighbouring runs share it.

    PYTHONPATH=. python benchmarks/insights/gate_power.py (--runs DIR ... | --spreads-from JSON) [--sims 2000]
        [--per-side 3] [--drift D] [--json FILE]
DIR: a folder of chunks (aa_gate.py's OUT, gate_runs.py's OUT): every workload_result.json below it, grouped by
chunk folder and config (its parent's name's `_A`/`_B` suffix, else its side folder `base`/`new`). JSON: an earlier
result of this script (its "spreads", measured on runs that are no longer kept).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from pathlib import Path

from madengine_rocprof.insights.compare import Settings, compare_metric, gate_verdict, judge

SLOWDOWNS = (1.0, 1.03, 1.05, 1.10, 1.25, 1.5, 2.0, 2.3)


def chunk_spreads(root: Path) -> list[float]:
    """sd of log(per-run median step time) of each group of runs of one config in one chunk (3 runs or more)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for result in sorted(root.rglob("workload_result.json")):
        run = result.parent
        steps = json.loads(result.read_text()).get("step_times_ms") or []
        if not steps:
            continue
        config = run.name.rsplit("_", 1)[-1] if "_" in run.name else run.parent.name
        chunk = run.parent.parent if run.parent.name in ("base", "new") else run.parent
        groups.setdefault((str(chunk), config), []).append(math.log(statistics.median(steps)))
    return [statistics.stdev(v) for v in groups.values() if len(v) >= 3]


def draw(spread: float, slowdown: float, per_side: int, drift: float, rng: random.Random) -> tuple[list, list]:
    """Each side's run values; with drift, runs alternate in time and share a load level that walks."""
    level = 0.0
    base: list[list[float]] = []
    new: list[list[float]] = []
    for i in range(2 * per_side):
        level += rng.gauss(0.0, drift) if drift and i else 0.0
        side, shift = (base, 0.0) if i % 2 == 0 else (new, math.log(slowdown))
        side.append([math.exp(level + rng.gauss(shift, spread))])
    return base, new


def simulate(spread: float, slowdown: float, per_side: int, sims: int, rng: random.Random,
             drift: float = 0.0) -> dict[str, float]:
    settings = Settings()
    counts = {"passed": 0, "regression": 0, "inconclusive": 0}
    for _ in range(sims):
        base, new = draw(spread, slowdown, per_side, drift, rng)
        rows = [compare_metric("step time", "step", "ms", base, new, settings)]
        judge(rows, settings)
        counts[gate_verdict(rows, settings, estimate_runs=False)["verdict"]] += 1
    return {k: round(100.0 * v / sims, 1) for k, v in counts.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=Path, action="append", default=[])
    p.add_argument("--spreads-from", type=Path, help="the spreads of an earlier result JSON of this script")
    p.add_argument("--drift", type=float, default=0.0, help="sd of the load level's step between runs (log scale)")
    p.add_argument("--sims", type=int, default=2000)
    p.add_argument("--per-side", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    spreads = sorted(s for root in args.runs for s in chunk_spreads(root))
    if args.spreads_from:
        spreads = sorted(spreads + json.loads(args.spreads_from.read_text())["spreads"])
    if not spreads:
        raise SystemExit("no chunk with 3 or more runs of one config")
    quartiles = statistics.quantiles(spreads, n=4) if len(spreads) > 1 else spreads * 3
    picks = {"smallest": spreads[0], "lower quartile": quartiles[0], "median": quartiles[1],
             "upper quartile": quartiles[2], "largest": spreads[-1]}
    rng = random.Random(args.seed)
    table = {name: {"spread": round(s, 4), **{f"{r:g}x": simulate(s, r, args.per_side, args.sims, rng, args.drift)
                                               for r in SLOWDOWNS}} for name, s in picks.items()}
    out = {"command": "python benchmarks/insights/gate_power.py " + " ".join(f"--runs {r}" for r in args.runs)
           + (f" --spreads-from {args.spreads_from}" if args.spreads_from else "")
           + f" --sims {args.sims} --per-side {args.per_side} --seed {args.seed} --drift {args.drift:g}",
        "chunks": len(spreads), "spreads": [round(s, 4) for s in spreads], "per_side": args.per_side,
        "sims": args.sims, "drift": args.drift, "table": table}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
