"""Where the time of reading a rocpd database goes: ways of getting rocpd_kernel_dispatch's 4 integer columns into
polars, each timed in a fresh process (wall time of the read only, imports excluded; peak RSS of the process).

Usage: python benchmarks/reports/rocpd_read_paths.py DB [--methods m1,m2,...] [--runs 3] [--json FILE]
Methods:
  scan          SQLite alone: SELECT count(*), sum(end - start) (stepping every row, no values to Python)
  tuples        Python sqlite3, fetchmany(100,000): one Python tuple of 4 ints per row (and the check's sum)
  sqlite3       tuples into polars, batch by batch (the reader before ADBC; today's fallback)
  adbc-1        ADBC's SQLite driver, one stream into polars (Arrow C stream interface)
  adbc-ranges   the reader: ADBC in id ranges, one thread each (sqlite_frames.read_columns)
  connectorx-1, connectorx-2   connectorx, one / two partitions on id (needs connectorx and pyarrow: not
                project dependencies; the method is skipped when they are not importable)
Every method must return the table's dispatch count and duration sum, or the script fails.
Make a database with make_rocpd.py (or use the one bench_report.py generates for rocpd-10m).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_report  # noqa: E402

METHODS = ["scan", "tuples", "sqlite3", "adbc-1", "adbc-ranges", "connectorx-1", "connectorx-2"]
QUERY = "SELECT kernel_id, agent_id, start, `end` FROM rocpd_kernel_dispatch"
COLUMNS = ["kernel_id", "agent_id", "start", "end"]


def run_method(method: str, db: Path) -> tuple[int, int]:
    """Read the columns one way; returns (rows, sum of end - start)."""
    import sqlite3

    import polars as pl

    from madengine_rocprof.reports import sqlite_frames

    con = sqlite3.connect(sqlite_frames.uri(db), uri=True)
    schema = {c: pl.Int64 for c in COLUMNS}
    if method == "scan":
        return con.execute("SELECT count(*), sum(`end` - start) FROM rocpd_kernel_dispatch").fetchone()
    if method == "tuples":
        cursor, rows, total = con.execute(QUERY), 0, 0
        while batch := cursor.fetchmany(sqlite_frames.BATCH):
            rows += len(batch)
            total += sum(b[3] - b[2] for b in batch)
        return rows, total
    if method == "sqlite3":
        frame = sqlite_frames.fetch_rows(con, QUERY, schema)
    elif method.startswith("adbc"):
        if method == "adbc-1":
            sqlite_frames.RANGE_ROWS = 1 << 62  # one range
        frame = sqlite_frames.read_columns(con, db, "rocpd_kernel_dispatch", COLUMNS[:3] + ["`end`"], schema, "id")
    else:
        connectorx = importlib.import_module("connectorx")  # optional, not a project dependency
        parts = int(method.rsplit("-", 1)[1])
        frame = connectorx.read_sql(
            f"sqlite://{db}",
            f"SELECT id, {', '.join(COLUMNS[:3])}, `end` FROM rocpd_kernel_dispatch",
            return_type="polars",
            **({"partition_on": "id", "partition_num": parts} if parts > 1 else {}),
        )
    return frame.height, int((frame["end"] - frame["start"]).sum())


def child(method: str, db: Path) -> None:
    sys.path.insert(0, str(REPO))
    import polars  # noqa: F401  (imports are not what is timed)

    from madengine_rocprof.reports import sqlite_frames  # noqa: F401

    if method.startswith("connectorx"):
        importlib.import_module("connectorx")
    start = time.perf_counter()
    rows, total = run_method(method, db)
    print(json.dumps({"wall_s": time.perf_counter() - start, "rows": rows, "total": total}))


def available_version(package: str) -> str | None:
    """The version of a package the child processes can import (PYTHONPATH included), else None."""
    probe = [sys.executable, "-c", f"import {package}; print({package}.__version__)"]
    done = subprocess.run(probe, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def available(method: str) -> bool:
    if not method.startswith("connectorx"):
        return True
    probe = [sys.executable, "-c", "import connectorx, pyarrow"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.db)
        return 0
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start; Python {platform.python_version()}")
    results, expected = [], None
    for method in args.methods.split(","):
        if not available(method):
            print(f"{method:>13}: skipped (not importable)")
            continue
        walls, peaks = [], []
        for _ in range(args.runs):
            cmd = [sys.executable, __file__, str(args.db), "--child", method]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            out = proc.stdout.read() if proc.stdout else ""
            _, status, usage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"{method} failed")
            got = json.loads(out)
            if expected is None:
                expected = (got["rows"], got["total"])
            if (got["rows"], got["total"]) != expected:
                sys.exit(f"{method}: {got['rows']} rows, sum {got['total']}; expected {expected}")
            walls.append(got["wall_s"])
            peaks.append(usage.ru_maxrss / 1024)
        summary = {"min": min(walls), "median": statistics.median(walls), "max": max(walls)}
        load = os.getloadavg()[0]
        results.append(
            {"method": method, "wall_s": summary, "peak_rss_mib": max(peaks), "load_average_1min_after": load}
        )
        print(
            f"{method:>13}: {summary['min']:.2f} / {summary['median']:.2f} / {summary['max']:.2f} s, "
            f"peak RSS {max(peaks):.0f} MiB (load {load:.1f}); {got['rows']:,} rows, sums checked"
        )
    if args.json:
        found = bench_report.versions() | {package: available_version(package) for package in ("connectorx", "pyarrow")}
        summary_doc = {"cpus": os.cpu_count(), "python": platform.python_version(), "versions": found}
        args.json.write_text(json.dumps(summary_doc | {"results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
