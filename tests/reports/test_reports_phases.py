"""Host time per training phase (forward / backward / optimizer / other) from the structure a trace has: the autograd
engine's evaluate_function ranges and the Optimizer.step / zero_grad / ProfilerStep record_function markers, which
the embedded tracer keeps beside its CPU rows (phase_markers.csv) without making them operators."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import build_report, load_runs, markdown, phases
from madengine_rocprof.tracer import convert

FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "kineto" / "ours_h200_tt_v1"
    / "tt_v1_b8s128.pt.trace.json.gz"
)
EVAL = "autograd::engine::evaluate_function: "


def test_phases_of_a_nested_step_exactly():
    # thread 1: forward linear > addmm; loss; backward node > mm; optimizer step > sqrt; zero_grad > fill_
    ops = [
        ("aten::linear", 1, 0, 100), ("aten::addmm", 1, 10, 90),  # forward: self 20 + 80
        ("aten::nll_loss", 1, 100, 130),  # forward (the loss): 30
        (EVAL + "MmBackward0", 1, 200, 300), ("MmBackward0", 1, 205, 295), ("aten::mm", 1, 210, 290),  # bwd: 100
        ("aten::sqrt", 1, 400, 440), ("aten::add_", 1, 440, 450),  # optimizer: 50
        ("aten::fill_", 1, 500, 505),  # zero_grad: other 5
        ("aten::randint", 1, 600, 610),  # outside the step: other 10
        ("aten::mul", 2, 250, 260),  # the engine's thread, outside evaluate_function: forward (inside the step)
    ]
    markers = [("ProfilerStep#3", 1, 0, 550), ("Optimizer.step#AdamW.step", 1, 390, 460),
               ("Optimizer.zero_grad#AdamW.zero_grad", 1, 495, 510)]
    got = phases.self_time_per_phase(ops, markers)
    assert got == {"forward": 140, "backward": 100, "optimizer": 50, "other": 15}
    # without step markers nothing is "outside the steps": the randint counts with the forward
    got = phases.self_time_per_phase(ops, markers[1:])
    assert got == {"forward": 150, "backward": 100, "optimizer": 50, "other": 5}


def _painted_phases(trace: dict) -> dict[str, int]:
    """An independent computation: on each thread, every elementary time segment belongs to the innermost operator
    covering it (operators painted outermost first); its phase is backward inside an evaluate_function range,
    optimizer inside Optimizer.step, other inside zero_grad or outside every ProfilerStep, else forward."""
    def ns(value) -> int:
        return int(Decimal(str(value)) * 1000)

    events = trace["traceEvents"]
    ops = [(e["tid"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in events if e.get("cat") == "cpu_op"]
    notes = [(e["tid"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in events
             if e.get("cat") == "user_annotation"]
    steps = [(s, t) for _, s, t, name in notes if name.startswith("ProfilerStep#")]
    totals = dict.fromkeys(phases.PHASES, 0)
    for thread in {t for t, *_ in ops}:
        mine = sorted((o for o in ops if o[0] == thread), key=lambda o: (o[1], -o[2]))
        edges = np.unique([x for _, s, t, _ in mine for x in (s, t)])
        inner = np.full(len(edges) - 1, -1)
        backward = np.zeros(len(edges) - 1, bool)
        for i, (_, s, t, name) in enumerate(mine):
            lo, hi = np.searchsorted(edges, s), np.searchsorted(edges, t)
            inner[lo:hi] = i
            if name.startswith(EVAL):
                backward[lo:hi] = True
        for k in np.nonzero(inner >= 0)[0]:
            start = mine[inner[k]][1]  # an operator's phase is decided where it starts
            if backward[k]:
                phase = "backward"
            elif any(s <= start < t for tid, s, t, n in notes if tid == thread and n.startswith("Optimizer.step#")):
                phase = "optimizer"
            elif any(s <= start < t for tid, s, t, n in notes if tid == thread and n.startswith("Optimizer.zero")) \
                    or (steps and not any(s <= start < t for s, t in steps)):
                phase = "other"
            else:
                phase = "forward"
            totals[phase] += int(edges[k + 1] - edges[k])
    return totals


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    """Our H200 trace of TinyTransformer v1 (34,630 CPU operators on two threads, 5 steps) through the tracer's CPU
    conversion, as the embedded tracer writes it without a GPU."""
    folder = tmp_path_factory.mktemp("run") / "host"
    folder.mkdir()
    trace = folder.parent / "trace.json"
    trace.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    convert.write_trace_file(str(trace), str(folder), "495_", cpu=True)
    trace.unlink()
    return folder.parent


def test_the_report_phases_equal_an_independent_computation_on_a_real_trace(converted):
    trace = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    expected = _painted_phases(trace)
    report = build_report(load_runs([converted]))
    summary = report["runs"][0]["summary"]
    assert summary["phases"]["self_ns"] == expected
    assert sum(expected.values()) == summary["gpu_time_ns"]  # the phases add up to the host self time
    assert expected["backward"] > 0 and expected["optimizer"] > 0 and expected["forward"] > 0
    text = markdown.render(report)
    assert "Host time per training phase (self time)" in text and "optimizer (Optimizer.step)" in text
    # the markers are no operators
    assert not [k for k in report["runs"][0]["kernels"] if k["name"].startswith(("Optimizer.", "ProfilerStep#"))]


@pytest.mark.parametrize("native", ["1", "0"])
def test_the_tracer_keeps_phase_markers_apart_from_operators(tmp_path, monkeypatch, native):
    """Native and Python converters write the same operators; the markers go to phase_markers.csv, in the kernel
    trace's time base, and into neither kernel_trace.csv nor kernel_stats.csv."""
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_NATIVE_ROWS", native)
    trace = tmp_path / "t.json"
    trace.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    written, _ = convert.write_trace_file(str(trace), str(tmp_path), "1_", cpu=True)
    assert [Path(w).name for w in written] == ["1_kernel_trace.csv", "1_kernel_stats.csv", "1_phase_markers.csv"]
    data = json.loads(trace.read_text())
    base = data["baseTimeNanoseconds"]
    expected = sorted(((e["name"], e["tid"], base + int(Decimal(str(e["ts"])) * 1000),
                        base + int(Decimal(str(e["ts"])) * 1000) + int(Decimal(str(e["dur"])) * 1000))
                       for e in data["traceEvents"] if e.get("cat") == "user_annotation"), key=lambda m: m[2])
    with open(tmp_path / "1_phase_markers.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == phases.MARKERS_HEADER
    assert [(n, int(t), int(s), int(e)) for n, t, s, e in rows[1:]] == expected
    assert len(expected) == 15  # 5 ProfilerStep, 5 zero_grad, 5 step
    for name in ("1_kernel_trace.csv", "1_kernel_stats.csv"):
        text = (tmp_path / name).read_text()
        assert "Optimizer.step#" not in text and "ProfilerStep#" not in text


def test_a_trace_without_markers_gets_an_empty_marker_file_and_a_dict_trace_too(tmp_path):
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 7, "ts": 1.0, "dur": 2.0},
        {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1, "tid": 7, "ts": 5.0,
         "dur": 1.5},
        {"ph": "X", "cat": "user_annotation", "name": "my_range", "pid": 1, "tid": 7, "ts": 5.0, "dur": 1.5},
    ]}
    written = convert.write_files(trace, str(tmp_path), "1_", cpu=True)
    assert Path(written[-1]).name == "1_phase_markers.csv"
    assert (tmp_path / "1_phase_markers.csv").read_text().splitlines()[1:] == ['"Optimizer.step#SGD.step",7,5000,6500']
    trace["traceEvents"] = trace["traceEvents"][:1]
    convert.write_files(trace, str(tmp_path), "2_", cpu=True)
    assert (tmp_path / "2_phase_markers.csv").read_text().splitlines() == [
        '"Name","Thread_Id","Start_Timestamp","End_Timestamp"']


def test_a_bad_marker_file_is_bad_input_named_by_line(converted, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(converted, run)
    (marker,) = run.glob("host/*_phase_markers.csv")
    marker.write_text('"Name","Thread_Id","Start_Timestamp","End_Timestamp"\n"ProfilerStep#1",1,10,x\n')
    with pytest.raises(UserError) as err:
        build_report(load_runs([run]))
    assert err.value.where == "line 2" and str(marker) in str(err.value.file)


def test_a_pytorch_profiler_trace_of_the_cpu_gets_the_same_phases(tmp_path):
    """`report my_torch_traces/` (the Kineto reader, no tracer in between): the same trace without its GPU events
    gives the phases of the independent computation, ProfilerStep and Optimizer ranges read from the trace."""
    trace = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation")]
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "w.pt.trace.json").write_text(json.dumps(trace))
    report = build_report(load_runs([tmp_path / "traces"]))
    summary = report["runs"][0]["summary"]
    assert summary["cpu_operators"] and summary["phases"]["steps_marked"]
    assert summary["phases"]["self_ns"] == _painted_phases(trace)
    assert sum(summary["phases"]["self_ns"].values()) == summary["gpu_time_ns"]


def test_markers_of_a_file_in_another_layout_come_through_the_json_parser(tmp_path):
    events = [{"name": "Optimizer.step#SGD.step", "cat": "user_annotation", "ph": "X", "ts": 5, "dur": 1.5, "tid": 7,
               "pid": 1},
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 7, "ts": 1.0,
               "dur": 9.0}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"baseTimeNanoseconds": 100, "traceEvents": events}))
    base, markers = convert.markers_of_file(str(path))
    assert (base, sorted(markers)) == (100, [("Optimizer.step#SGD.step", 7, 5000, 1500),
                                             ("ProfilerStep#2", 7, 1000, 9000)])
