"""Collectives matched across ranks (reports/analyses/collectives.py), per-rank headline and tables
(analyses/ranks.py), on real two-rank traces and on small hand-built ones.

Every figure of a real trace is compared with an exact computation written here over the raw JSON (the standard
library, microseconds as Decimal, interval coverage by an elementary-segment sweep), not with the module's code.
"""

from __future__ import annotations

import json
import statistics
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.reports import build_report, html_page, load_runs, markdown
from madengine_rocprof.reports.analyses.collectives import RankTrace, analyze, collective_kind
from madengine_rocprof.reports.analyses.ranks import RANK_IN_NAME
from madengine_rocprof.reports.categories import categorize

from .test_reports_kineto import FIXTURES, events, interval, load_trace

# --- the exact computation over the raw JSON --------------------------------------------------------------------------


def raw_ranks(folder: Path) -> dict[int, dict]:
    """Per rank (distributedInfo.rank): its NCCL kernels and its compute kernels as exact ns intervals."""
    out = {}
    for path in sorted(folder.glob("*.json*")):
        trace = load_trace(path)
        kernels = events(trace, "kernel")
        out[int(trace["distributedInfo"]["rank"])] = {
            "comm": sorted(interval(trace, e) for e in kernels if "nccl" in e["name"].lower()),
            "compute": [interval(trace, e) for e in kernels
                        if "nccl" not in e["name"].lower() and categorize(e["name"]) != "memory copy"],
        }
    return out


def covered(intervals: list[tuple[int, int]], at: int, until: int) -> bool:
    return any(s <= at and until <= e for s, e in intervals)


def sweep_outside(part: list[tuple[int, int]], cover: list[tuple[int, int]]) -> int:
    """Length of time inside some `part` interval and inside no `cover` interval, by elementary segments."""
    points = sorted({p for s, e in part + cover for p in (s, e)})
    return sum(b - a for a, b in zip(points, points[1:], strict=False)
               if covered(part, a, b) and not covered(cover, a, b))


def expected(ranks: dict[int, dict]) -> dict:
    """Collectives paired by order (no process-group metadata), with every figure of the report."""
    count = min(len(r["comm"]) for r in ranks.values())
    skews: list[int] = []
    per: dict[int, dict[str, Any]] = {
        r: {"wait": 0, "transfer": 0, "caused": 0, "late": 0, "waits": [], "moves": []} for r in ranks}
    for i in range(count):
        starts = {r: ranks[r]["comm"][i][0] for r in ranks}
        last = max(starts.values())
        skews.append(last - min(starts.values()))
        late = min(r for r in starts if starts[r] == last)
        for r in ranks:
            start, end = ranks[r]["comm"][i]
            # a kernel that ended before the last start (clocks that disagree) is all wait
            per[r]["wait"] += min(end, last) - start
            per[r]["transfer"] += max(end - last, 0)
            per[r]["waits"].append((start, min(end, last)))
            per[r]["moves"].append((last, end))
        if skews[-1]:
            per[late]["late"] += 1
            per[late]["caused"] += sum(min(ranks[r]["comm"][i][1], last) - starts[r] for r in ranks)
    caused = {r: p["caused"] for r, p in per.items()}
    ordered = sorted(skews)
    return {
        "count": count,
        "skew_ns": {"median": statistics.median(skews), "p90": ordered[-(-9 * len(ordered) // 10) - 1],
                    "max": max(skews)},
        "late_rank": max(sorted(caused), key=lambda r: caused[r]) if max(caused.values()) else None,
        "per_rank": [
            {"rank": r, "wait_ns": p["wait"], "transfer_ns": p["transfer"], "caused_wait_ns": p["caused"],
             "late_count": p["late"],
             "exposed_transfer_ns": sweep_outside(p["moves"], ranks[r]["compute"]),
             "exposed_wait_ns": sweep_outside(p["waits"], ranks[r]["compute"] + p["moves"])}
            for r, p in sorted(per.items())
        ],
    }


PER_RANK_KEYS = ("rank", "wait_ns", "transfer_ns", "caused_wait_ns", "late_count", "exposed_transfer_ns",
                 "exposed_wait_ns")


def assert_matches(got: dict, want: dict) -> None:
    assert got["count"] == want["count"]
    assert got["skew_ns"] == want["skew_ns"]
    assert got["late_rank"] == want["late_rank"]
    assert [{k: r[k] for k in PER_RANK_KEYS} for r in got["per_rank"]] == want["per_rank"]


# --- HTA's two-rank trace ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hta_report() -> Any:
    return build_report(load_runs([FIXTURES / "hta_two_ranks"]))["runs"][0]


def test_hta_two_ranks_every_figure_exact(hta_report):
    got = hta_report["collectives"]
    want = expected(raw_ranks(FIXTURES / "hta_two_ranks"))
    assert_matches(got, want)
    assert got["count"] == 10 and got["ranks"] == [0, 1]
    # every NCCL kernel matched: exposed wait + transfer is the busy-time section's exposed communication
    for row in got["per_rank"]:
        device = next(t for t in hta_report["timeline"] if t["origin"] == row["origin"])
        assert row["unmatched"] == 0
        assert row["exposed_wait_ns"] + row["exposed_transfer_ns"] == device["exposed_comm_ns"]
    assert got["matched_by"].startswith("order")  # this trace's record_param_comms carry no group or Seq


def test_hta_two_ranks_names_from_the_nccl_annotations(hta_report):
    # the kernels are all ncclKernel_SendRecv; the host annotations around their launches name the collective
    names = [c["collective"] for c in hta_report["collectives"]["collectives"]]
    assert set(names) <= {"all_to_all", "all_reduce", "_all_gather_base"} and "all_reduce" in names


def test_hta_two_ranks_labelled_by_rank(hta_report):
    assert [r["label"] for r in hta_report["multi_node"]["ranks"]] == ["rank 0", "rank 1"]
    assert [r["rank"] for r in hta_report["multi_node"]["ranks"]] == [0, 1]
    assert [r["label"] for r in hta_report["per_rank"]] == ["rank 0", "rank 1"]
    assert [t["rank"] for t in hta_report["timeline"]] == [0, 1]


def test_per_rank_busy_idle_and_kernels_exact(hta_report):
    raw = raw_ranks(FIXTURES / "hta_two_ranks")
    for row in hta_report["per_rank"]:
        mine = [t for t in hta_report["timeline"] if t["origin"] == row["origin"]]
        assert row["busy_ns"] == sum(t["busy_ns"] for t in mine)
        assert row["idle_ns"] == sum(t["span_ns"] - t["busy_ns"] for t in mine)
        trace = load_trace(next(p for p in (FIXTURES / "hta_two_ranks").glob("*.json.gz")
                                if p.name.startswith(Path(row["origin"]).name)))
        totals: dict[str, int] = {}
        for e in events(trace, "kernel"):
            start, end = interval(trace, e)
            totals[e["name"]] = totals.get(e["name"], 0) + end - start
        top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:len(row["kernels"])]
        assert [(k["name"], k["total_ns"]) for k in row["kernels"]] == top
        assert row["gpu_time_ns"] == sum(totals.values())
        assert row["rank"] in raw


def test_markdown_and_html_show_the_late_rank_and_per_rank_tables(hta_report, tmp_path):
    report = build_report(load_runs([FIXTURES / "hta_two_ranks"]))
    text = markdown.render(report)
    late = hta_report["collectives"]["late_rank"]
    assert f"**late rank: {late}**" in text
    assert "### Collectives across ranks" in text and "### Top kernels per rank" in text
    assert "per rank: **rank 0** busy" in text and "idle share across ranks:" in text
    assert f"Slowest rank: rank {late}, the late rank at collectives" in text
    assert "Stragglers by" not in text  # the GPU-time straggler is replaced where collectives exist
    page = html_page.render(report)
    assert page.count("<title>rank 1, #") > 0 and "wait (for the late rank)" in page


def test_json_cli_carries_collectives(tmp_path):
    out = tmp_path / "r.json"
    assert main(["report", str(FIXTURES / "hta_two_ranks"), "--json", str(out), "-q"]) == 0
    got = json.loads(out.read_text())["runs"][0]["collectives"]
    assert {"count", "skew_ns", "late_rank", "per_rank"} <= set(got)
    assert all({"wait_ns", "transfer_ns"} <= set(r) for r in got["per_rank"])


# --- Holistic Trace Analysis on the same traces (hta_comm_values.json, made by hta_comm_values.py) ------------------

HTA_COMM = json.loads((FIXTURES / "hta_comm_values.json").read_text())


@pytest.mark.parametrize("folder", sorted(HTA_COMM["folders"]))
def test_late_rank_agrees_with_hta_stragglers(folder):
    """HTA's straggler is the rank that starts its communication late: the same question as our late rank."""
    hta = HTA_COMM["folders"][folder]["potential_stragglers"]
    got = build_report(load_runs([FIXTURES / folder]))["runs"][0]["collectives"]
    assert got is not None
    if isinstance(hta, str):  # HTA could not answer (recorded with its error)
        assert hta.startswith("HTA error") and got["late_rank"] is not None
    else:
        assert hta == [got["late_rank"]]


@pytest.mark.parametrize("folder", sorted(HTA_COMM["folders"]))
def test_overlap_with_compute_as_hta_computes_it(folder):
    """HTA's comm/comp overlap (share of communication time overlapped by compute), on the communication kernels HTA
    kept (those launched in complete ProfilerSteps): with HTA's compute (every kernel but NCCL and Memcpy/Memset, copy
    kernels on the SMs included) the sweep here gives HTA's percentage; with ours (copy kernels are not compute) the
    exposed communication is larger or equal (docs/reports.md)."""
    hta = HTA_COMM["folders"][folder]
    base = round(Decimal(str(hta["min_ts_us"])) * 1000)
    for path in sorted((FIXTURES / folder).glob("*.json*")):
        trace = load_trace(path)
        rank = str(trace["distributedInfo"]["rank"])
        kernels = [(e["name"], *interval(trace, e)) for e in events(trace, "kernel")]
        kept = [(s + base, e + base) for s, e in hta["kept_comm_kernels_ns"][rank]]
        comm = [(s, e) for n, s, e in kernels if "nccl" in n.lower() and any(abs(s - k) < 1000 for k, _ in kept)]
        assert len(comm) == len(kept)
        total = sweep_outside(comm, [])
        hta_compute = [(s, e) for n, s, e in kernels
                       if "nccl" not in n.lower() and not n.startswith(("Memcpy", "Memset"))]
        ours_compute = [(s, e) for n, s, e in kernels if categorize(n) not in ("communication", "memory copy")]
        assert round(100 * (1 - sweep_outside(comm, hta_compute) / total), 2) == hta["comm_comp_overlap_pctg"][rank]
        assert sweep_outside(comm, ours_compute) >= sweep_outside(comm, hta_compute)


# --- small hand-built traces ------------------------------------------------------------------------------------------

KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"


def rank_trace(rank: int, kernels: list[tuple[str, int, int]], comms: list[dict] | None = None) -> RankTrace:
    """Kernels (name, start, end) with correlation ids 1..n launched at 10*id on thread 7; comms rows around them."""
    frame = pl.DataFrame({"name": [k[0] for k in kernels], "start": [k[1] for k in kernels],
                          "end": [k[2] for k in kernels], "stream": [1] * len(kernels),
                          "correlation": list(range(1, len(kernels) + 1))})
    runtime = pl.DataFrame({"name": ["cudaLaunchKernel"] * len(kernels), "pid": [1] * len(kernels),
                            "tid": [7] * len(kernels), "start": [10 * i for i in range(1, len(kernels) + 1)],
                            "end": [10 * i + 5 for i in range(1, len(kernels) + 1)],
                            "correlation": list(range(1, len(kernels) + 1))})
    comm = pl.DataFrame(comms, infer_schema_length=None) if comms else None
    return RankTrace(rank, f"rank{rank}", frame, runtime, comm)


def comm(launch: int, seq: int, collective="allreduce", nelems=1_000_000, out=None, group_size=4, dtype="Float"):
    """A record_param_comms row around the launch of kernel `launch` (its runtime call starts at 10*launch)."""
    return {"name": "record_param_comms", "pid": 1, "tid": 7, "start": 10 * launch - 2, "end": 10 * launch + 8,
            "collective": collective, "in_nelems": nelems, "out_nelems": nelems if out is None else out,
            "dtype": dtype, "group_size": group_size, "pg_name": "0", "seq": seq}


def test_late_rank_is_the_one_the_others_wait_on_not_the_one_that_waits():
    # rank 0 reaches both all-reduces 3 ms and 30 ms late; rank 1's long kernels are waiting, not slowness
    r0 = rank_trace(0, [(GEMM, 0, 9_000_000), (KERNEL, 9_000_000, 9_100_000),
                        (GEMM, 9_100_000, 40_000_000), (KERNEL, 40_000_000, 40_050_000)])
    r1 = rank_trace(1, [(GEMM, 0, 1_000_000), (KERNEL, 6_000_000, 9_100_020),
                        (GEMM, 9_100_020, 9_500_000), (KERNEL, 10_000_000, 40_050_010)])
    got = analyze([r0, r1])
    assert got is not None
    assert got["late_rank"] == 0
    assert got["skew_ns"] == {"median": 16_500_000, "p90": 30_000_000, "max": 30_000_000}
    by_rank = {r["rank"]: r for r in got["per_rank"]}
    assert by_rank[1]["wait_ns"] == 3_000_000 + 30_000_000 and by_rank[0]["wait_ns"] == 0
    assert by_rank[0]["transfer_ns"] == 100_000 + 50_000 and by_rank[1]["transfer_ns"] == 100_020 + 50_010
    assert by_rank[0]["caused_wait_ns"] == 33_000_000 and by_rank[0]["late_count"] == 2
    # rank 1's first wait [6, 9) ms overlaps no compute; its second [10, 40) ms neither (its GEMM ended at 9.5 ms)
    assert by_rank[1]["exposed_wait_ns"] == 33_000_000 and by_rank[1]["exposed_transfer_ns"] == 150_030


def test_sequence_numbers_bytes_and_bandwidth():
    # two ranks of a group of 4 (the others not traced): all-reduce of 1M floats, all-gather of 0.25M -> 1M halves
    r0 = rank_trace(0, [(KERNEL, 1_000, 5_001_000), (GATHER, 6_000_000, 7_000_000)],
                    [comm(1, seq=7), comm(2, seq=8, collective="_allgather_base", nelems=250_000, out=1_000_000,
                                          dtype="BFloat16")])
    r1 = rank_trace(1, [(KERNEL, 0, 4_001_000), (GATHER, 6_500_000, 7_000_000)],
                    [comm(1, seq=7), comm(2, seq=8, collective="_allgather_base", nelems=250_000, out=1_000_000,
                                          dtype="BFloat16")])
    got = analyze([r0, r1])
    assert got is not None
    assert got["matched_by"] == "sequence number" and got["groups"] == ["0"]
    reduce, gather = got["collectives"]
    assert (reduce["seq"], reduce["bytes"], reduce["late_rank"], reduce["time_ns"]) == (7, 4_000_000, 0, 5_000_000)
    assert reduce["algbw_gbps"] == pytest.approx(4_000_000 / 5_000_000)
    assert reduce["busbw_gbps"] == pytest.approx(4_000_000 / 5_000_000 * 2 * 3 / 4)  # allreduce: 2(n-1)/n, n = 4
    assert (gather["bytes"], gather["late_rank"], gather["time_ns"]) == (2_000_000, 1, 500_000)
    assert gather["busbw_gbps"] == pytest.approx(2_000_000 / 500_000 * 3 / 4)  # allgather: (n-1)/n


def test_kernels_without_a_partner_are_unmatched_not_paired_wrongly():
    r0 = rank_trace(0, [(KERNEL, 0, 10), (KERNEL, 100, 110)], [comm(1, seq=1), comm(2, seq=2)])
    r1 = rank_trace(1, [(KERNEL, 105, 110)], [comm(1, seq=2)])  # its window began after seq 1
    got = analyze([r0, r1])
    assert got is not None
    assert got["count"] == 1 and got["collectives"][0]["seq"] == 2
    assert {r["rank"]: r["unmatched"] for r in got["per_rank"]} == {0: 1, 1: 0}
    assert got["notes"] and "rank 0: 1" in got["notes"][0]


def test_no_skew_no_late_rank_and_one_rank_no_section():
    same = [rank_trace(r, [(KERNEL, 100, 200)]) for r in (0, 1)]
    got = analyze(same)
    assert got is not None
    assert got["late_rank"] is None and got["skew_ns"]["max"] == 0
    assert analyze([rank_trace(0, [(KERNEL, 0, 1)]), rank_trace(1, [(GEMM, 0, 1)])]) is None


@pytest.mark.parametrize(("name", "kind"), [
    ("allreduce", "allreduce"), ("_allgather_base", "allgather"), ("all_gather_into_tensor_coalesced", "allgather"),
    ("_reduce_scatter_base", "reducescatter"), ("reduce_scatter_tensor_coalesced", "reducescatter"),
    ("all_to_all", "alltoall"), ("all_to_allv", "alltoall"), ("broadcast", "broadcast"), ("reduce", "reduce"),
    ("send", "sendrecv"), ("recv", "sendrecv"), ("SendRecv", "sendrecv"), ("AllReduce", "allreduce"),
    ("nccl:all_reduce", "allreduce"), ("barrier", None), (None, None)])
def test_collective_kinds(name, kind):
    assert collective_kind(name) == kind


@pytest.mark.parametrize(("path", "rank"), [
    ("rank0_1234", 0), ("host/rank12_99", 12), ("sampled_rank-1", 1), ("trace_rank_3.pt.trace", 3),
    ("rank2/node/5", 2), ("ranking_4", None), ("worker0", None)])
def test_rank_in_file_names(path, rank):
    found = RANK_IN_NAME.findall(path)
    assert (int(found[-1]) if found else None) == rank


ROCPROF_HEADER = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
                  '"Correlation_Id","Start_Timestamp","End_Timestamp"')
RCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"  # RCCL's generic kernel names no collective


def test_rocprofv3_per_rank_traces_with_rccl_names(tmp_path):
    """rocprofv3-format kernel traces, one per rank (`rank<r>_<pid>_kernel_trace.csv`, as the embedded tracer writes
    under a launcher): ranks from the names, RCCL kernels matched in order, rank 1 late at the second."""
    run = tmp_path / "run"
    run.mkdir()
    kernels = {0: [("Cijk_Ailk_Bljk_HHS_BH_MT128x128", 0, 4_000), (RCCL, 5_000, 9_000), (RCCL, 10_000, 20_000)],
               1: [("Cijk_Ailk_Bljk_HHS_BH_MT128x128", 0, 4_500), (RCCL, 6_000, 9_010), (RCCL, 17_000, 20_020)]}
    for rank, rows in kernels.items():
        lines = [ROCPROF_HEADER] + [f'"KERNEL_DISPATCH","Agent {4 + rank}",1,1,7,{i},{i},"{name}",{i},{s},{e}'
                                    for i, (name, s, e) in enumerate(rows, 1)]
        (run / f"rank{rank}_{100 + rank}_kernel_trace.csv").write_text("\n".join(lines) + "\n")
    report = build_report(load_runs([run]))["runs"][0]
    got = report["collectives"]
    assert got is not None
    assert (got["count"], got["late_rank"], got["skew_ns"]["max"]) == (2, 1, 7_000)
    assert [(r["rank"], r["wait_ns"], r["transfer_ns"]) for r in got["per_rank"]] == [(0, 1_000 + 7_000, 3_000 + 3_000),
                                                                                      (1, 0, 3_010 + 3_020)]
    # rank 0 waits 1 us from 5 us, with no compute then; its second wait, 10-17 us, is exposed too
    assert [r["exposed_wait_ns"] for r in got["per_rank"]] == [8_000, 0]
    assert [r["label"] for r in report["per_rank"]] == ["rank 0", "rank 1"]
    assert report["multi_node"] is not None and report["multi_node"]["late_rank"] == 1
