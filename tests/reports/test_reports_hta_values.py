"""`--definitions hta` against Holistic Trace Analysis itself: the values HTA 0.5.0 gave on two small traces
(tests/fixtures/hta_check, made and measured by benchmarks/reports/hta_check/make_and_run.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from madengine_rocprof.reports.dispatches import aggregate, frame
from madengine_rocprof.reports.model import TimingSource

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "hta_check"
VALUES = json.loads((HERE / "hta_values.json").read_text())


def device_time(rank: int):
    """The rank's GPU events (those on a stream) as kernel and copy tables, microseconds to nanoseconds exactly."""
    doc = json.loads((HERE / f"rank{rank}.pt.trace.json").read_text())
    tables: dict[str, dict[str, list]] = {k: {"name": [], "start": [], "end": [], "device": []} for k in ("k", "c")}
    for e in doc["traceEvents"]:
        if "stream" not in e.get("args", {}):
            continue
        table = tables["k" if e["cat"] == "kernel" else "c"]
        table["name"].append(e["name"])
        table["start"].append(int(e["ts"]) * 1000)
        table["end"].append((int(e["ts"]) + int(e["dur"])) * 1000)
        table["device"].append(f"cuda:{e['args']['device']}")
    src = TimingSource(path=Path("x"), rel="x", fmt="kineto", process=f"rank{rank}", pass_id=None)
    aggregate(src, frame(tables["k"]), frame(tables["c"]))
    [device] = src.devices
    return device


@pytest.mark.parametrize("rank", [0, 1])
def test_hta_definitions_give_htas_numbers(rank):
    hta = VALUES["ranks"][str(rank)]
    d = device_time(rank)
    assert d.span_ns == hta["kernel_time_us"] * 1000  # HTA's "kernel time" is the span
    assert d.span_ns - d.busy_ns == hta["idle_time_us"] * 1000
    assert d.hta_compute_busy_ns == hta["compute_time_us"] * 1000
    assert d.busy_ns - d.hta_compute_busy_ns == hta["non_compute_time_us"] * 1000
    assert 100 * d.hta_overlap_ns / d.hta_comm_busy_ns == pytest.approx(hta["comp_comm_overlap_pctg"], abs=0.005)


@pytest.mark.parametrize("rank", [0, 1])
def test_ours_differ_where_the_definitions_do(rank):
    """Busy and idle agree; our compute leaves out the copy and fill kernels HTA counts, so it is smaller."""
    d = device_time(rank)
    assert d.compute_busy_ns < d.hta_compute_busy_ns
    assert d.comm_busy_ns == d.hta_comm_busy_ns  # every communication kernel here is named nccl...Kernel
    assert d.copy_busy_ns > 0 and d.copies > 0
