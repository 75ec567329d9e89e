"""benchmarks/tracer/product_path.py's bookkeeping, on CPU: the running order keeps an untraced neighbour beside
every traced run, overheads are taken against those neighbours, rows have the format `python -m benchmarks` reads;
and the tracer registers no per-step hook for a whole-run window."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from madengine_rocprof.tracer import runtime

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tracer" / "product_path.py"


@pytest.fixture(scope="module")
def pp():
    spec = importlib.util.spec_from_file_location("product_path", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["product_path"] = module
    spec.loader.exec_module(module)
    return module


def test_every_traced_run_has_an_untraced_neighbour_and_rounds_rotate(pp):
    args = pp.parse_args(["--out", "x", "--variants", "kernel_trace,torch,cupti_floor_kernel,v4_kernel_trace"])
    assert args.variants[:2] == ["v4_none", "none"]  # baselines added
    plan = pp.schedule(args.variants, 2, 2)
    names = [v for v, _ in plan]
    for i, v in enumerate(names):
        if pp.workload_base(v) == "none" and v != "none":
            assert "none" in names[:i] and "none" in names[i + 1:]
    for r in range(2):
        assert sorted(v for v, k in plan if k == r and v not in ("none", "v4_none")) == \
            sorted(["kernel_trace", "torch", "cupti_floor_kernel", "v4_kernel_trace"])
    firsts = [next(v for v, k in plan if k == r and v != "none") for r in range(2)]
    assert firsts[0] != firsts[1]
    with pytest.raises(SystemExit):
        pp.parse_args(["--out", "x", "--variants", "kernel_trace@base"])  # needs --base-repo


def test_overhead_is_taken_against_the_neighbouring_untraced_runs(pp):
    runs: list[dict] = [{"variant": "none", "step_ms": 20.0}, {"variant": "kernel_trace", "step_ms": 23.1},
            {"variant": "none", "step_ms": 22.0}, {"variant": "v4_kernel_trace", "step_ms": 1.02},
            {"variant": "v4_none", "step_ms": 1.0}, {"variant": "torch"}]  # torch failed: no figure
    pp.overheads(runs)
    assert runs[1]["overhead_pct"] == pytest.approx(10.0)  # 23.1 / mean(20, 22)
    assert runs[3]["overhead_pct"] == pytest.approx(2.0)
    assert "overhead_pct" not in runs[0] and "overhead_pct" not in runs[5]


def test_result_rows_have_the_benchmark_format(pp):
    args = pp.parse_args(["--out", "x", "--variants", "kernel_trace", "--rounds", "2"])
    runs = [{"variant": "none", "step_ms": 20.0, "full_write": False},
            {"variant": "kernel_trace", "step_ms": 22.0, "overhead_pct": 10.0, "full_write": False},
            {"variant": "none", "step_ms": 20.0, "full_write": True},
            {"variant": "kernel_trace", "step_ms": 24.0, "overhead_pct": 20.0, "full_write": True,
             "kernel_rows": 80878, "dropped_records": 0}]
    meta = {"device": "GPU", "versions": {"torch": "t"}, "commit": "abc", "date": "d"}
    rows = {r["case"]: r for r in pp.summarize(runs, args, meta)}
    row = rows["product_path/kernel_trace"]
    assert set(row) >= {"area", "case", "figures", "device", "versions", "commit", "command", "date"}
    assert row["area"] == "tracer"
    assert row["figures"] == {"step_ms": {"min": 22.0, "median": 23.0, "max": 24.0, "n": 2},
                              "overhead_pct": {"min": 10.0, "median": 15.0, "max": 20.0, "n": 2},
                              "overhead_best_pct": {"min": 10.0, "median": 10.0, "max": 10.0, "n": 1}}
    assert row["checks"] == {"kernel_rows": [80878], "dropped_records": [0]}  # from the run that wrote its trace
    assert row["command"].startswith("bash scripts/rocprof_wrapper.sh --profile lightweight --kernel-trace --stats"
                                     " --output-format csv -d OUT -o %hostname%/%pid% -- python3")
    assert rows["product_path/none"]["figures"]["overhead_pct"] is None


@pytest.mark.parametrize("env,needed", [({}, False), ({"MADENGINE_ROCPROF_TRACER_STEPS": "5"}, True),
                                        ({"MADENGINE_ROCPROF_TRACER_DELAY_S": "2"}, True),
                                        ({"MADENGINE_ROCPROF_TRACER_API": "1"}, True),  # the interposer refreshes
                                        ({"MADENGINE_ROCPROF_TRACER_API": "1",
                                          "MADENGINE_ROCPROF_TRACER_API_RECORDER": "activity"}, False)])
def test_a_whole_run_window_runs_no_python_per_step(monkeypatch, tmp_path, env, needed):
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_OUT", str(tmp_path))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert runtime._Tracer()._needs_step_hook() is needed


def test_best_over_best_takes_each_variants_fastest_process_per_call(pp):
    runs = [{"variant": "none", "step_ms": 20.0}, {"variant": "none", "step_ms": 30.0},  # a disturbed baseline
            {"variant": "kernel_trace", "step_ms": 23.0}, {"variant": "kernel_trace", "step_ms": 22.0},
            {"variant": "v4_none", "step_ms": 1.0}, {"variant": "v4_kernel_trace", "step_ms": 1.02},
            {"variant": "torch"}]  # failed: no figure
    best = pp.best_over_best(runs)
    assert best == pytest.approx({"kernel_trace": 10.0, "v4_kernel_trace": 2.0})


def test_pool_summarizes_calls_apart_and_refuses_mixed_machines(pp, tmp_path, capsys):
    meta = {"versions": {"torch": "t"}, "commit": "c", "date": "d"}
    lines = [{"call": "a", "device": "H100", **meta, "variant": "none", "step_ms": 20.0},
             {"call": "a", "device": "H100", **meta, "variant": "kernel_trace", "step_ms": 22.0},
             {"call": "a", "device": "H100", **meta, "variant": "none", "step_ms": 20.0},
             {"call": "b", "device": "H100", **meta, "variant": "none", "step_ms": 30.0},
             {"call": "b", "device": "H100", **meta, "variant": "kernel_trace", "step_ms": 36.0}]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert pp.main(["--pool", str(runs), "--out", str(tmp_path / "out")]) == 0
    rows = {json.loads(x)["case"]: json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()}
    best = rows["product_path/kernel_trace"]["figures"]["overhead_best_pct"]
    assert (best["min"], best["max"], best["n"]) == (10.0, 20.0, 2)  # 22/20 in call a, 36/30 in call b
    lines[-1]["device"] = "H200"
    runs.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert pp.main(["--pool", str(runs), "--out", str(tmp_path / "out2")]) == 2
    assert "different machines" in capsys.readouterr().err


def test_two_rank_variants_run_the_wrapper_around_torchrun_next_to_their_own_baseline(pp):
    args = pp.parse_args(["--out", "x", "--variants", "v4x2_multi_gpu,v4x2_torch"])
    assert args.variants[0] == "v4x2_none"  # its baseline added
    plan = pp.schedule(args.variants, 2, 3)
    for r in range(2):  # every round runs the 2-rank block once, the untraced run first or last
        block = [v for v, k in plan if k == r]
        assert sorted(block) == sorted(["v4x2_none", "v4x2_multi_gpu", "v4x2_torch"])
        assert "v4x2_none" in (block[0], block[-1])
    cmd, env = pp.command("v4x2_multi_gpu", args, "T", "J")
    torchrun = cmd.index("torch.distributed.run")
    assert cmd[:2] == ["bash", cmd[1]] and cmd[1].endswith("rocprof_wrapper.sh")
    assert cmd[torchrun + 1:torchrun + 4] == ["--standalone", "--nproc_per_node", "2"]
    assert cmd.index("--rccl-trace") < cmd.index("--") < torchrun  # the wrapper traces the launcher and its ranks
    assert "MADENGINE_ROCPROF_TRACER_BACKEND" not in env
    assert pp.command("v4x2_torch", args, "T", "J")[1]["MADENGINE_ROCPROF_TRACER_BACKEND"] == "torch"
    none_cmd, _ = pp.command("v4x2_none", args, "T", "J")
    assert "rocprof_wrapper.sh" not in " ".join(none_cmd) and "torch.distributed.run" in none_cmd


def test_per_rank_trace_files_are_counted_apart_by_kernel_name(pp, tmp_path):
    for rank, names in ((0, ["a", "b", "a"]), (1, ["a", "b"])):
        folder = tmp_path / "host"
        folder.mkdir(exist_ok=True)
        (folder / f"rank{rank}_{100 + rank}_kernel_trace.csv").write_text(
            "Kind,Kernel_Name,Start_Timestamp\n" + "".join(f"KERNEL_DISPATCH,{n},{i}\n" for i, n in enumerate(names)))
    counts = pp.trace_counts(str(tmp_path))
    assert counts["kernel_rows"] == 5
    assert counts["kernel_rows_per_file"] == {"host/rank0_100_kernel_trace.csv": 3,
                                              "host/rank1_101_kernel_trace.csv": 2}
    assert counts["kernels_by_name_per_file"]["host/rank0_100_kernel_trace.csv"] == {"a": 2, "b": 1}
