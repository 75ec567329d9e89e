"""Reports on real output of the embedded tracer: a CPU TinyTransformer v1 run under the wrapper (about 10 s)."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from madengine_rocprof.cli import main

from .reports_builders import exact_union

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tracer_run(tmp_path_factory, repo) -> Path:
    run_dir = tmp_path_factory.mktemp("tracer") / "tiny_llama_v1__embedded"
    run_dir.mkdir()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=str(repo), PYTHON=sys.executable)
    proc = subprocess.run(
        [sys.executable, "-m", "madengine_rocprof.wrapper", "--profiler", "embedded", "--kernel-trace", "--stats",
         "-d", str(run_dir / "profiler"), "--", "bash", str(repo / "scripts/tinytransformer/run.sh"),
         "--version", "v1", "--tiny", "--device", "cpu", "--num-steps", "3", "--warmup-steps", "1"],
        cwd=run_dir, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return run_dir


def stats_file(run_dir: Path) -> Path:
    (path,) = run_dir.glob("profiler/*/*_kernel_stats.csv")
    return path


def test_report_matches_the_tracers_own_stats(tracer_run, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["report", str(tracer_run), "--json", str(out), "--perfetto", str(tmp_path / "pf"), "-q"]) == 0
    run = json.loads(out.read_text())["runs"][0]
    # the tracer aggregates its own kernel_stats.csv; the report aggregates the kernel trace: they must agree
    with open(stats_file(tracer_run), newline="") as fh:
        stats = {
            r["Name"]: (int(r["Calls"]), int(r["TotalDurationNs"]), int(r["MinNs"]), int(r["MaxNs"]))
            for r in csv.DictReader(fh)
        }
    # calls, min and max are per call, as the tracer counts them; the tracer's total adds nested calls of one name
    # (aten::mul inside aten::mul) in full, the report counts such time once
    assert {k["name"]: (k["calls"], k["min_ns"], k["max_ns"]) for k in run["kernels"]} == {
        name: (calls, low, high) for name, (calls, _, low, high) in stats.items()
    }
    assert all(k["total_ns"] <= stats[k["name"]][1] for k in run["kernels"])
    assert any(k["total_ns"] < stats[k["name"]][1] for k in run["kernels"])  # TinyTransformer nests aten::mul
    assert run["sources"][0]["format"] == "rocprofv3-csv"
    assert run["summary"]["cpu_operators"] is True
    manifest = json.loads((tracer_run / "profiler" / "manifest.json").read_text())
    assert run["summary"]["dispatches"] == manifest["dispatch_count"]
    assert run["profiler"]["name"] == "embedded"
    result = json.loads((tracer_run / "workload_result.json").read_text())
    assert run["workload"]["tokens_per_second"] == result["metrics"]["tokens_per_second"] > 0
    trace = json.loads((tmp_path / "pf" / f"{tracer_run.name}.perfetto.json").read_text())
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == run["summary"]["dispatches"]


def test_cpu_operators_are_not_double_counted(tracer_run):
    """Inclusive time per name and self time, checked against an exact computation on the tracer's kernel trace."""
    from madengine_rocprof.reports import load_runs

    (trace,) = tracer_run.glob("profiler/*/*_kernel_trace.csv")
    calls: dict[tuple[str, str], list[tuple[int, int]]] = {}
    threads: dict[str, list[tuple[int, int]]] = {}
    with open(trace, newline="") as fh:
        for row in csv.DictReader(fh):
            interval = (int(row["Start_Timestamp"]), int(row["End_Timestamp"]))
            calls.setdefault((row["Kernel_Name"], row["Thread_Id"]), []).append(interval)
            threads.setdefault(row["Thread_Id"], []).append(interval)
    inclusive: dict[str, int] = {}
    for (name, _), intervals in calls.items():
        inclusive[name] = inclusive.get(name, 0) + exact_union(intervals)
    (run,) = load_runs([tracer_run])
    (source,) = run.timing
    assert source.cpu_operators and source.devices == []  # no device timeline for CPU operators
    assert {name: k.total_ns for name, k in source.kernels.items()} == inclusive
    # every instant a thread spends in an operator is the self time of exactly one operator
    assert sum(k.self_ns or 0 for k in source.kernels.values()) == sum(exact_union(i) for i in threads.values())
    assert all(0 <= (k.self_ns or 0) <= k.total_ns for k in source.kernels.values())


def test_stats_only_copy_of_the_tracer_run(tracer_run, tmp_path, capsys):
    """The same run with the kernel trace removed (a `--stats`-only tree) reports the same kernels."""
    only = tmp_path / "stats_only" / "vm"
    only.mkdir(parents=True)
    (only / stats_file(tracer_run).name).write_bytes(stats_file(tracer_run).read_bytes())
    out_full, out_stats = tmp_path / "full.json", tmp_path / "stats.json"
    assert main(["report", str(tracer_run), "--json", str(out_full), "-q"]) == 0
    assert main(["report", str(tmp_path / "stats_only"), "--json", str(out_stats), "-q"]) == 0
    full, stats = (json.loads(p.read_text())["runs"][0] for p in (out_full, out_stats))
    assert stats["summary"]["dispatches"] == full["summary"]["dispatches"]
    # a stats file cannot tell nested calls of one name apart: it counts them in full, the trace once
    assert stats["summary"]["gpu_time_ns"] > full["summary"]["gpu_time_ns"]
    assert {k["name"]: k["calls"] for k in stats["kernels"]} == {k["name"]: k["calls"] for k in full["kernels"]}
    full_total = {k["name"]: k["total_ns"] for k in full["kernels"]}
    assert all(k["total_ns"] >= full_total[k["name"]] for k in stats["kernels"])
