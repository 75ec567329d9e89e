"""CPU cost of report analyses on synthetic worst cases (the analyses alone, no JSON reading).

Usage (from the checkout root):
    .venv/bin/python benchmarks/reports/bench_analyses.py efficiency [--calls N] [--kernels-per-call K]
    .venv/bin/python benchmarks/reports/bench_analyses.py launch-pictures [--rounds 7] [--before-ref main]
    .venv/bin/python benchmarks/reports/bench_analyses.py stages [--checkout DIR] RUN [report options, e.g. --json
        r.json --html r.html -q]

efficiency: builds the trace tables directly: N/2 `aten::linear` calls each enclosing an `aten::addmm` that launches
K back-to-back kernels (defaults: 250,000 operators, 1M kernels, as the 1M-GPU-event Kineto benchmark trace), seven
distinct shapes; times `efficiency.analyse` (process CPU time and wall) and checks its result exactly: every kernel
nanosecond goes to an addmm group, none to linear, and the groups' call counts add up.

launch-pictures: what the kernel-launch pictures add to the launch analysis, on a synthetic 1M-launch stream.
Alternates reports/analyses/launch.py `analyze` of this checkout with the same function of `--before-ref` (the file
taken with `git show`, run against this checkout's imports) over one table of 1M cudaLaunchKernel calls and kernels
on one stream (call every 1 us, GPU start 0.2-20 us later, seeded), and times the parts the pictures added: the delay
histogram, the stream summary (its slices' minimum is new) and the SVGs. Prints one JSON line.

stages: where one real `report` process spends its CPU and memory, the trace reader against everything after it.
Runs the report in a fresh process of `--checkout` (default: this one), as the CLI does, with each stage wrapped: the
Kineto reader (`kineto_reader._read`), the table frames (`TraceTables._frame`), the launch links and per-device
aggregation, each report analysis, and the writers. Prints per stage the process CPU seconds (user + system, all
threads: the figure the machine's load does not inflate), how often it ran, the peak and current RSS after it, and
the split: reader CPU against the rest (post-read). Stages nest (the analyses are inside `build_report`, frames are
built inside the analyses that first ask for them): their times do not add up.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from madengine_rocprof.insights.peaks import device_peak  # noqa: E402
from madengine_rocprof.reports.analyses import efficiency, launch, log_histogram  # noqa: E402
from madengine_rocprof.reports.views import launch_pictures  # noqa: E402

BF16 = '["c10::BFloat16","c10::BFloat16","c10::BFloat16","Scalar","Scalar"]'


def efficiency_tables(calls: int, per_call: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    shapes = [json.dumps([[512], [128 * (i + 1), 512], [512, 512], [], []], separators=(",", ":")) for i in range(7)]
    ops: dict[str, list] = {c: [] for c in ("name", "pid", "tid", "start", "end", "external_id", "input_dims",
                                            "input_types", "input_strides", "concrete_inputs")}
    gpu: dict[str, list] = {c: [] for c in ("name", "device", "stream", "start", "end", "correlation", "external_id")}
    t = total = 0
    for i in range(calls // 2):
        for j, (name, dur) in enumerate((("aten::linear", 100), ("aten::addmm", 80))):
            for column, value in (("name", name), ("pid", 1), ("tid", 1), ("start", t + j * 10),
                                  ("end", t + j * 10 + dur), ("external_id", 2 * i + j), ("input_dims", shapes[i % 7]),
                                  ("input_types", BF16), ("input_strides", None), ("concrete_inputs", None)):
                ops[column].append(value)
        for m in range(per_call):
            for column, value in (("name", "sm90_xmma_gemm_bf16"), ("device", 0), ("stream", 7),
                                  ("start", t * 10 + m * 100), ("end", t * 10 + m * 100 + 90), ("correlation", None),
                                  ("external_id", 2 * i + 1)):
                gpu[column].append(value)
            total += 90
        t += 200
    runtime = pl.DataFrame(schema={"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64,
                                   "end": pl.Int64, "correlation": pl.Int64, "external_id": pl.Int64})
    return pl.DataFrame(ops), runtime, pl.DataFrame(gpu), total


def efficiency_case(args: argparse.Namespace) -> int:
    cpu_ops, runtime, kernels, total = efficiency_tables(args.calls, args.kernels_per_call)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = efficiency.analyse(cpu_ops, runtime, kernels, device_peak("NVIDIA H100 80GB HBM3"), "H100")
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert result is not None
    assert {r["op"] for r in result["rows"]} == {"aten::addmm"} and not result["unmodelled"]
    assert sum(r["time_ns"] for r in result["rows"]) == total == result["modelled_kernel_ns"]
    assert sum(r["count"] for r in result["rows"]) == args.calls // 2
    print(json.dumps({"operators": cpu_ops.height, "kernels": kernels.height, "cpu_s": round(cpu, 3),
                      "wall_s": round(wall, 3), "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      // 1024}))
    return 0


N = 1_000_000


def launch_tables() -> tuple[pl.DataFrame, pl.DataFrame]:
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


def launch_pictures_case(args: argparse.Namespace) -> int:
    source = subprocess.run(["git", "show", f"{args.before_ref}:madengine_rocprof/reports/analyses/launch.py"],
                            cwd=ROOT, check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location("launch_before", fh.name)
    assert spec and spec.loader
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    Path(fh.name).unlink()
    kernels, runtime = launch_tables()
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
    return 0

STAGES_SCRIPT = r"""
import functools, os, resource, sys, time
sys.path.insert(0, sys.argv[1])


def rss_mib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


STAGES = {}  # label -> [cpu seconds, calls, peak MiB, RSS MiB after the last call]


def wrap(owner, name, label):
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            stage = STAGES.setdefault(label, [0.0, 0, 0.0, 0.0])
            stage[0] += time.process_time() - start
            stage[1] += 1
            stage[2] = max(stage[2], peak_mib())
            stage[3] = rss_mib()

    setattr(owner, name, timed)


begin = time.process_time()
from madengine_rocprof import cli
from madengine_rocprof.cli import report as cli_report
from madengine_rocprof.reports import analysis, dispatches, kineto_reader, multinode, trace_tables
from madengine_rocprof.reports.analyses import efficiency, idle, launch, run_efficiency

imported = time.process_time()
for owner, name, label in (
        (kineto_reader, "_read", "reader: kineto_reader._read"),
        (trace_tables.TraceTables, "_frame", "tables: TraceTables._frame (frames built)"),
        (dispatches, "launch_times", "links: dispatches.launch_times"),
        (dispatches, "aggregate", "aggregate: dispatches.aggregate"),
        (analysis, "timeline_rows", "analysis: timeline_rows"),
        (analysis, "collectives_of_run", "analysis: collectives"),
        (run_efficiency, "for_run", "analysis: efficiency"),
        (idle, "analyze_run", "analysis: idle"),
        (launch, "analyze_run", "analysis: launch"),
        (analysis, "per_rank", "analysis: per_rank"),
        (multinode, "analyze", "analysis: multinode"),
        (cli_report, "build_report", "build_report (all analyses)"),
        (cli_report.markdown, "render", "write: markdown.render"),
        (cli_report.html_page, "render", "write: html_page.render"),
        (cli_report, "write_json_to", "write: JSON")):
    wrap(owner, name, label)
status = cli.main(["report", *sys.argv[2:]])
end = time.process_time()
print(f"checkout {sys.argv[1]}; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
print(f"{'stage':45s} {'cpu_s':>7s} {'calls':>5s} {'peak_MiB':>8s} {'rss_MiB':>8s}")
for label, (cpu, calls, peak, rss) in STAGES.items():
    print(f"{label:45s} {cpu:7.2f} {calls:5d} {peak:8.0f} {rss:8.0f}")
reader = STAGES.get("reader: kineto_reader._read", [0.0])[0]
print(f"total {end - begin:.2f} s CPU (imports {imported - begin:.2f}, reader {reader:.2f}, post-read "
      f"{end - imported - reader:.2f}); peak RSS {peak_mib():.0f} MiB")
sys.exit(int(status or 0))
"""


def stages_case(args: argparse.Namespace) -> int:
    """One report process of `--checkout`, split by stage (STAGES_SCRIPT, a fresh interpreter)."""
    return subprocess.run([sys.executable, "-c", STAGES_SCRIPT, str(Path(args.checkout).resolve()), args.run,
                           *args.report_args], check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cases = parser.add_subparsers(dest="case", required=True)
    eff = cases.add_parser("efficiency", help="efficiency.analyse on 1M kernels of modelled GEMMs")
    eff.add_argument("--calls", type=int, default=250_000)
    eff.add_argument("--kernels-per-call", type=int, default=8)
    eff.set_defaults(run=efficiency_case)
    pictures = cases.add_parser("launch-pictures", help="what the launch pictures add to launch.analyze")
    pictures.add_argument("--rounds", type=int, default=7)
    pictures.add_argument("--before-ref", default="main")
    pictures.set_defaults(run=launch_pictures_case)
    stages = cases.add_parser("stages", help="one report process split by stage: reader against post-read")
    stages.add_argument("--checkout", default=str(ROOT), help="the checkout whose report is measured")
    stages.add_argument("run", help="the run folder (or trace) to report on")
    stages.add_argument("report_args", nargs=argparse.REMAINDER, help="report options (--json r.json -q ...)")
    stages.set_defaults(run_case=stages_case)
    args = parser.parse_args(argv)
    if args.case == "stages":
        return int(args.run_case(args))
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
