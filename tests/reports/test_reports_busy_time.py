"""GPU busy time, idle time and compute/communication overlap, checked against an independent computation.

The independent side walks a 1 ns grid of the crafted timeline (every nanosecond that some kernel covers is busy),
which shares no code or idea with the reader's sorted-union sweep.
"""

from __future__ import annotations

import json
import random

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.reports.categories import categorize

from .reports_builders import HEADER_7, report_one, write_csv

GEMM = "Cijk_Alik_Bljk_SB_MT128x128x16"
ADD = "void at::native::vectorized_elementwise_kernel<4, add>(int)"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COPY = "__amd_rocclr_copyBuffer"
NAMES = [GEMM, ADD, NCCL, COPY]


def covered(intervals) -> set[int]:
    return {t for start, end in intervals for t in range(start, end)}


def expected(dispatches) -> dict:
    """name, start, end per device -> the numbers the report must give, by counting nanoseconds."""
    out = {}
    for device in sorted({d for _, _, _, d in dispatches}):
        mine = [(n, s, e) for n, s, e, d in dispatches if d == device]
        comm = covered((s, e) for n, s, e in mine if categorize(n) in ("communication", "memory copy"))
        compute = covered((s, e) for n, s, e in mine if categorize(n) not in ("communication", "memory copy"))
        span = max(e for _, _, e in mine) - min(s for _, s, _ in mine)
        busy = len(comm | compute)
        out[device] = {
            "dispatches": len(mine),
            "span_ns": span,
            "busy_ns": busy,
            "idle_ns": span - busy,
            "compute_busy_ns": len(compute),
            "comm_busy_ns": len(comm),
            "overlap_ns": len(comm & compute),
            "kernel_time_sum_ns": sum(e - s for _, s, e in mine),
        }
    return out


def crafted(seed: int, count: int = 300, devices=("Agent 2", "Agent 3")):
    """Kernels on two devices and several queues: nested, overlapping, touching and separated by gaps."""
    rng = random.Random(seed)
    out = []
    for device in devices:
        t = 1_000
        for _ in range(count):
            t += rng.choice([0, 0, 5, 40])  # back to back, small and large gaps
            start = t - rng.choice([0, 0, 0, 30, 80])  # some start before the previous kernel ended
            end = start + rng.randint(0, 120)  # zero-length kernels too
            out.append((rng.choice(NAMES), max(start, 0), end, device))
            t = max(t, end)
    rng.shuffle(out)  # files are not in start order (several queues complete out of order)
    return out


def write_rows(path, dispatches):
    rows = []
    for i, (name, start, end, device) in enumerate(dispatches, start=1):
        values = {
            "Kind": "KERNEL_DISPATCH",
            "Agent_Id": device,
            "Queue_Id": i % 3,
            "Kernel_Name": name,
            "Dispatch_Id": i,
            "Correlation_Id": i,
            "Start_Timestamp": start,
            "End_Timestamp": end,
        }
        rows.append([values.get(column, 0) for column in HEADER_7])
    write_csv(path, HEADER_7, rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_busy_idle_overlap_per_device_match_a_nanosecond_count(tmp_path, seed):
    dispatches = crafted(seed)
    write_rows(tmp_path / "run" / "node1" / "rank0_77_kernel_trace.csv", dispatches)
    run = report_one(tmp_path / "run")
    want = expected(dispatches)
    rows = {t["device"]: t for t in run["timeline"]}
    assert set(rows) == set(want)
    for device, numbers in want.items():
        row = rows[device]
        assert {k: row[k] for k in numbers} == numbers
        assert row["origin"] == "node1/rank0_77" and row["rank"] == 0
        assert row["idle_share"] == pytest.approx(numbers["idle_ns"] / numbers["span_ns"])
        assert row["overlap_share"] == pytest.approx(numbers["overlap_ns"] / numbers["comm_busy_ns"])
    summary = run["summary"]
    assert summary["busy_ns"] == sum(w["busy_ns"] for w in want.values())
    assert summary["idle_ns"] == sum(w["idle_ns"] for w in want.values())
    assert summary["gpu_time_ns"] == sum(w["kernel_time_sum_ns"] for w in want.values())  # the sum stays, labelled
    assert summary["busy_ns"] < summary["gpu_time_ns"]  # overlapping kernels: the sum overstates the busy time


def test_per_rank_rows_and_all_outputs(tmp_path, capsys):
    """Two ranks: one timeline row each, in the JSON, the Markdown and the HTML."""
    for rank in (0, 1):
        write_rows(
            tmp_path / "run" / "node1" / f"rank{rank}_{100 + rank}_kernel_trace.csv",
            crafted(10 + rank, count=50, devices=(f"Agent {2 + rank}",)),
        )
    out_json, out_html = tmp_path / "r.json", tmp_path / "r.html"
    assert main(["report", str(tmp_path / "run"), "--json", str(out_json), "--html", str(out_html)]) == 0
    text = capsys.readouterr().out
    run = json.loads(out_json.read_text())["runs"][0]
    assert [(t["rank"], t["device"]) for t in run["timeline"]] == [(0, "Agent 2"), (1, "Agent 3")]
    assert "### GPU busy time per process and device" in text
    for t in run["timeline"]:
        line = next(line for line in text.splitlines() if line.startswith(f"| {t['origin']} |"))
        assert f"| {t['busy_ns'] / 1e6:,.3f} |" in line and f"| {100 * t['idle_share']:.1f}% |" in line
    assert "GPU busy time per process and device" in out_html.read_text()
    assert f"GPU busy {run['summary']['busy_ns'] / 1e6:,.3f} ms" in text


@pytest.mark.parametrize("fmt", ["json", "rocpd"])
def test_other_timeline_formats_give_the_same_busy_time(tmp_path, fmt):
    from .test_reports_formats import make_rocpd, write_rocprofv3_json

    dispatches = [(n, s, e) for n, s, e, _ in crafted(5, count=200, devices=("x",))]
    if fmt == "json":
        write_rocprofv3_json(tmp_path / "run" / "h" / "1_results.json", dispatches)
    else:
        make_rocpd(tmp_path / "run" / "h" / "1_results.db", dispatches)
    [row] = report_one(tmp_path / "run")["timeline"]
    want = next(iter(expected([(n, s, e, "x") for n, s, e in dispatches]).values()))
    assert {k: row[k] for k in want} == want


def test_stats_only_runs_have_no_busy_time(tmp_path):
    stats = tmp_path / "run" / "h" / "1_kernel_stats.csv"
    stats.parent.mkdir(parents=True)
    stats.write_text(
        '"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n"k",2,10,5,100,4,6,1\n'
    )
    run = report_one(tmp_path / "run")
    assert run["timeline"] == [] and run["summary"]["busy_ns"] is None and run["summary"]["gpu_time_ns"] == 10


@pytest.mark.parametrize("names", [[GEMM, ADD], [NCCL, COPY]])
def test_only_compute_or_only_communication(tmp_path, names):
    rng = random.Random(7)
    dispatches = [(rng.choice(names), s, e, d) for _, s, e, d in crafted(7, count=100, devices=("Agent 1",))]
    write_rows(tmp_path / "run" / "h" / "1_kernel_trace.csv", dispatches)
    [row] = report_one(tmp_path / "run")["timeline"]
    want = expected(dispatches)["Agent 1"]
    assert {k: row[k] for k in want} == want
