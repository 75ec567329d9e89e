"""Operator shapes from the embedded tracer (MADENGINE_ROCPROF_TRACER_SHAPES=1) and the report's efficiency table
on them: a CPU torch workload traced under the wrapper (a few seconds each), a GPU trace of ours laid out as the
tracer lays out its files, and the setting's checks. FLOPs and times are computed here from the shapes and from the
Kineto JSON the tracer kept, not taken from the report."""
from __future__ import annotations

import decimal
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.reports.analyses import tracer_shapes
from madengine_rocprof.reports.cpu_ops import operator_stats
from madengine_rocprof.reports.views.efficiency import NO_SHAPES_CPU, SHAPES_FLAG
from madengine_rocprof.tracer import convert

from .reports_builders import exact_union

pytest.importorskip("torch")

M, K, N, OUT, B, BM, BK, BN = 64, 48, 32, 40, 4, 16, 24, 8
WORKLOAD = f"""
import torch
torch.manual_seed(0)
a, b = torch.randn({M}, {K}), torch.randn({K}, {N})
w, bias = torch.randn({OUT}, {K}), torch.randn({OUT})
x, y = torch.randn({B}, {BM}, {BK}), torch.randn({B}, {BK}, {BN})
for _ in range(3):
    torch.mm(a, b)
    torch.nn.functional.linear(a, w, bias)
    torch.matmul(a, b)
    torch.bmm(x, y)
print("APP DONE")
"""
SECTION = "### Operator efficiency (roofline from shapes)"


def traced(run_dir: Path, repo: Path, **settings: str) -> subprocess.CompletedProcess:
    run_dir.mkdir(parents=True)
    script = run_dir / "work.py"
    script.write_text(WORKLOAD)
    env = dict(os.environ, PYTHONPATH=str(repo), CUDA_VISIBLE_DEVICES="",
               **{f"MADENGINE_ROCPROF_TRACER_{k}": v for k, v in settings.items()})
    return subprocess.run([sys.executable, "-m", "madengine_rocprof.wrapper", "--profiler", "embedded",
                           "--kernel-trace", "--stats", "-d", str(run_dir / "profiler"), "--", sys.executable,
                           str(script)], cwd=run_dir, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def shapes_run(tmp_path_factory, repo) -> Path:
    run_dir = tmp_path_factory.mktemp("shapes") / "run"
    done = traced(run_dir, repo, SHAPES="1")
    assert done.returncode == 0 and "APP DONE" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    return run_dir


def report(run_dir: Path, tmp_path: Path, capsys) -> tuple[str, dict]:
    out = tmp_path / "r.json"
    assert main(["report", str(run_dir), "--json", str(out)]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())["runs"][0]


def kept_events(run_dir: Path) -> list[dict]:
    (path,) = run_dir.glob("profiler/*/*_perfetto_trace.json")
    data = json.loads(path.read_text(), parse_float=decimal.Decimal)
    return [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]


def ns(us) -> int:
    return int(decimal.Decimal(us) * 1000)


def test_cpu_workload_with_shapes_gives_its_matmuls_flops_and_times(shapes_run, tmp_path, capsys):
    text, run = report(shapes_run, tmp_path, capsys)
    eff = run["efficiency"]
    assert eff["cpu_operators"] is True and eff["device"] == "CPU"
    rows = {(r["op"], json.dumps(r["input_dims"])): r for r in eff["rows"]}
    mm = rows[("aten::mm", json.dumps([[M, K], [K, N]]))]
    assert mm["flops"] == 2 * M * N * K and mm["bytes"] == 4 * (M * K + K * N + M * N)
    assert mm["count"] == 6  # three torch.mm calls and the three aten::mm that torch.matmul dispatches to
    addmm = rows[("aten::addmm", json.dumps([[OUT], [M, K], [K, OUT], [], []]))]
    assert addmm["flops"] == 2 * M * OUT * K + M * OUT and addmm["count"] == 3  # F.linear with a bias
    bmm = rows[("aten::bmm", json.dumps([[B, BM, BK], [B, BK, BN]]))]
    assert bmm["flops"] == B * 2 * BM * BN * BK and bmm["count"] == 3
    # linear and matmul hand their GEMM to addmm and mm: no row of their own, their own time listed without a model
    assert not any(r["op"] in ("aten::linear", "aten::matmul") for r in eff["rows"])
    assert {u["op"] for u in eff["unmodelled"]} >= {"aten::linear", "aten::matmul"}

    # times from the JSON the tracer kept: aten::mm and aten::bmm call nothing with a model (resolve_conj), so each
    # call's time is its whole duration; every instant in an operator is counted once over rows and unmodelled
    events = kept_events(shapes_run)
    for row, name in ((mm, "aten::mm"), (bmm, "aten::bmm")):
        assert row["time_ns"] == sum(ns(e["dur"]) for e in events if e["name"] == name)
        assert row["tflops"] == pytest.approx(row["flops"] * row["count"] / row["time_ns"] / 1e3, rel=1e-12)
    threads: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        threads.setdefault(e["tid"], []).append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    busy = sum(exact_union(i) for i in threads.values())
    assert eff["kernel_ns"] == busy == sum(r["time_ns"] for r in eff["rows"]) + sum(
        u["time_ns"] for u in eff["unmodelled"])

    part = text[text.index(SECTION):]
    assert "| aten::mm | 64x48 48x32 | fp32 | 6 |" in part and "CPU ms" in part and "GPU ms" not in part
    # the kernel numbers are the CSV's: the kept JSON is read for the shapes only, never counted again
    manifest = json.loads((shapes_run / "profiler" / "manifest.json").read_text())
    assert [s["format"] for s in run["sources"]] == ["rocprofv3-csv"]
    assert run["summary"]["dispatches"] == manifest["dispatch_count"] == len(events)
    (summary,) = shapes_run.glob("profiler/*/*_tracer_summary.json")
    assert json.loads(summary.read_text())["record_shapes"] is True


def test_without_the_setting_the_report_says_what_it_cannot_tell(tmp_path, repo, capsys):
    done = traced(tmp_path / "plain", repo)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not any("Input Dims" in json.dumps(e.get("args")) for e in kept_events(tmp_path / "plain"))
    (summary,) = (tmp_path / "plain").glob("profiler/*/*_tracer_summary.json")
    assert json.loads(summary.read_text())["record_shapes"] is False
    text, run = report(tmp_path / "plain", tmp_path, capsys)
    assert run["efficiency"] is None and run["summary"]["cpu_operators"]
    part = text[text.index(SECTION):]
    assert NO_SHAPES_CPU in part and SHAPES_FLAG in part and "FLOPs and bytes" in part


@pytest.mark.parametrize("settings,named", [({"SHAPES": "maybe"}, "SHAPES"),
                                            ({"SHAPES": "1", "BACKEND": "cupti"}, "SHAPES")])
def test_a_bad_setting_is_refused_before_the_app_runs(tmp_path, repo, settings, named):
    done = traced(tmp_path / "bad", repo, **settings)
    assert done.returncode == 2, done.stderr
    assert f"MADENGINE_ROCPROF_TRACER_{named}" in done.stderr and "fix:" in done.stderr
    assert "Traceback" not in done.stderr and "APP DONE" not in done.stdout
    assert not (tmp_path / "bad" / "profiler").exists()


def test_gpu_trace_kept_beside_its_csv_gives_the_table_once(tmp_path, capsys, repo):
    """A GPU Kineto trace with shapes (ours, H100), laid out as the tracer writes it: <pid>_perfetto_trace.json and
    the <pid>_kernel_trace.csv converted from it. The efficiency table is the one the trace alone gives, and the
    kernels are counted once, from the CSV."""
    source = repo / "tests/fixtures/kineto/ours_h100_gemm/gemm_shapes.pt.trace.json.gz"
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "t.pt.trace.json").write_bytes(gzip.decompress(source.read_bytes()))
    host = tmp_path / "tracer" / "profiler" / "vm"
    host.mkdir(parents=True)
    kept = host / "4242_perfetto_trace.json"
    kept.write_bytes((alone / "t.pt.trace.json").read_bytes())
    written, kernels = convert.write_trace_file(str(kept), str(host), "4242_", cpu=False)
    assert kernels > 0 and str(host / "4242_kernel_trace.csv") in written
    _, expected = report(alone, tmp_path, capsys)
    text, run = report(tmp_path / "tracer", tmp_path, capsys)
    assert [s["format"] for s in run["sources"]] == ["rocprofv3-csv"]
    assert run["summary"]["dispatches"] == expected["summary"]["dispatches"] == kernels
    assert run["efficiency"]["rows"] and run["efficiency"]["rows"] == expected["efficiency"]["rows"]
    assert run["efficiency"]["kernel_ns"] == expected["efficiency"]["kernel_ns"]
    assert "GPU ms" in text[text.index(SECTION):]


def test_a_kept_trace_without_shapes_is_not_read_for_them(tmp_path):
    path = tmp_path / "1_perfetto_trace.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {}}]}')
    assert not tracer_shapes.records_shapes(path)
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "args": {"Input Dims": [[2, 3]]}}]}')
    assert tracer_shapes.records_shapes(path)
    (tmp_path / "empty.json").write_bytes(b"")
    assert not tracer_shapes.records_shapes(tmp_path / "empty.json")
    # the tracer's summary beside it says so first (no scan of a large GPU trace); a summary without the word (an
    # older tracer's) or one that cannot be read leaves it to the scan
    summary = tmp_path / "1_tracer_summary.json"
    assert tracer_shapes._said_by_tracer(path) is None
    for text, said in (('{"record_shapes": false}', False), ('{"record_shapes": true}', True),
                       ('{"backend": "torch"}', None), ("[1]", None), ("{", None), ('{"record_shapes": 1}', None)):
        summary.write_text(text)
        assert tracer_shapes._said_by_tracer(path) is said, text


def test_self_time_gives_each_instant_to_the_innermost_operator():
    # thread 1: A [0, 100) holds B [10, 40) holding C [20, 30), then D [50, 60); an op E [90, 120) overlapping A's
    # end without nesting; thread 2: F [5, 15) alone
    ops = pl.DataFrame({"op": [0, 1, 2, 3, 4, 5], "pid": [1] * 6, "tid": [1, 1, 1, 1, 1, 2],
                        "start": [0, 10, 20, 50, 90, 5], "end": [100, 40, 30, 60, 120, 15]},
                       schema={"op": pl.UInt32, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64,
                               "end": pl.Int64})
    pieces = sorted(tracer_shapes.self_time(ops).rows())
    assert pieces == [(0, 0, 10), (0, 40, 50), (0, 60, 90), (1, 10, 20), (1, 30, 40), (2, 20, 30), (3, 50, 60),
                      (4, 90, 120), (5, 5, 15)]
    # disjoint per thread and covering the union of the thread's operators
    assert sum(e - s for _, s, e in pieces) == exact_union([(0, 100), (90, 120)]) + 10
    # per op, the self time the report's CPU-operator table computes by its own sweep (reports/cpu_ops.py)
    own = operator_stats((str(op), tid, start, end) for op, _pid, tid, start, end in ops.rows())
    assert {str(op): sum(e - s for o, s, e in pieces if o == op) for op in range(6)} == \
        {name: k.self_ns for name, k in own.items()}


def test_the_setting_under_another_profiler_is_named_as_ignored(repo):
    from madengine_rocprof import wrapper

    fakes = repo / "tests" / "wrapper" / "fakes"
    env = {**os.environ, "PATH": f"{fakes}{os.pathsep}{os.environ['PATH']}", SHAPES_FLAG.split("=")[0]: "1"}
    plan = wrapper.plan(["--kernel-trace"], ["true"], "/tmp/out", profiler="rocprofv3", env=env)
    ignored = "MADENGINE_ROCPROF_TRACER_SHAPES applies to the embedded tracer only"
    assert any(m.startswith(ignored) for m in plan.messages)
    plan = wrapper.plan(["--kernel-trace"], ["true"], "/tmp/out", profiler="embedded", env=env)
    assert not any("MADENGINE_ROCPROF_TRACER_SHAPES" in m for m in plan.messages)


@pytest.mark.parametrize("backend", ["auto", "cupti"])
def test_on_a_cuda_gpu_shapes_take_torch_profiler_with_cpu_operators_and_their_links(monkeypatch, tmp_path, capsys,
                                                                                    backend):
    """CUPTI importable on a CUDA machine (the setting refused with BACKEND=cupti by the wrapper; set behind its back,
    a warning): the torch.profiler backend starts, with CPU operators, record_shapes and the external correlation
    that links kernels to operators (the default GPU trace turns that correlation off)."""
    import types

    import torch.profiler

    from madengine_rocprof.tracer import cupti_backend, runtime

    monkeypatch.setattr(cupti_backend, "load", lambda: pytest.fail("CUPTI must not be loaded for shapes"))
    made: list[dict] = []

    class Recording:  # stands in for torch.profiler.profile: keeps its arguments
        def __init__(self, **kwargs):
            made.append(kwargs)

        def start(self):
            pass

    monkeypatch.setattr(torch.profiler, "profile", Recording)
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_OUT", str(tmp_path))
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_SHAPES", "1")
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_BACKEND", backend)
    fake = types.SimpleNamespace(version=types.SimpleNamespace(cuda="13.0"),
                                 cuda=types.SimpleNamespace(is_available=lambda: True, synchronize=lambda: None))
    t = runtime._Tracer()
    t.start(fake)
    assert t.prof.name == "torch" and "SHAPES=1" in t.why
    (kwargs,) = made
    assert kwargs["record_shapes"] is True and "experimental_config" not in kwargs
    assert set(kwargs["activities"]) == {torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU}
    err = capsys.readouterr().err
    assert ("BACKEND=cupti ignored" in err) == (backend == "cupti")


def test_an_operator_that_hands_its_work_to_another_owns_no_time():
    """linear > addmm > copy_: linear hands its GEMM to addmm, addmm's copy_ is side work (another family);
    mul_ > _to_copy > copy_ (its scalar converted): side work, while _to_copy's work is its copy_; mul > mul (a
    Python scalar wrapped): the outer one hands its work to the inner."""
    f, s = '"float"', '"Scalar"'
    rows = [  # name, start, end, dims, types
        ("aten::linear", 0, 100, "[[4,8],[6,8],[6]]", f"[{f},{f},{f}]"),
        ("aten::addmm", 10, 90, "[[6],[4,8],[8,6],[],[]]", f"[{f},{f},{f},{s},{s}]"),
        ("aten::copy_", 20, 30, "[[4,6],[4,6],[]]", f"[{f},{f},{s}]"),
        ("aten::mul_", 200, 300, "[[64],[]]", f"[{f},{f}]"),
        ("aten::_to_copy", 210, 220, "[[],[],[],[],[],[],[]]", f"[{f},{s},{s},{s},{s},{s},{s}]"),
        ("aten::copy_", 212, 218, "[[],[],[]]", f"[{f},{f},{s}]"),
        ("aten::mul", 400, 500, "[[64],[]]", f"[{f},{s}]"),
        ("aten::mul", 410, 490, "[[64],[]]", f"[{f},{f}]"),
    ]
    ops = pl.DataFrame({"op": list(range(len(rows))), "name": [r[0] for r in rows], "pid": [1] * len(rows),
                        "tid": [1] * len(rows), "start": [r[1] for r in rows], "end": [r[2] for r in rows],
                        "input_dims": [r[3] for r in rows], "input_types": [r[4] for r in rows],
                        "input_strides": [None] * len(rows), "concrete_inputs": [None] * len(rows)},
                       schema_overrides={"op": pl.UInt32, "input_strides": pl.String, "concrete_inputs": pl.String})
    assert set(tracer_shapes._families(ops)) == set(range(len(rows)))  # every shape above fits its model
    assert tracer_shapes.dispatchers(ops) == {0, 4, 6}


def test_the_shipped_tracer_shapes_config_gives_the_table_through_run(tmp_path, repo, capsys):
    """`run` with profiling-configs/tracer_shapes.json (the embedded tracer, SHAPES=1, as the tool's env_vars) on
    TinyTransformer v1 on the CPU: its report has efficiency rows, its GEMMs' FLOPs from their shapes."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=str(repo), PYTHON=sys.executable, CUDA_VISIBLE_DEVICES="")
    env = {k: v for k, v in env.items() if not k.startswith("MADENGINE_ROCPROF_TRACER_")}
    done = subprocess.run([sys.executable, "-m", "madengine_rocprof", "run", "--tags", "tiny_llama_v1",
                           "--additional-context", '{"model_args": "--tiny --num-steps 2 --warmup-steps 1"}',
                           "--additional-context-file", "tracer_shapes", "--runner", "local", "--repo", str(repo),
                           "--output-dir", str(tmp_path / "runs")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").glob("tiny_llama_v1__*")
    _, run = report(run_dir, tmp_path, capsys)
    assert run["profiler"]["name"] == "embedded"
    gemms = [r for r in run["efficiency"]["rows"] if r["op"] == "aten::mm"]
    assert gemms
    for r in gemms:
        (m, k), (k2, n) = r["input_dims"][:2]
        assert k == k2 and r["flops"] == 2 * m * n * k
