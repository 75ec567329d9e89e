"""Benchmark: `madengine-rocprof report` on a 1,000,000-dispatch kernel_trace.csv must finish in < 5 s, memory bounded.

Usage: python benchmarks/reports/bench_report.py [--dispatches N] [--work DIR] [--limit-s 5]
Generates the input (make_kernel_trace.py) unless it exists, then runs the CLI in a fresh process per size
(Markdown + JSON + HTML, as a user would) and reports wall time and the child's peak RSS. Memory is bounded
when peak RSS barely grows between a 100,000 and a 1,000,000 dispatch input. Exit 1 if the time limit is missed.
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
from make_kernel_trace import write  # noqa: E402


def measure(run_dir: Path, out: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one report process."""
    cmd = [sys.executable, "-m", "madengine_rocprof", "report", str(run_dir), "--json", str(out / "r.json"),
           "--html", str(out / "r.html"), "-q"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"report failed: {proc.stderr}")
    # ru_maxrss of the children waited for so far: the largest one; sizes run in increasing order
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "madengine-rocprof-bench")
    parser.add_argument("--limit-s", type=float, default=5.0)
    args = parser.parse_args()
    sizes = sorted({min(100_000, args.dispatches), args.dispatches})
    results = []
    for size in sizes:
        run_dir = args.work / f"trace_{size}"
        trace = run_dir / "bench-node" / "4242_kernel_trace.csv"
        if not trace.exists():
            write(trace, size, 120, 0)
        measure(run_dir, args.work)  # warm the page cache: the benchmark times parsing, not the disk
        wall, rss = measure(run_dir, args.work)
        results.append((size, wall, rss, trace.stat().st_size / 1e6))
        print(f"{size:>10,} dispatches ({results[-1][3]:.0f} MB CSV): {wall:.2f} s wall, peak RSS {rss:.0f} MiB")
    size, wall, rss, _ = results[-1]
    if len(results) > 1:
        print(f"peak RSS growth 100k -> {size:,}: {rss - results[0][2]:+.0f} MiB")
    ok = wall < args.limit_s
    print(("PASS" if ok else "FAIL") + f": {size:,} dispatches in {wall:.2f} s (limit {args.limit_s} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
