"""Where in a traced window the overhead falls: for each step position k of the blocks in an
overhead_alternating.py result, the median over pairs of (traced step k / the pair's untraced block median) - 1.

    python3 benchmarks/wrapper/window_steps.py results/round9_call5/v1_b8s128_alternating/overhead_alternating.json
"""
from __future__ import annotations

import json
import statistics
import sys


def by_position(runs: list[dict]) -> list[float]:
    """Median overhead in percent of the traced block's 1st, 2nd, ... step."""
    per: list[list[float]] = []
    for run in runs:
        for pair in run["pairs"]:
            base = statistics.median(pair["untraced_ms"])
            for k, ms in enumerate(pair["traced_ms"]):
                if len(per) <= k:
                    per.append([])
                per[k].append(100 * (ms / base - 1))
    return [statistics.median(values) for values in per]


def main(path: str) -> int:
    with open(path) as fh:
        result = json.load(fh)
    for variant, runs in result["runs"].items():
        print(f"{variant:28s}", " ".join(f"{v:+6.1f}%" for v in by_position(runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
