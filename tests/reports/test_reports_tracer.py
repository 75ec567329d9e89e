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
    assert {k["name"]: (k["calls"], k["total_ns"], k["min_ns"], k["max_ns"]) for k in run["kernels"]} == stats
    assert run["sources"][0]["format"] == "rocprofv3-csv"
    assert run["summary"]["cpu_operators"] is True
    manifest = json.loads((tracer_run / "profiler" / "manifest.json").read_text())
    assert run["summary"]["dispatches"] == manifest["dispatch_count"]
    assert run["profiler"]["name"] == "embedded"
    result = json.loads((tracer_run / "workload_result.json").read_text())
    assert run["workload"]["tokens_per_second"] == result["metrics"]["tokens_per_second"] > 0
    trace = json.loads((tmp_path / "pf" / f"{tracer_run.name}.perfetto.json").read_text())
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == run["summary"]["dispatches"]


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
    assert stats["summary"]["gpu_time_ns"] == full["summary"]["gpu_time_ns"]
    assert [k["name"] for k in stats["kernels"][:10]] == [k["name"] for k in full["kernels"][:10]]
