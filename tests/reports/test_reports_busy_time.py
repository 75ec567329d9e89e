"""Device busy time, idle time and compute/communication overlap, checked against an independent computation.

The independent side walks a 1 ns grid of the crafted timeline (every nanosecond that some kernel or copy covers
is busy), which shares no code or idea with the reader's sorted-union sweep. Our groups come from the kernel
category; HTA's from its own rules, restated here from HTA 0.5.0 (hta/utils/utils.py: communication = `^nccl.*Kernel`,
memory = `^Memcpy|^Memset|^dma` and the copy events, everything else computation).
"""

from __future__ import annotations

import json
import random
import re

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.reports.categories import categorize

from .reports_builders import HEADER_7, report_one, write_csv

GEMM = "Cijk_Alik_Bljk_SB_MT128x128x16"
ADD = "void at::native::vectorized_elementwise_kernel<4, add>(int)"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COPY = "__amd_rocclr_copyBuffer"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul>>(int)"
NAMES = [GEMM, ADD, NCCL, COPY, FILL]
ENGINE_COPY = "engine copy"  # a copy of the copy engines (memory_copy_trace), not a kernel


def covered(intervals) -> set[int]:
    return {t for start, end in intervals for t in range(start, end)}


def ours(name: str) -> str:
    if name == ENGINE_COPY:
        return "copy"
    return {"communication": "comm", "memory copy": "copy"}.get(categorize(name), "compute")


def hta(name: str) -> str:
    if name == ENGINE_COPY or re.match(r"(^Memcpy)|(^Memset)|(^dma)", name):
        return "memory"
    return "comm" if re.match(r"^nccl.*Kernel", name) else "compute"


def numbers(mine, lo=None, hi=None) -> dict:
    """The busy numbers of (name, start, end) intervals, inside [lo, hi) when given (else the span)."""
    if lo is not None:
        mine = [(n, max(s, lo), min(e, hi)) for n, s, e in mine if e > lo and s < hi]
    else:
        lo, hi = min(s for _, s, _ in mine), max(e for _, _, e in mine)
    grid = {group: covered((s, e) for n, s, e in mine if ours(n) == group) for group in ("compute", "comm", "copy")}
    hgrid = {group: covered((s, e) for n, s, e in mine if hta(n) == group) for group in ("compute", "comm", "memory")}
    busy = len(grid["compute"] | grid["comm"] | grid["copy"])
    assert busy == len(hgrid["compute"] | hgrid["comm"] | hgrid["memory"])  # the same events, grouped otherwise
    return {
        "span_ns": hi - lo,
        "busy_ns": busy,
        "idle_ns": hi - lo - busy,
        "compute_busy_ns": len(grid["compute"]),
        "comm_busy_ns": len(grid["comm"]),
        "copy_busy_ns": len(grid["copy"]),
        "overlap_ns": len(grid["comm"] & grid["compute"]),
        "hta": {
            "compute_busy_ns": len(hgrid["compute"]),
            "non_compute_ns": busy - len(hgrid["compute"]),
            "comm_busy_ns": len(hgrid["comm"]),
            "overlap_ns": len(hgrid["comm"] & hgrid["compute"]),
        },
    }


def expected(dispatches) -> dict:
    """name, start, end per device -> the numbers the report must give, by counting nanoseconds."""
    out = {}
    for device in sorted({d for _, _, _, d in dispatches}):
        mine = [(n, s, e) for n, s, e, d in dispatches if d == device]
        kernels = [(n, s, e) for n, s, e in mine if n != ENGINE_COPY]
        out[device] = numbers(mine) | {
            "dispatches": len(kernels),
            "copies": len(mine) - len(kernels),
            "kernel_time_sum_ns": sum(e - s for _, s, e in kernels),
        }
    return out


def subset(row: dict, want: dict) -> dict:
    got = {k: row[k] for k in want}
    if "hta" in got:
        got["hta"] = {k: row["hta"][k] for k in want["hta"]}
    return got


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
    for device, numbers_ in want.items():
        row = rows[device]
        assert subset(row, numbers_) == numbers_
        assert row["origin"] == "node1/rank0_77" and row["rank"] == 0
        assert row["idle_share"] == pytest.approx(numbers_["idle_ns"] / numbers_["span_ns"])
        assert row["overlap_share"] == pytest.approx(numbers_["overlap_ns"] / numbers_["comm_busy_ns"])
        assert row["hta"]["compute_busy_ns"] > row["compute_busy_ns"]  # HTA counts copy and fill kernels as compute
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
    assert subset(row, want) == want


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
    assert subset(row, want) == want


COPY_HEADER = ["Kind", "Direction", "Stream_Id", "Source_Agent_Id", "Destination_Agent_Id", "Correlation_Id",
               "Start_Timestamp", "End_Timestamp"]  # rocprofv3 7.0 memory_copy_trace.csv (tests/fixtures/rocprofv3)


def crafted_copies(seed: int, count: int = 80):
    """Copies of the copy engines: host-to-device onto Agent 2, device-to-host from Agent 3, some over kernels."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        start = rng.randint(1_000, 12_000)
        end = start + rng.randint(0, 300)
        if rng.random() < 0.5:
            out.append(("MEMORY_COPY_HOST_TO_DEVICE", "Agent 0", "Agent 2", start, end))
        else:
            out.append(("MEMORY_COPY_DEVICE_TO_HOST", "Agent 3", "Agent 0", start, end))
    return out


@pytest.mark.parametrize("seed", [4, 5])
def test_copies_of_the_copy_engines_count_as_busy(tmp_path, seed):
    """memory_copy_trace.csv of the same process: its copies join the device's busy time and span (both definitions)."""
    dispatches = crafted(seed)
    copies = crafted_copies(seed)
    write_rows(tmp_path / "run" / "node1" / "rank0_77_kernel_trace.csv", dispatches)
    write_csv(
        tmp_path / "run" / "node1" / "rank0_77_memory_copy_trace.csv",
        COPY_HEADER,
        [["MEMORY_COPY", d, 0, src, dst, i, s, e] for i, (d, src, dst, s, e) in enumerate(copies, start=1)],
    )
    run = report_one(tmp_path / "run")
    on_device = [(ENGINE_COPY, s, e, dst if dst != "Agent 0" else src) for _, src, dst, s, e in copies]
    want = expected(dispatches + on_device)
    rows = {t["device"]: t for t in run["timeline"]}
    assert set(rows) == set(want)
    for device, numbers_ in want.items():
        assert subset(rows[device], numbers_) == numbers_
        assert rows[device]["copies"] > 0
    without = expected(dispatches)  # the copies do change the numbers: kernels-only would be wrong
    assert any(without[d]["busy_ns"] != want[d]["busy_ns"] for d in want)
    assert {c["direction"] for c in run["memory_copies"]} == {"host to device", "device to host"}


def test_copies_of_another_process_do_not_count(tmp_path):
    write_rows(tmp_path / "run" / "h" / "1_kernel_trace.csv", [(GEMM, 100, 200, "Agent 2")])
    write_csv(tmp_path / "run" / "h" / "2_memory_copy_trace.csv", COPY_HEADER,
              [["MEMORY_COPY", "MEMORY_COPY_HOST_TO_DEVICE", 0, "Agent 0", "Agent 2", 1, 150, 400]])
    [row] = report_one(tmp_path / "run")["timeline"]
    assert (row["busy_ns"], row["span_ns"], row["copies"]) == (100, 100, 0)


def test_definitions_option_shows_ours_hta_or_both(tmp_path, capsys):
    write_rows(tmp_path / "run" / "h" / "1_kernel_trace.csv", crafted(8, count=120, devices=("Agent 1",)))
    texts = {}
    for definitions in ("ours", "hta", "both"):
        assert main(["report", str(tmp_path / "run"), "--definitions", definitions]) == 0
        texts[definitions] = capsys.readouterr().out
    assert "Our definitions" in texts["ours"] and "Holistic Trace Analysis's definitions" not in texts["ours"]
    assert "Holistic Trace Analysis's definitions" in texts["hta"] and "Our definitions" not in texts["hta"]
    assert "| non-compute (ms) |" in texts["hta"] and "comm/copy" not in texts["ours"] + texts["hta"]
    both = texts["both"]
    assert "Our definitions" in both and "Holistic Trace Analysis's definitions" in both
    assert "(HTA: copy and fill kernels count as compute)" in both  # the difference is spelled out
    assert main(["report", str(tmp_path / "run"), "--definitions", "nvidia"]) == 2


def test_rocprofv3_json_and_rocpd_copies_count_as_busy(tmp_path):
    """The JSON's buffer_records.memory_copy and rocpd's memory_copies view give the same numbers as the CSV."""
    import sqlite3

    from .test_reports_formats import make_rocpd, write_rocprofv3_json

    kernels = [(n, s, e) for n, s, e, _ in crafted(6, count=150, devices=("x",))]
    copies = [(s, e, h2d) for (_, _, _, s, e), h2d in zip(crafted_copies(6, 40), [True, False] * 20, strict=True)]
    want = next(iter(expected([(n, s, e, "x") for n, s, e in kernels]
                              + [(ENGINE_COPY, s, e, "x") for s, e, _ in copies]).values()))

    json_path = tmp_path / "json" / "h" / "1_results.json"
    write_rocprofv3_json(json_path, kernels)  # kernels on agent handle 4; host agent handle 1
    doc = json.loads(json_path.read_text())
    doc["rocprofiler-sdk-tool"][0]["buffer_records"]["memory_copy"] = [
        {"start_timestamp": s, "end_timestamp": e, "operation": 1 if h2d else 2,
         "dst_agent_id": {"handle": 4 if h2d else 1}, "src_agent_id": {"handle": 1 if h2d else 4}}
        for s, e, h2d in copies
    ]
    json_path.write_text(json.dumps(doc))
    [row] = report_one(tmp_path / "json")["timeline"]
    assert subset(row, want) == want and row["copies"] == len(copies)

    db = tmp_path / "rocpd" / "h" / "1_results.db"
    make_rocpd(db, kernels)  # kernels on agent absolute index 0; the host is agent 1 here
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE copies_0001 (name TEXT, start INTEGER, `end` INTEGER, dst INTEGER, src INTEGER, "
                "dst_type TEXT, src_type TEXT)")
    con.executemany("INSERT INTO copies_0001 VALUES (?,?,?,?,?,?,?)",
                    [("MEMORY_COPY_HOST_TO_DEVICE" if h2d else "MEMORY_COPY_DEVICE_TO_HOST", s, e,
                      0 if h2d else 1, 1 if h2d else 0, "GPU" if h2d else "CPU", "CPU" if h2d else "GPU")
                     for s, e, h2d in copies])
    con.execute("CREATE VIEW memory_copies AS SELECT name, start, `end`, dst AS dst_agent_abs_index, "
                "src AS src_agent_abs_index, dst_type AS dst_agent_type, src_type AS src_agent_type FROM copies_0001")
    con.commit()
    con.close()
    [row] = report_one(tmp_path / "rocpd")["timeline"]
    assert subset(row, want) == want and row["copies"] == len(copies)
