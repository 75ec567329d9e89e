"""Benchmark: `madengine-rocprof report` on a large PyTorch profiler (Kineto) trace, side by side with HTA.

Usage: python benchmarks/reports/bench_kineto.py [--from TRACE] [--kernels 1000000] [--synthetic --gpu-events N]
                                                 [--baseline CHECKOUT] [--runs 3] [--hta-python PY]
                                                 [--hta-runs N] [--work DIR] [--json FILE] [--out DIR]
As the `reports.kineto` case of `python -m benchmarks run`: `--rounds N` is --runs, `--out DIR` writes
DIR/results.jsonl (one line per variant: ours, and HTA when --hta-python or $MADENGINE_ROCPROF_HTA_PYTHON is set).

The trace (gzip) is generated once under --work by make_kineto_trace.py, which also returns the exact figures it
wrote: by default copies of a real trace (--from, our H200 TinyTransformer v1 trace: CPU operators, runtime calls,
flows and all, ~11 events per kernel) until it holds --kernels kernels (issue 33: the leaner synthetic trace,
--synthetic, has ~4 events per kernel and cost a third of the CPU). --baseline CHECKOUT (also
$MADENGINE_ROCPROF_BENCH_BASELINE) times another checkout's report on the same trace, alternating with ours: the
before/after of a change, one row each.
Each timed run is one fresh process, as a user runs it: ours is `python -m madengine_rocprof report DIR
--json --html -q`; HTA's (with --hta-python, a Python where HolisticTraceAnalysis is installed) loads the same
folder with TraceAnalysis and computes its kernel breakdown and temporal breakdown (what our report gives).
Runs alternate (ours, HTA, ours, HTA, ...) after one untimed run of ours that warms the page cache.
Every run of ours must give exactly the generator's kernel count and per-kernel total time, or the benchmark fails.
Prints and records wall time, CPU time (user + system, which the machine's load does not inflate) and peak RSS.
Targets (issues 24, 33): at most 10 s of CPU and 1 GiB for 1M kernels of a real trace; at least 5x faster than HTA.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import make_kineto_trace  # noqa: E402

TARGET_S, TARGET_MIB, TARGET_SPEEDUP = 10.0, 1024, 5.0
SOURCE = REPO / "tests" / "fixtures" / "kineto" / "ours_h200_tt_v1" / "tt_v1_b8s128.pt.trace.json.gz"
HTA_SCRIPT = """
import sys, warnings, logging
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
analyzer.get_gpu_kernel_breakdown(visualize=False)
analyzer.get_temporal_breakdown(visualize=False)
"""


def prepare(work: Path, gpu_events: int, source: Path | None = None) -> tuple[Path, dict]:
    """The trace and its expected figures: `gpu_events` synthetic events, or copies of `source` until it holds
    `gpu_events` kernels."""
    tag = f"kineto-{gpu_events}" if source is None else f"kineto-{source.name.split('.')[0]}-{gpu_events}"
    run_dir = work / tag
    expected_file = work / f"{tag}.expected.json"
    if expected_file.exists():
        return run_dir, json.loads(expected_file.read_text())
    if source is None:
        expected = make_kineto_trace.write(run_dir / "rank0.pt.trace.json.gz", gpu_events)
    else:
        expected = make_kineto_trace.replicate(source, run_dir / "rank0.pt.trace.json.gz", gpu_events)
    expected_file.write_text(json.dumps(expected))
    return run_dir, expected


def measure(cmd: list[str], env: dict | None = None, cwd: Path = REPO) -> dict:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one process; exits if it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err[-3000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024}


def ours(run_dir: Path, out: Path, expected: dict, checkout: Path = REPO, perfetto: bool = False) -> dict:
    extra = []
    if perfetto:  # the Perfetto JSON too (a fresh folder each run: an existing output is refused)
        shutil.rmtree(out / "pf", ignore_errors=True)
        extra = ["--perfetto", str(out / "pf")]
    result = measure([sys.executable, "-m", "madengine_rocprof", "report", str(run_dir), "--json",
                      str(out / "r.json"), "--html", str(out / "r.html"), *extra, "-q"], cwd=checkout)
    report = json.loads((out / "r.json").read_text())["runs"][0]
    got = {k["name"]: [k["calls"], k["total_ns"]] for k in report["kernels"]}
    if got != expected["kernels"] or report["summary"]["dispatches"] != expected["by_category"]["kernel"]:
        sys.exit("the report's kernels differ from what the generator wrote")
    return result


def summary(runs: list[dict], key: str) -> dict:
    values = [r[key] for r in runs]
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-events", "--kernels", type=int, default=1_000_000,
                        help="kernels of the replicated trace (GPU events of the synthetic one)")
    parser.add_argument("--from", dest="source", type=Path, default=SOURCE, help="the real trace replicated")
    parser.add_argument("--synthetic", action="store_true", help="the older synthetic trace (~4 events a kernel)")
    parser.add_argument("--baseline", type=Path, default=os.environ.get("MADENGINE_ROCPROF_BENCH_BASELINE"),
                        help="another checkout whose report is timed on the same trace, alternating with ours")
    parser.add_argument("--runs", "--rounds", type=int, default=3)
    parser.add_argument("--hta-python", default=os.environ.get("MADENGINE_ROCPROF_HTA_PYTHON"),
                        help="a Python with HolisticTraceAnalysis installed (side-by-side runs)")
    parser.add_argument("--hta-runs", type=int, help="HTA runs (default: --runs)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "madengine-rocprof-bench")
    parser.add_argument("--perfetto", action="store_true", help="every report writes --perfetto DIR as well")
    parser.add_argument("--json", type=Path, help="write the results here as well")
    parser.add_argument("--out", type=Path, help="write DIR/results.jsonl, one line per variant (benchmarks runner)")
    args = parser.parse_args()
    out = args.work / "out-kineto"
    out.mkdir(parents=True, exist_ok=True)
    run_dir, expected = prepare(args.work, args.gpu_events, None if args.synthetic else args.source)
    trace = next(run_dir.glob("*.json.gz"))
    load_start = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load_start[0]:.1f}; Python {platform.python_version()}; "
          f"trace {trace.stat().st_size / 2**20:.0f} MiB gzip, {expected['gpu_events']:,} GPU events")
    ours(run_dir, out, expected, perfetto=args.perfetto)  # warm the page cache
    mine: list[dict] = []
    before: list[dict] = []
    hta: list[dict] = []
    hta_runs = args.hta_runs if args.hta_runs is not None else args.runs
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1")
    for i in range(max(args.runs, hta_runs if args.hta_python else 0)):
        if i < args.runs:
            mine.append(ours(run_dir, out, expected, perfetto=args.perfetto))
            print(f"  ours: {mine[-1]}")
            if args.baseline:
                before.append(ours(run_dir, out, expected, args.baseline, perfetto=args.perfetto))
                print(f"  baseline: {before[-1]}")
        if args.hta_python and i < hta_runs:
            hta.append(measure([args.hta_python, "-c", HTA_SCRIPT, str(run_dir)], env=env))
            print(f"  HTA:  {hta[-1]}")
    result: dict = {
        "gpu_events": expected["gpu_events"],
        "trace": ("synthetic" if args.synthetic else f"{expected.get('copies')} copies of {args.source.name}, "
                  f"{expected.get('events', 0):,} events"),
        "events_by_category": expected["by_category"],
        "trace_gzip_mib": trace.stat().st_size / 2**20,
        "perfetto": args.perfetto,
        "ours": {key: summary(mine, key) for key in ("wall_s", "cpu_s", "peak_rss_mib")} | {"runs": mine},
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": {p: importlib.metadata.version(p) for p in ("polars", "msgspec", "isal")
                     if importlib.util.find_spec(p.replace("-", "_")) is not None},
        "load_average_at_start": load_start,
        "load_average_at_end": os.getloadavg(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if before:
        result["baseline"] = {key: summary(before, key) for key in ("wall_s", "cpu_s", "peak_rss_mib")} | {
            "runs": before, "checkout": str(args.baseline), "commit": subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=args.baseline, capture_output=True, text=True).stdout.strip()}
        print(f"baseline {args.baseline}: CPU median {result['baseline']['cpu_s']['median']:.2f} s, peak RSS "
              f"{result['baseline']['peak_rss_mib']['max']:.0f} MiB")
    median = result["ours"]["cpu_s"]["median"]
    met = median <= TARGET_S and result["ours"]["peak_rss_mib"]["max"] <= TARGET_MIB
    print(f"ours: wall median {result['ours']['wall_s']['median']:.2f} s, CPU median {median:.2f} s, peak RSS "
          f"{result['ours']['peak_rss_mib']['max']:.0f} MiB (target {TARGET_S} s, {TARGET_MIB} MiB): "
          + ("met" if met else "MISSED"))
    if hta:
        result["hta"] = {key: summary(hta, key) for key in ("wall_s", "cpu_s", "peak_rss_mib")} | {"runs": hta}
        result["hta_version"] = subprocess.run(
            [args.hta_python, "-c", "from importlib.metadata import version as v; "
             "print(v('HolisticTraceAnalysis'), v('pandas'))"], capture_output=True, text=True).stdout.split()
        speedup = {k: result["hta"][k]["median"] / result["ours"][k]["median"] for k in ("wall_s", "cpu_s")}
        result["speedup_vs_hta"] = speedup
        met &= speedup["wall_s"] >= TARGET_SPEEDUP
        print(f"HTA: wall median {result['hta']['wall_s']['median']:.2f} s, peak RSS "
              f"{result['hta']['peak_rss_mib']['max']:.0f} MiB; ours is {speedup['wall_s']:.1f}x faster (wall), "
              f"{speedup['cpu_s']:.1f}x (CPU); target {TARGET_SPEEDUP}x")
    result["met"] = met
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in json_lines(result)))
    return 0  # a missed target is a result (the rows' "targets met"), not a failed run


def json_lines(result: dict) -> list[dict]:
    """The benchmarks runner's lines (benchmarks/README.md): one per variant, figures by key suffix."""
    common = {"case": "reports.kineto", "versions": dict(result["versions"], python=result["python"]),
              "device": {"name": f"CPU only ({result['cpus']} cores)", "cpus": result["cpus"]},
              "commit": result.get("commit"), "date": result.get("date"), "command": result["command"],
              "details": {"gpu_events": result["gpu_events"], "events_by_category": result["events_by_category"],
                          "load_average": [result["load_average_at_start"][0], result["load_average_at_end"][0]],
                          "trace": result.get("trace")}}
    also = ", with --perfetto" if result.get("perfetto") else ""
    lines = [dict(common, variant=f"report, {result['gpu_events']:,} GPU events{also}",
                  wall_s=result["ours"]["wall_s"], cpu_s=result["ours"]["cpu_s"],
                  peak_rss_mib=result["ours"]["peak_rss_mib"]["max"],
                  checks={"kernels equal the generator's": "yes",
                          "targets met (10 s CPU, 1 GiB)": str(result["met"])})]
    if "baseline" in result:
        commit = result["baseline"]["commit"][:7]
        lines.append(dict(common, variant=f"before (commit {commit}), same trace{also}, alternating",
                          wall_s=result["baseline"]["wall_s"], cpu_s=result["baseline"]["cpu_s"],
                          peak_rss_mib=result["baseline"]["peak_rss_mib"]["max"],
                          checks={"kernels equal the generator's": "yes"}))
    if "hta" in result:
        lines.append(dict(common, variant=f"HTA {result['hta_version'][0]}, same trace, same run",
                          wall_s=result["hta"]["wall_s"], cpu_s=result["hta"]["cpu_s"],
                          peak_rss_mib=result["hta"]["peak_rss_mib"]["max"],
                          checks={"ours faster, wall (x)": round(result["speedup_vs_hta"]["wall_s"], 1)}))
    return lines


if __name__ == "__main__":
    sys.exit(main())
