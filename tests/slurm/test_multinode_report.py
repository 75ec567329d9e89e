"""The report across ranks and nodes (reports/multinode.py) on a hand-made two-node run directory laid out as the
SLURM runner writes it: per node and per rank numbers, the straggler and its skew, communication share."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from madengine_rocprof.reports import build_report, load_runs, markdown

HEADER = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
          '"Correlation_Id","Start_Timestamp","End_Timestamp"')


def _trace(path: Path, kernels: list[tuple[str, int, int]]) -> None:
    """A rocprofv3 kernel trace: (name, start ns, duration ns) per dispatch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [HEADER] + [f'"KERNEL_DISPATCH",1,0,0,7,{i},{i},"{name}",{i},{start},{start + dur}'
                       for i, (name, start, dur) in enumerate(kernels, 1)]
    path.write_text("\n".join(rows) + "\n")


def _steps(path: Path, starts_us: list[float]) -> None:
    """The embedded tracer's Perfetto trace with optimizer-step annotations."""
    events = [
        {"name": "Optimizer.step#AdamW.step", "ph": "X", "ts": t, "dur": 5, "pid": 1, "tid": 1} for t in starts_us
    ]
    events.append({"name": "aten::mm", "ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1})
    path.write_text(json.dumps({"traceEvents": events}))


@pytest.fixture
def two_node_run(tmp_path: Path) -> Path:
    run = tmp_path / "tiny__lightweight"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"status": "SUCCESS", "runner": "slurm"}))
    # rank 0 on nodeA: 3 GEMMs of 1 ms + one all-reduce of 1 ms; steps every 10 ms
    out_a = run / "nodes" / "nodeA" / "profiler" / "nodeA"
    _trace(out_a / "rank0_11_kernel_trace.csv", [("Cijk_gemm", 0, 1_000_000), ("Cijk_gemm", 2_000_000, 1_000_000),
                                                 ("Cijk_gemm", 4_000_000, 1_000_000),
                                                 ("ncclDevKernel_AllReduce_Sum_f32", 6_000_000, 1_000_000)])
    _steps(out_a / "rank0_11_perfetto_trace.json", [0, 10_000, 20_000, 30_000])
    # rank 1 on nodeB: slower GEMMs (2 ms), the same all-reduce; steps every 15 ms
    out_b = run / "nodes" / "nodeB" / "profiler" / "nodeB"
    _trace(out_b / "rank1_22_kernel_trace.csv", [("Cijk_gemm", 0, 2_000_000), ("Cijk_gemm", 3_000_000, 2_000_000),
                                                 ("ncclDevKernel_AllReduce_Sum_f32", 6_000_000, 1_000_000)])
    _steps(out_b / "rank1_22_perfetto_trace.json", [0, 15_000, 30_000])
    return run


def test_per_node_per_rank_and_straggler(two_node_run):
    report = build_report(load_runs([two_node_run]))
    section = report["runs"][0]["multi_node"]
    assert section is not None
    assert [(n["host"], n["ranks"], n["dispatches"], n["gpu_time_ns"]) for n in section["nodes"]] == \
        [("nodeA", 1, 4, 4_000_000), ("nodeB", 1, 3, 5_000_000)]
    ranks = {r["label"]: r for r in section["ranks"]}
    assert list(ranks) == ["rank 0", "rank 1"]
    assert ranks["rank 0"]["step_time_ms"] == pytest.approx(10.0)
    assert ranks["rank 1"]["step_time_ms"] == pytest.approx(15.0)
    assert ranks["rank 0"]["communication_share"] == pytest.approx(0.25)
    assert ranks["rank 1"]["communication_share"] == pytest.approx(0.2)
    s = section["straggler"]
    assert (s["by"], s["slowest"], s["slowest_host"], s["median"]) == ("step time (ms)", "rank 1", "nodeB", 12.5)
    assert s["skew"] == pytest.approx(0.2)  # 15 ms against the median 12.5 ms


def test_rendered_tables(two_node_run):
    text = markdown.render(build_report(load_runs([two_node_run])))
    per_node = text.split("### Across ranks and nodes", 1)[1].split("- Per rank", 1)[0]
    assert "| nodeA | 1 | 4 | 4.000 | 10 | 25.0% |" in per_node
    assert "| nodeB | 1 | 3 | 5.000 | 15 | 20.0% |" in per_node
    assert "- Stragglers by step time (ms): slowest rank 1 on nodeB, 20.0% above the median 12.5" in text
    assert "| rank 1 | nodeB | 15 | +20.0% |" in text


def test_without_step_annotations_or_collectives_the_straggler_is_judged_on_gpu_time(two_node_run):
    for trace in two_node_run.rglob("*_perfetto_trace.json"):
        trace.unlink()
    for trace in two_node_run.rglob("*_kernel_trace.csv"):  # no collectives to match across ranks
        trace.write_text("".join(line for line in trace.read_text().splitlines(keepends=True) if "nccl" not in line))
    section = build_report(load_runs([two_node_run]))["runs"][0]["multi_node"]
    assert section is not None
    assert all(r["step_time_ms"] is None for r in section["ranks"])
    s = section["straggler"]
    assert (s["by"], s["slowest"], s["median"]) == ("GPU time (ms)", "rank 1", 3_500_000)


def test_without_step_annotations_the_late_rank_at_collectives_is_the_slowest(two_node_run):
    """Rank 1 has more GPU time, but it is rank 0 that reaches the all-reduce late (rank 1 waits 1 ms for it):
    judged by GPU time the waiting rank would be called slow (issue 31)."""
    for trace in two_node_run.rglob("*_perfetto_trace.json"):
        trace.unlink()
    rank1 = next(two_node_run.rglob("rank1_22_kernel_trace.csv"))
    rank1.write_text(rank1.read_text().replace(",6000000,7000000", ",5000000,7000000"))
    report = build_report(load_runs([two_node_run]))
    section, collectives = report["runs"][0]["multi_node"], report["runs"][0]["collectives"]
    assert section is not None and collectives is not None
    assert section["straggler"] is None and section["late_rank"] == 0
    assert collectives["skew_ns"]["max"] == 1_000_000
    text = markdown.render(report)
    assert "Slowest rank: rank 0, the late rank at collectives" in text and "Stragglers by" not in text


def test_a_single_process_has_no_multi_rank_section(two_node_run):
    for path in (two_node_run / "nodes" / "nodeB").rglob("*"):
        if path.is_file():
            path.unlink()
    assert build_report(load_runs([two_node_run]))["runs"][0]["multi_node"] is None
