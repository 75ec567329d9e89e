"""What the gate's default run count can decide: its verdicts (passed / regression / inconclusive) simulated at the
run-to-run spreads of real repeated runs.

The spread is the standard deviation of log(median step time) between runs of the same config, measured per chunk
of repeated runs (each chunk: one stretch of time on the machine). For each spread and true slowdown, SIMS
comparisons of RUNS runs a side draw each run's value as exp(normal(log slowdown, spread)) and go through the gate's
own code (insights.compare: compare_metric, judge, gate_verdict; defaults: median, 95%, threshold 5%).

    PYTHONPATH=. python benchmarks/insights/gate_power.py --runs DIR [--runs DIR ...] [--sims 2000] [--per-side 3]
        [--json FILE]
DIR: a folder of chunks (aa_gate.py's OUT, gate_runs.py's OUT): every workload_result.json below it, grouped by
chunk folder and config (its parent's name's `_A`/`_B` suffix, else its side folder `base`/`new`).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from pathlib import Path

from madengine_rocprof.insights.compare import Settings, compare_metric, gate_verdict, judge

SLOWDOWNS = (1.0, 1.03, 1.10, 1.25, 1.5, 2.0, 2.3)


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


def simulate(spread: float, slowdown: float, per_side: int, sims: int, rng: random.Random) -> dict[str, float]:
    settings = Settings()
    counts = {"passed": 0, "regression": 0, "inconclusive": 0}
    for _ in range(sims):
        base = [[math.exp(rng.gauss(0.0, spread))] for _ in range(per_side)]
        new = [[math.exp(rng.gauss(math.log(slowdown), spread))] for _ in range(per_side)]
        rows = [compare_metric("step time", "step", "ms", base, new, settings)]
        judge(rows, settings)
        counts[gate_verdict(rows, settings, estimate_runs=False)["verdict"]] += 1
    return {k: round(100.0 * v / sims, 1) for k, v in counts.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=Path, action="append", required=True)
    p.add_argument("--sims", type=int, default=2000)
    p.add_argument("--per-side", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    spreads = sorted(s for root in args.runs for s in chunk_spreads(root))
    if not spreads:
        raise SystemExit("no chunk with 3 or more runs of one config")
    picks = {"smallest": spreads[0], "median": statistics.median(spreads), "largest": spreads[-1]}
    rng = random.Random(args.seed)
    table = {name: {"spread": round(s, 4), **{f"{r:g}x": simulate(s, r, args.per_side, args.sims, rng)
                                               for r in SLOWDOWNS}} for name, s in picks.items()}
    out = {"command": "python benchmarks/insights/gate_power.py " + " ".join(
        f"--runs {r}" for r in args.runs) + f" --sims {args.sims} --per-side {args.per_side} --seed {args.seed}",
        "chunks": len(spreads), "spreads": [round(s, 4) for s in spreads], "per_side": args.per_side,
        "sims": args.sims, "table": table}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
