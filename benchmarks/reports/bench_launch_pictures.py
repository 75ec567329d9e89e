"""What the kernel-launch pictures add to the launch analysis, on a synthetic 1M-launch stream (CPU seconds).

    .venv/bin/python benchmarks/reports/bench_launch_pictures.py [--rounds 7] [--before-ref main]

Alternates reports/analyses/launch.py `analyze` of this checkout with the same function of `--before-ref` (the file
taken with `git show`, run against this checkout's imports) over one table of 1M cudaLaunchKernel calls and kernels
on one stream (call every 1 us, GPU start 0.2-20 us later, seeded), and times the parts the pictures added: the delay
histogram, the stream summary (its slices' minimum is new) and the SVGs. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from madengine_rocprof.reports.analyses import launch, log_histogram  # noqa: E402
from madengine_rocprof.reports.views import launch_pictures  # noqa: E402

N = 1_000_000


def tables() -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = random.Random(7)
    calls = pl.Series([i * 1000 for i in range(N)], dtype=pl.Int64)
    starts = calls + pl.Series([rng.randint(200, 20_000) for _ in range(N)], dtype=pl.Int64)
    ids = pl.int_range(0, N, eager=True)
    kernels = pl.DataFrame({"device": [0] * N, "stream": [7] * N, "start": starts, "end": starts + 500,
                            "correlation": ids})
    runtime = pl.DataFrame({"name": ["cudaLaunchKernel"] * N, "start": calls, "end": calls + 100, "correlation": ids})
    return kernels, runtime


def cpu(f) -> float:
    began = time.process_time()
    f()
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before-ref", default="main")
    args = parser.parse_args()
    source = subprocess.run(["git", "show", f"{args.before_ref}:madengine_rocprof/reports/analyses/launch.py"],
                            cwd=ROOT, check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location("launch_before", fh.name)
    assert spec and spec.loader
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    Path(fh.name).unlink()
    kernels, runtime = tables()
    copies = kernels.clear()
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(cpu(lambda: launch.analyze(kernels, copies, runtime)))
        theirs.append(cpu(lambda: before.analyze(kernels, copies, runtime)))
    launched = launch.launches(kernels, copies, runtime)
    queues = launch.queue_series(launched)
    row = {"origin": "bench", "rank": 0} | (launch.analyze(kernels, copies, runtime) or {})
    parts = {
        "histogram_s": statistics.median(cpu(lambda: log_histogram.histogram(launched["delay"]))
                                         for _ in range(args.rounds)),
        "stream_summary_s": statistics.median(cpu(lambda: launch._stream_summary(queues)) for _ in range(args.rounds)),
        "pictures_s": statistics.median(cpu(lambda: launch_pictures.pictures([row])) for _ in range(args.rounds)),
    }
    print(json.dumps({
        "launches": N, "rounds": args.rounds, "before_ref": args.before_ref,
        "analyze_s": statistics.median(ours), "analyze_before_s": statistics.median(theirs),
        "added_s": statistics.median(a - b for a, b in zip(ours, theirs, strict=True)),
        "svg_bytes": sum(len(s) for s in launch_pictures.pictures([row])),
        "python": sys.version.split()[0], "polars": pl.__version__,
    } | {k: round(v, 4) for k, v in parts.items()}))


if __name__ == "__main__":
    main()
