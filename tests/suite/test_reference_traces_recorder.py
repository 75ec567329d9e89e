"""The reference-trace recorder (benchmarks/multigpu/record_reference_traces.py) and the H100 data it recorded
(tests/fixtures/kineto/ours_h100_*, tests/fixtures/gpu_runs/ours_h100_*): its ncu handling checked against ncu's own
raw CSV read independently here, and the recorded traces checked for what the analyses rely on."""
from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECORDER = REPO / "benchmarks" / "multigpu" / "record_reference_traces.py"
_spec = importlib.util.spec_from_file_location("record_reference_traces", RECORDER)
assert _spec is not None and _spec.loader is not None
rec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rec)

KINETO = REPO / "tests" / "fixtures" / "kineto"
NCU_DIR = REPO / "tests" / "fixtures" / "gpu_runs" / "ours_h100_gemm_ncu"
QUERY = REPO / "benchmarks" / "multigpu" / "results" / "gemm_ncu_h100" / "ncu_query_metrics_h100.txt.gz"


def _raw_rows() -> list[dict[str, str]]:
    """ncu's raw page as written by `ncu --import --csv --page raw --print-units base`: header, units row, kernels."""
    text = gzip.decompress(NCU_DIR.joinpath("gemm_full_raw.csv.gz").read_bytes()).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    return rows[1:]  # the units row


def _int(text: str) -> int:
    return int(float(text.replace(",", ""))) if text.strip() else 0


def test_pick_metrics_on_the_h100_metric_list():
    query = gzip.decompress(QUERY.read_bytes()).decode()
    full = rec.pick_metrics(query)
    small = rec.pick_metrics(query, small=True)
    for wanted in ("gpu__time_duration.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
                   "sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
                   "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"):
        assert wanted in full
    assert set(small) < set(full)
    assert "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum" in small
    # only names ncu listed (plus the suffix) are asked for
    names = rec.metric_names(query)
    assert all(m.rsplit(".", 1)[0] in names or m.split(".")[0] in names for m in full)


def test_ncu_json_labels_each_gemm_and_counts_its_flops(tmp_path):
    raw = tmp_path / "raw.csv"
    raw.write_bytes(gzip.decompress(NCU_DIR.joinpath("gemm_full_raw.csv.gz").read_bytes()))
    data = rec.ncu_json(str(raw), str(NCU_DIR / "gemm_ops_ncu.json"))
    ops = json.loads(NCU_DIR.joinpath("gemm_ops_ncu.json").read_text())["ops"]
    assert data["markers_seen"] == len(ops) + 1
    # independent reading of ncu's CSV: kernels alternate marker (grid (1, 1, 1) fill), GEMM, marker, ...
    rows = _raw_rows()
    gemm_rows = [r for i, r in enumerate(rows) if i % 2 == 1]
    assert all("fill" in r["Kernel Name"].lower() for i, r in enumerate(rows) if i % 2 == 0)
    assert len(gemm_rows) == len(ops)
    tensor_cols = [c for c in rows[0] if re.fullmatch(r"sm__ops_path_tensor_src_[a-z0-9]+(_dst_[a-z0-9]+)?\.sum", c)]
    for op, row, got in zip(ops, gemm_rows, data["per_op"], strict=True):
        assert got["label"] == op["label"] and got["kernels"] == 1
        assert got["kernel_names"] == [row["Kernel Name"]]
        tensor = sum(_int(row[c]) for c in tensor_cols)
        ffma = _int(row["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"])
        assert got["tensor_flops"] == tensor
        assert got["fp32_pipe_flops"] >= 2 * ffma
        counted = got["tensor_flops"] + got["fp32_pipe_flops"]
        # the hardware does 2*M*N*K at least, plus padding of partial tiles (at most 1.6% here) and bias adds
        assert op["flops"] <= counted <= 1.016 * op["flops"], op["label"]
        if op["precision"] == "fp32":  # no TF32: all on the FP32 pipe
            assert tensor == 0
        else:
            assert tensor >= op["flops"]


@pytest.mark.parametrize("folder", ["ours_h100_ddp_v1_2rank", "ours_h100_fsdp_v1_2rank"])
def test_two_rank_traces_carry_ranks_and_matching_collectives(folder):
    per_rank = {}
    for path in sorted(KINETO.joinpath(folder).glob("*.json.gz")):
        trace = json.loads(gzip.decompress(path.read_bytes()))
        info = trace["distributedInfo"]
        assert info["world_size"] == 2 and info["backend"] == "nccl"
        assert path.name.endswith(f"_rank{info['rank']}.pt.trace.json.gz")
        comms = [e["args"] for e in trace["traceEvents"] if e.get("name") == "record_param_comms"]
        per_rank[info["rank"]] = sorted((a.get("Collective name"), a.get("In msg nelems"), a.get("Seq"))
                                        for a in comms)
        assert any("Input Dims" in e.get("args", {}) for e in trace["traceEvents"] if e.get("cat") == "cpu_op")
    assert sorted(per_rank) == [0, 1]
    assert per_rank[0] == per_rank[1] and per_rank[0]  # every collective on both ranks, same size and sequence


def test_gemm_trace_shapes_match_the_calls():
    trace = json.loads(gzip.decompress(KINETO.joinpath("ours_h100_gemm", "gemm_shapes.pt.trace.json.gz").read_bytes()))
    ops = json.loads(NCU_DIR.joinpath("gemm_ops_kineto.json").read_text())["ops"]
    events = trace["traceEvents"]
    labels = [e for e in events if e.get("cat") == "user_annotation"]
    aten = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm", "aten::bmm")]
    for op in ops:
        windows = [e for e in labels if e["name"] == op["label"]]
        assert len(windows) == 3
        for w in windows:
            inside = [e for e in aten if w["ts"] <= e["ts"] <= w["ts"] + w["dur"]]
            assert inside, op["label"]
            dims = inside[0]["args"]["Input Dims"]
            a, b = (dims[1], dims[2]) if inside[0]["name"] == "aten::addmm" else (dims[0], dims[1])
            m = a[-2] if op["op"] == "bmm" else (a[0] if len(a) == 2 else a[0] * a[1])
            assert (m, a[-1], b[-1]) == (op["M"], op["K"], op["N"]), op["label"]


def test_recorder_gemm_runs_on_cpu(tmp_path):
    done = subprocess.run([sys.executable, str(RECORDER),
                           "gemm", "--mode", "kineto", "--device", "cpu", "--reps", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ops = json.loads(tmp_path.joinpath("gemm_ops.json").read_text())
    assert ops["small"] and len(ops["ops"]) == len(rec.GEMMS) * len(rec.PRECISIONS)
    assert all(o["flops"] == 2 * o["batch"] * o["M"] * o["N"] * o["K"] for o in ops["ops"])
    assert tmp_path.joinpath("gemm_shapes.pt.trace.json.gz").stat().st_size > 0
