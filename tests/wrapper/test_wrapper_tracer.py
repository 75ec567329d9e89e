"""Embedded tracer: Kineto JSON -> rocprofv3 files (synthetic), and real CPU torch workloads run through the wrapper."""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from madengine_rocprof import wrapper
from madengine_rocprof.tracer import convert
from madengine_rocprof.wrapper import rocprof_csv

from .wrapper_testlib import REPO, manifest

pytest.importorskip("torch")


def read_csv(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


KINETO: dict[str, Any] = {
    "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 77, "ts": 9.0, "dur": 1.0,
         "args": {"correlation": 11}},
        {"ph": "X", "cat": "kernel", "name": "void gemm<float>(float*)", "pid": 0, "tid": 7, "ts": 20.5, "dur": 3.25,
         "args": {"device": 0, "stream": 7, "correlation": 11, "registers per thread": 64, "shared memory": 2048,
                  "grid": [4, 2, 1], "block": [128, 1, 1]}},
        {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 10.0, "dur": 1.0,
         "args": {"device": 1, "stream": 9, "correlation": 12, "grid": [1, 1, 1], "block": [32, 1, 1]}},
        {"ph": "X", "cat": "kernel", "name": "void gemm<float>(float*)", "pid": 0, "tid": 7, "ts": 30.0, "dur": 5.0,
         "args": {"device": 0, "stream": 7, "correlation": 13, "grid": [4, 2, 1], "block": [128, 1, 1]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 77, "ts": 8.0, "dur": 2.0, "args": {}},
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 1.0},
    ],
}


def test_kineto_kernels_become_rocprofv3_rows():
    rows = convert.kernel_rows(KINETO)
    trace = [dict(zip(rocprof_csv.KERNEL_TRACE, r, strict=True)) for r in rows]
    assert [t["Kernel_Name"] for t in trace] == ["relu_kernel", "void gemm<float>(float*)", "void gemm<float>(float*)"]
    gemm = trace[1]
    assert gemm["Start_Timestamp"] == KINETO["baseTimeNanoseconds"] + 20500
    assert gemm["End_Timestamp"] - gemm["Start_Timestamp"] == 3250
    assert (gemm["Grid_Size_X"], gemm["Grid_Size_Y"], gemm["Workgroup_Size_X"]) == (
        512,
        2,
        128,
    )  # work-items: grid x block
    assert (gemm["Thread_Id"], gemm["VGPR_Count"], gemm["LDS_Block_Size"], gemm["Agent_Id"]) == (
        77,
        64,
        2048,
        "Agent 0",
    )
    assert trace[0]["Agent_Id"] == "Agent 1"
    assert [t["Dispatch_Id"] for t in trace] == [1, 2, 3]
    assert trace[1]["Kernel_Id"] == trace[2]["Kernel_Id"] != trace[0]["Kernel_Id"]
    truncated = convert.kernel_rows(KINETO, truncate=True)
    assert {r[7] for r in truncated} == {"gemm", "relu_kernel"}


def test_stats_match_an_independent_computation():
    stats = {r[0]: r for r in convert.stats_rows(convert.kernel_rows(KINETO))}
    durs = [3250, 5000]
    name, calls, total, avg, pct, mn, mx, std = stats["void gemm<float>(float*)"]
    assert (calls, total, mn, mx) == (2, sum(durs), min(durs), max(durs))
    assert avg == pytest.approx(statistics.mean(durs))
    assert std == pytest.approx(statistics.stdev(durs))  # sample standard deviation, like rocprofv3
    assert pct == pytest.approx(100 * 8250 / (8250 + 1000), abs=0.01)
    assert rocprof_csv._cell(stats["relu_kernel"][7]) == "0.00000000e+00"


def test_truncate_name():
    assert (
        rocprof_csv.truncate_name("void at::native::vectorized_elementwise_kernel<4, at::native::Foo<float>>(int, Bar)")
        == "vectorized_elementwise_kernel"
    )
    assert rocprof_csv.truncate_name("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    # The two spellings seen on the H100 run (CUPTI vs ncu) truncate to the same function name.
    cupti = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 6, false, false>(float*, int, bool)"
    ncu = "void <unnamed>::softmax_warp_forward<float, float, float, 6, 0, 0>(T2 *, int, bool)"
    assert rocprof_csv.truncate_name(cupti) == rocprof_csv.truncate_name(ncu) == "softmax_warp_forward"


OPS_APP = """
import os, sys, time
import torch
open(sys.argv[1], "w").write(str(os.getpid()))
a = torch.randn(32, 32)
for _ in range(7):
    b = torch.mm(a, a)
for _ in range(3):
    torch.relu(b)
mode = sys.argv[2]
if mode == "raise":
    raise RuntimeError("workload failed")
if mode == "wait":
    open(sys.argv[1] + ".ready", "w").write("1")
    time.sleep(60)
"""


def run_embedded(tmp_path, mode, env_extra=None, args=(), app=None):
    script = tmp_path / "app.py"
    script.write_text(app or OPS_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MADENGINE_ROCPROF")}
    env.update(PATH="/usr/bin:/bin", **(env_extra or {}))
    return wrapper.run(["--kernel-trace", "--stats", *args], [sys.executable, str(script), str(tmp_path / "pid"), mode],
                       str(tmp_path / "out"), env=env, cwd=str(tmp_path))


def host_files(tmp_path) -> dict:
    folder = tmp_path / "out" / socket.gethostname()
    return {p.name: p for p in folder.iterdir()} if folder.exists() else {}


@pytest.mark.slow
def test_cpu_workload_kernel_counts_match_what_the_app_ran(tmp_path):
    result = run_embedded(tmp_path, "ok")
    assert (result.exit_code, result.outcome) == (0, "ok"), result.manifest
    pid = (tmp_path / "pid").read_text()
    files = host_files(tmp_path)
    assert set(files) == {f"{pid}_kernel_trace.csv", f"{pid}_kernel_stats.csv", f"{pid}_perfetto_trace.json",
                          f"{pid}_tracer_summary.json", f"{pid}_phase_markers.csv"}  # CPU mode: the phase markers
    assert result.manifest["tracer"]["backends"] == ["torch"]  # CPU: the torch.profiler backend
    assert result.manifest["tracer"]["dropped_records"] is None  # Kineto does not report drops
    trace = read_csv(files[f"{pid}_kernel_trace.csv"])
    assert list(trace[0]) == list(rocprof_csv.KERNEL_TRACE)
    stats = {r["Name"]: r for r in read_csv(files[f"{pid}_kernel_stats.csv"])}
    assert list(next(iter(stats.values()))) == list(rocprof_csv.STATS)
    assert stats["aten::mm"]["Calls"] == "7" and stats["aten::relu"]["Calls"] == "3"
    assert sum(int(r["Calls"]) for r in stats.values()) == len(trace) == result.manifest["dispatch_count"]
    perfetto = json.loads(files[f"{pid}_perfetto_trace.json"].read_text())
    assert sum(1 for e in perfetto["traceEvents"] if e.get("name") == "aten::mm") == 7
    env = result.manifest["env_added"]
    assert env["PYTHONPATH"].split(os.pathsep)[0].endswith(os.path.join("tracer", "inject"))


@pytest.mark.slow
def test_files_are_written_when_the_app_raises(tmp_path):
    result = run_embedded(tmp_path, "raise")
    assert (result.exit_code, result.outcome) == (1, "app_failed")
    stats = {
        r["Name"]: r for r in read_csv(next(p for n, p in host_files(tmp_path).items() if n.endswith("_stats.csv")))
    }
    assert stats["aten::mm"]["Calls"] == "7"


@pytest.mark.slow
def test_files_are_written_on_sigterm(tmp_path):
    script = tmp_path / "app.py"
    script.write_text(OPS_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MADENGINE_ROCPROF")}
    env.update(PATH="/usr/bin:/bin", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "madengine_rocprof.wrapper",
            "--profiler",
            "embedded",
            "--kernel-trace",
            "-d",
            "out",
            "--",
            sys.executable,
            str(script),
            str(tmp_path / "pid"),
            "wait",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ready = tmp_path / "pid.ready"
    deadline = time.time() + 120
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert ready.exists()
    proc.send_signal(signal.SIGTERM)  # to the wrapper, which forwards it to the app
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    m = manifest(tmp_path / "out")
    assert m["outcome"] == "app_failed" and m["dispatch_count"] and m["dispatch_count"] >= 10


STEPS_APP = """
import sys, torch
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    with torch.profiler.record_function(f"train_step_{step}"):
        loss = model(torch.randn(4, 8)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
"""


@pytest.mark.slow
def test_recording_window_in_optimizer_steps(tmp_path):
    result = run_embedded(tmp_path, "ok", {"MADENGINE_ROCPROF_TRACER_SKIP_STEPS": "2",
                                           "MADENGINE_ROCPROF_TRACER_STEPS": "2"}, app=STEPS_APP)
    assert result.outcome == "ok", result.manifest
    perfetto_file = next(p for n, p in host_files(tmp_path).items() if n.endswith("_perfetto_trace.json"))
    perfetto = json.loads(perfetto_file.read_text())
    names = {e.get("name") for e in perfetto["traceEvents"]}
    steps = sorted(n for n in names if str(n).startswith("train_step_"))
    # Recording starts after the 2nd optimizer step (inside train_step_1) and stops after 2 more steps.
    assert steps == ["train_step_2", "train_step_3"]


@pytest.mark.slow
def test_no_torch_means_no_files_and_existing_sitecustomize_still_runs(tmp_path):
    own = tmp_path / "own_site"
    own.mkdir()
    (own / "sitecustomize.py").write_text(f"open({str(tmp_path / 'own_ran')!r}, 'w').write('yes')\n")
    result = run_embedded(tmp_path, "ok", {"PYTHONPATH": str(own)}, app="print('no torch here')")
    assert result.outcome == "no_output" and result.manifest["outputs"] == []
    assert (tmp_path / "own_ran").read_text() == "yes"


TORCHRUN_APP = """
import os, torch
a = torch.randn(16, 16)
for _ in range(int(os.environ["RANK"]) + 2):
    torch.mm(a, a)
"""


@pytest.mark.slow
def test_torchrun_workers_get_per_rank_files_and_the_launcher_none(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    if not torchrun:
        pytest.skip("torchrun not installed")
    script = tmp_path / "app.py"
    script.write_text(TORCHRUN_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MADENGINE_ROCPROF")}
    env.update(PATH=f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", MADENGINE_ROCPROF_PROFILE="multi_gpu",
               OMP_NUM_THREADS="1")
    result = wrapper.run(["--kernel-trace"], [torchrun, "--standalone", "--nproc_per_node", "2", str(script)],
                         str(tmp_path / "out"), env=env, cwd=str(tmp_path))
    assert result.outcome == "ok", result.manifest
    stats = sorted(o["path"] for o in result.manifest["outputs"] if o["kind"] == "kernel_stats")
    assert [Path(p).name.split("_")[0] for p in stats] == ["rank0", "rank1"]
    for rank, path in enumerate(stats):
        rows = {r["Name"]: r for r in read_csv(tmp_path / "out" / path)}
        assert rows["aten::mm"]["Calls"] == str(rank + 2)


def test_gpu_activity_names_always_keep_kernels():
    from madengine_rocprof.tracer.runtime import gpu_activity_names

    assert gpu_activity_names("") == []
    assert gpu_activity_names(" cuda_runtime , GPU_MEMCPY,") == ["CONCURRENT_KERNEL", "CUDA_RUNTIME", "GPU_MEMCPY"]
    assert gpu_activity_names("CONCURRENT_KERNEL,GPU_MEMSET") == ["CONCURRENT_KERNEL", "GPU_MEMSET"]


@pytest.mark.slow
def test_gpu_filter_leaves_the_cpu_trace_whole(tmp_path, capfd):
    # On a CPU the GPU activity filter does not apply: same operators, no warning.
    result = run_embedded(tmp_path, "ok", {"MADENGINE_ROCPROF_TRACER_GPU_ACTIVITIES": "CUDA_RUNTIME"})
    assert (result.exit_code, result.outcome) == (0, "ok"), result.manifest
    pid = (tmp_path / "pid").read_text()
    stats = {r["Name"]: r for r in read_csv(host_files(tmp_path)[f"{pid}_kernel_stats.csv"])}
    assert stats["aten::mm"]["Calls"] == "7" and stats["aten::relu"]["Calls"] == "3"
    assert "warning" not in capfd.readouterr().err


SIGTERM_DURING_WRITE = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
os.environ["MADENGINE_ROCPROF_TRACER_OUT"] = sys.argv[2]
from madengine_rocprof.tracer import runtime

signal.signal(signal.SIGTERM, lambda n, f: print("app handler ran", flush=True))
t = runtime._Tracer()
t._catch_sigterm()

class FakeProfiler:
    def stop(self):
        pass

def slow_write():
    os.kill(os.getpid(), signal.SIGTERM)  # arrives while the trace is being written
    print("trace written", flush=True)

t.prof, t._write = FakeProfiler(), slow_write
t.finish()
print("exited normally", flush=True)
"""


def test_sigterm_while_the_trace_is_written_neither_hangs_nor_loses_it(tmp_path):
    done = subprocess.run([sys.executable, "-c", SIGTERM_DURING_WRITE, str(REPO), str(tmp_path)],
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["trace written", "app handler ran", "exited normally"]
