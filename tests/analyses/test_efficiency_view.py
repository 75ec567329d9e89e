"""The operator-efficiency section as a user reads it (reports/views/efficiency.py): when the traces carry no
shapes, the lightweight profile's kernel traces (the embedded tracer's CSVs) name what they cannot tell and how to
get it, a Kineto trace without shapes says how to record them, CPU operators (no GPU) with shapes get the CPU
table; with several traces each row names its process."""

from __future__ import annotations

import json

from madengine_rocprof.cli import main

from .test_idle_report import tracer_csvs, unpacked_run
from .trace_frames import FIXTURES

SECTION = "### Operator efficiency (roofline from shapes)"


def report(path, tmp_path, capsys) -> tuple[str, dict]:
    out = tmp_path / "r.json"
    assert main(["report", str(path), "--json", str(out)]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())["runs"][0]


def test_lightweight_kernel_traces_say_what_they_cannot_tell(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for name, run_dir in (("kernels only", tracer_csvs(tmp_path / "a", api=False)),
                          ("CUPTI with API calls", unpacked_run(tmp_path / "b", "ours_h100_v1_1gpu_api"))):
        text, run = report(run_dir, tmp_path, capsys)
        assert run["efficiency"] is None, name
        part = text[text.index(SECTION):]
        assert "Not available from kernel traces (rocprofv3-csv)" in part, name
        for what in ("FLOPs and bytes", "TFLOP/s", "compute- or memory-bound", "`lightweight` profile",
                     "record_shapes=True", "escalate"):
            assert what in part, (name, what)
    assert run["idle_causes"]["bound"]["bound"] == "launch"  # the CUPTI run's idle split works without shapes


def test_kineto_without_shapes_and_cpu_operators(tmp_path, capsys):
    text, run = report(FIXTURES / "kineto" / "tracelens_mi210_gpu_only", tmp_path, capsys)
    assert run["efficiency"] is None and "the trace records no operator shapes" in text
    # CPU operators only, with shapes: the operators are the work (analyses/tracer_shapes.py); none of HTA's has a
    # model (gloo all_reduce, ProfilerStep, empty), so the table is empty and every one is listed with its time
    text, run = report(FIXTURES / "kineto" / "hta_cpu_only", tmp_path, capsys)
    eff = run["efficiency"]
    assert run["summary"]["cpu_operators"] and eff["cpu_operators"] and eff["rows"] == []
    assert eff["coverage_pct"] == 0 and sum(u["time_ns"] for u in eff["unmodelled"]) == eff["kernel_ns"] > 0
    assert "| operator without a model | shapes | calls | CPU ms |" in text[text.index(SECTION):]


def test_several_traces_name_the_process_of_each_row(tmp_path, capsys):
    """HTA's two-rank trace: the same (operator, shape) is one row per rank; without a process column the two rows
    read as one row printed twice."""
    text, run = report(FIXTURES / "kineto" / "hta_two_ranks", tmp_path, capsys)
    part = text[text.index(SECTION):]
    rows = run["efficiency"]["rows"]
    assert len({r["origin"] for r in rows}) == 2
    assert "| operator | process | shapes | dtype |" in part
    assert "| operator without a model | process | shapes |" in part
    first = rows[0]
    assert f"| {first['op']} | {first['origin']} |" in part
    text, run = report(FIXTURES / "kineto" / "ours_h100_gemm", tmp_path, capsys)
    assert "| operator | shapes | dtype |" in text and "| process |" not in text[text.index(SECTION):]
