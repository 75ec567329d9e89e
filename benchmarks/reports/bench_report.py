"""Benchmark: `madengine-rocprof report` on large inputs, timed as a user runs it (one fresh process per run).

Usage: python benchmarks/reports/bench_report.py [--cases csv-1m,csv-10m,rocpd-10m,ranks-8x1m] [--runs 3]
                                                 [--work DIR] [--json FILE] [--sqlite-reader auto|stdlib]
                                                 [--baseline-ref REV]
Cases and targets (issue 11, on the 2-core development machine):
  csv-1m      one kernel_trace.csv, 1,000,000 dispatches            <= 1.5 s
  csv-10m     one kernel_trace.csv, 10,000,000 dispatches (~2 GB)   <= 10 s, peak RSS <= 1 GiB
  rocpd-10m   one rocpd results.db, 10,000,000 kernel dispatches    <= 10 s
  ranks-8x1m  8 ranks x 1,000,000 dispatches, one merged report     <= 15 s
Inputs are generated once under --work (make_kernel_trace.py, make_rocpd.py), with the sum of the durations they
wrote; every run's JSON report must give exactly that dispatch count and kernel time (the independent check), or
the benchmark fails. Each run writes Markdown (-q), JSON and HTML. Prints min/median/max wall time and the peak RSS
of the report process (after one untimed run that warms the page cache). Exit 1 if a target is missed.
--sqlite-reader stdlib times rocpd with the stdlib sqlite3 fallback (as without adbc-driver-sqlite).
--baseline-ref REV: the package as of git revision REV (`git archive`, under --work) runs alternately with this
checkout's, each --runs times (baseline, current, baseline, ...), and both CPU times (user + system of the report
process and its threads) are reported with their ratio: paired runs on one machine, as issue 33 measured the input
layer's cost (REV 0f60527^, the code before it).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import make_kernel_trace  # noqa: E402
import make_rocpd  # noqa: E402

# case -> (files to generate: (kind, relative path, dispatches, seed), target seconds, target peak MiB or None)
CASES = {
    "csv-1m": ([("csv", "bench-node/4242_kernel_trace.csv", 1_000_000, 0)], 1.5, None),
    "csv-10m": ([("csv", "bench-node/4242_kernel_trace.csv", 10_000_000, 0)], 10.0, 1024),
    "rocpd-10m": ([("rocpd", "bench-node/4242_results.db", 10_000_000, 0)], 10.0, None),
    "ranks-8x1m": (
        [("csv", f"bench-node/rank{r}_{4300 + r}_kernel_trace.csv", 1_000_000, r) for r in range(8)],
        15.0,
        None,
    ),
}


def prepare(work: Path, case: str) -> tuple[Path, int, int]:
    """The run directory, its dispatch count and the sum of its durations (generated once, kept in expected.json)."""
    run_dir = work / case
    expected = run_dir / "expected.json"
    if expected.exists():
        data = json.loads(expected.read_text())
        return run_dir, data["dispatches"], data["total_ns"]
    dispatches = total = 0
    for kind, rel, count, seed in CASES[case][0]:
        path = run_dir / rel
        if kind == "csv":
            _, written = make_kernel_trace.write(path, count, 120, seed, pid=int(path.name.split("_")[-3]))
        else:
            _, written = make_rocpd.write(path, count, 120, 1, seed)
        dispatches += count
        total += written
    expected.write_text(json.dumps({"dispatches": dispatches, "total_ns": total}))
    return run_dir, dispatches, total


# the report command with the rocpd reader's Arrow driver switched off
STDLIB_READER = (
    "import sys; from madengine_rocprof.reports import sqlite_frames; sqlite_frames.ARROW = False; "
    "from madengine_rocprof.cli import main; sys.exit(main())"
)


def measure(run_dir: Path, out: Path, sqlite_reader: str, code: Path = REPO) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MiB) and CPU seconds (user + system, every thread) of one report process, with the
    package found in CODE (the working directory comes first on sys.path)."""
    cmd = [
        sys.executable,
        *(["-m", "madengine_rocprof"] if sqlite_reader == "auto" else ["-c", STDLIB_READER]),
        "report",
        str(run_dir),
        "--json",
        str(out / "r.json"),
        "--html",
        str(out / "r.html"),
        "-q",
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"report failed on {run_dir}: {err}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def baseline_code(work: Path, ref: str) -> Path:
    """The package as of REF, extracted once under WORK (named by the commit it resolves to)."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    code = work / f"baseline-{commit[:12]}"
    if not (code / "madengine_rocprof").is_dir():
        code.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "madengine_rocprof"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    return code


def check_report(out: Path, case: str, dispatches: int, total: int) -> None:
    report = json.loads((out / "r.json").read_text())["runs"][0]["summary"]
    if (report["dispatches"], report["gpu_time_ns"]) != (dispatches, total):
        sys.exit(f"{case}: report says {report['dispatches']} dispatches, {report['gpu_time_ns']} ns; "
                 f"the generator wrote {dispatches}, {total} ns")


def versions() -> dict[str, str | None]:
    """Versions of the engines the report uses (None: not installed)."""
    found: dict[str, str | None] = {"sqlite": sqlite3.sqlite_version}
    for package in ("polars", "adbc-driver-sqlite", "adbc-driver-manager"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "madengine-rocprof-bench")
    parser.add_argument("--json", type=Path, help="write the results here as well")
    parser.add_argument("--sqlite-reader", choices=["auto", "stdlib"], default="auto")
    parser.add_argument("--baseline-ref", metavar="REV", help="alternate with the package as of git revision REV")
    args = parser.parse_args()
    baseline = baseline_code(args.work, args.baseline_ref) if args.baseline_ref else None
    out = args.work / "out"
    out.mkdir(parents=True, exist_ok=True)
    results, ok = [], True
    load_at_start = os.getloadavg()[0]
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load_at_start:.1f} at start; Python {platform.python_version()}"
    )
    for case in args.cases.split(","):
        run_dir, dispatches, total = prepare(args.work, case)
        target_s, target_mib = CASES[case][1:]
        measure(run_dir, out, args.sqlite_reader)  # warm the page cache: the benchmark times the report, not the disk
        walls, peaks, cpus, base_cpus = [], [], [], []
        for _ in range(args.runs):
            if baseline is not None:  # paired: the baseline right before each current run
                _, _, cpu = measure(run_dir, out, args.sqlite_reader, baseline)
                check_report(out, case, dispatches, total)
                base_cpus.append(cpu)
            wall, peak, cpu = measure(run_dir, out, args.sqlite_reader)
            check_report(out, case, dispatches, total)
            walls.append(wall)
            peaks.append(peak)
            cpus.append(cpu)
        size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file() and p.name != "expected.json")
        met = statistics.median(walls) <= target_s and (target_mib is None or max(peaks) <= target_mib)
        ok &= met
        results.append(
            {
                "case": case,
                "dispatches": dispatches,
                "input_mb": round(size / 1e6),
                "runs": len(walls),
                "wall_s": {"min": min(walls), "median": statistics.median(walls), "max": max(walls)},
                "cpu_s": {"min": min(cpus), "median": statistics.median(cpus), "max": max(cpus)},
                **({"baseline_ref": args.baseline_ref, "baseline_code": baseline.name,
                    "baseline_cpu_s": {"min": min(base_cpus), "median": statistics.median(base_cpus),
                                       "max": max(base_cpus)},
                    "cpu_ratio_of_medians": statistics.median(cpus) / statistics.median(base_cpus),
                    "cpu_ratio_median_of_pairs": statistics.median(c / b for c, b in zip(cpus, base_cpus,
                                                                                          strict=True))}
                   if baseline is not None else {}),
                "peak_rss_mib": max(peaks),
                "target_s": target_s,
                "target_peak_mib": target_mib,
                "met": met,
                "sqlite_reader": args.sqlite_reader if case.startswith("rocpd") else None,
                "load_average_1min_after": os.getloadavg()[0],
            }
        )
        print(
            f"{case:>11}: {dispatches:>11,} dispatches, {size / 1e6:,.0f} MB; wall min/median/max "
            f"{min(walls):.2f}/{statistics.median(walls):.2f}/{max(walls):.2f} s, peak RSS {max(peaks):.0f} MiB; "
            f"target {target_s} s"
            + (f", {target_mib} MiB" if target_mib else "")
            + (": met" if met else ": MISSED")
            + f" (load {os.getloadavg()[0]:.1f}); sums checked"
        )
        if baseline is not None:
            print(f"{case:>11}: CPU median {statistics.median(cpus):.2f} s, {args.baseline_ref} "
                  f"{statistics.median(base_cpus):.2f} s: {results[-1]['cpu_ratio_of_medians']:.3f}x "
                  f"(median of the {len(cpus)} pairs' ratios {results[-1]['cpu_ratio_median_of_pairs']:.3f}x)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "versions": versions(),
                    "load_average_1min_at_start": load_at_start,
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
