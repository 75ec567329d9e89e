"""Collectives matched across ranks (reports/analyses/collectives.py), per-rank headline and tables
(analyses/ranks.py), on real two-rank traces and on small hand-built ones.

Every figure of a real trace is compared with an exact computation written here over the raw JSON (the standard
library, microseconds as Decimal, interval coverage by an elementary-segment sweep), not with the module's code.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import statistics
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
    """Per rank (distributedInfo.rank): its NCCL kernels (start, end, args) and compute kernels, exact ns."""
    out = {}
    for path in sorted(folder.glob("*.json*")):
        trace = load_trace(path)
        kernels = events(trace, "kernel")
        out[int(trace["distributedInfo"]["rank"])] = {
            "comm": sorted((*interval(trace, e), e["args"]) for e in kernels if "nccl" in e["name"].lower()),
            "compute": [interval(trace, e) for e in kernels
                        if "nccl" not in e["name"].lower() and categorize(e["name"]) != "memory copy"],
        }
    return out


def pairs_by_order(ranks: dict[int, dict]) -> list[dict[int, tuple]]:
    """The i-th NCCL kernel of every rank together."""
    return [{r: ranks[r]["comm"][i] for r in ranks} for i in range(min(len(x["comm"]) for x in ranks.values()))]


def pairs_by_nearest_end(ranks: dict[int, dict]) -> list[dict[int, tuple]]:
    """Two ranks: kernels of the same collective and message size (the kernel events' own args) whose ends are each
    other's nearest: a collective completes on every rank at nearly the same time."""
    (r0, a), (r1, b) = sorted((r, x["comm"]) for r, x in ranks.items())

    def key(k):
        return k[2].get("Collective name"), k[2].get("In msg nelems")

    def nearest(k, among):
        same = [m for m in among if key(m) == key(k)]
        return min(same, key=lambda m: abs(m[1] - k[1])) if same else None

    return [{r0: x, r1: y} for x in a if (y := nearest(x, b)) is not None and nearest(y, a) == x]


def covered(intervals: list[tuple[int, int]], at: int, until: int) -> bool:
    return any(s <= at and until <= e for s, e in intervals)


def sweep_outside(part: list[tuple[int, int]], cover: list[tuple[int, int]]) -> int:
    """Length of time inside some `part` interval and inside no `cover` interval, by elementary segments."""
    cover = [c for c in cover if any(c[0] < e and s < c[1] for s, e in part)]  # only those that can matter
    points = sorted({p for s, e in part + cover for p in (s, e)})
    return sum(b - a for a, b in zip(points, points[1:], strict=False)
               if covered(part, a, b) and not covered(cover, a, b))


DTYPE_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8}
BUS = {"allreduce": lambda n: 2 * (n - 1) / n, "broadcast": lambda n: 1, "_allgather_base": lambda n: (n - 1) / n,
       "_reduce_scatter_base": lambda n: (n - 1) / n}


def expected(ranks: dict[int, dict], pairs: list[dict[int, tuple]]) -> dict:
    """Every figure of the report for these matched collectives."""
    skews: list[int] = []
    rows = []
    per: dict[int, dict[str, Any]] = {
        r: {"wait": 0, "transfer": 0, "caused": 0, "late": 0, "waits": [], "moves": []} for r in ranks}
    for pair in sorted(pairs, key=lambda p: min(k[0] for k in p.values())):
        starts = {r: k[0] for r, k in pair.items()}
        last = max(starts.values())
        skews.append(last - min(starts.values()))
        late = min(r for r in starts if starts[r] == last)
        for r, (start, end, _) in pair.items():
            # a kernel that ended before the last start (clocks that disagree) is all wait
            per[r]["wait"] += min(end, last) - start
            per[r]["transfer"] += max(end - last, 0)
            per[r]["waits"].append((start, min(end, last)))
            per[r]["moves"].append((last, end))
        if skews[-1]:
            per[late]["late"] += 1
            per[late]["caused"] += sum(min(k[1], last) - k[0] for k in pair.values())
        args = pair[late][2]
        size = (max(args["In msg nelems"], args["Out msg nelems"]) * DTYPE_BYTES[args["dtype"]]
                if "dtype" in args else None)
        time = pair[late][1] - last
        rows.append({"first_start_ns": min(starts.values()), "skew_ns": skews[-1],
                     "late_rank": late if skews[-1] else None, "time_ns": time, "bytes": size,
                     "algbw_gbps": size / time if size else None,
                     "busbw_gbps": size / time * BUS[args["Collective name"]](args["Group size"]) if size else None})
    caused = {r: p["caused"] for r, p in per.items()}
    ordered = sorted(skews)
    paired = {r: {k[:2] for p in pairs for q, k in p.items() if q == r} for r in ranks}
    return {
        "count": len(pairs),
        "skew_ns": {"median": statistics.median(skews), "p90": ordered[-(-9 * len(ordered) // 10) - 1],
                    "max": max(skews)},
        "late_rank": max(sorted(caused), key=lambda r: caused[r]) if max(caused.values()) else None,
        "per_rank": [
            {"rank": r, "wait_ns": p["wait"], "transfer_ns": p["transfer"], "caused_wait_ns": p["caused"],
             "late_count": p["late"],
             "exposed_transfer_ns": sweep_outside(p["moves"], ranks[r]["compute"]),
             "exposed_wait_ns": sweep_outside(p["waits"], ranks[r]["compute"] + p["moves"]),
             "unmatched": len(ranks[r]["comm"]) - len(paired[r])}
            for r, p in sorted(per.items())
        ],
        "collectives": rows,
    }


PER_RANK_KEYS = ("rank", "wait_ns", "transfer_ns", "caused_wait_ns", "late_count", "exposed_transfer_ns",
                 "exposed_wait_ns", "unmatched")
COLLECTIVE_KEYS = ("first_start_ns", "skew_ns", "late_rank", "time_ns", "bytes")


def assert_matches(got: dict, want: dict) -> None:
    assert got["count"] == want["count"]
    assert got["skew_ns"] == want["skew_ns"]
    assert got["late_rank"] == want["late_rank"]
    assert [{k: r[k] for k in PER_RANK_KEYS} for r in got["per_rank"]] == want["per_rank"]
    assert [{k: c[k] for k in COLLECTIVE_KEYS} for c in got["collectives"]] == \
        [{k: c[k] for k in COLLECTIVE_KEYS} for c in want["collectives"]]
    for mine, theirs in zip(got["collectives"], want["collectives"], strict=True):
        for key in ("algbw_gbps", "busbw_gbps"):
            assert mine[key] == pytest.approx(theirs[key]) if theirs[key] is not None else mine[key] is None


# --- HTA's two-rank trace ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hta_report() -> Any:
    return build_report(load_runs([FIXTURES / "hta_two_ranks"]))["runs"][0]


def test_hta_two_ranks_every_figure_exact(hta_report):
    got = hta_report["collectives"]
    ranks = raw_ranks(FIXTURES / "hta_two_ranks")
    want = expected(ranks, pairs_by_order(ranks))
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


# --- two-rank traces recorded here on two H100s (DDP and FSDP2, PyTorch profiler with record_param_comms) ---------

RECORDED = ["ours_h100_ddp_v1_2rank", "ours_h100_fsdp_v1_2rank"]
REPORT_SHELL: Any = {"schema_version": 1, "tool": "t", "generated_at": "", "baseline": "", "comparison": []}


@pytest.fixture(scope="module", params=RECORDED)
def recorded(request) -> tuple[str, Any]:
    return request.param, build_report(load_runs([FIXTURES / request.param]))["runs"][0]


def test_recorded_two_rank_traces_every_figure_exact(recorded):
    """Matched here by the kernels' own args and nearest end times, independent of the report's matching (by the
    host's record_param_comms and order within the process group)."""
    folder, report = recorded
    ranks = raw_ranks(FIXTURES / folder)
    pairs = pairs_by_nearest_end(ranks)
    got = report["collectives"]
    assert_matches(got, expected(ranks, pairs))
    assert got["matched_by"] == "order within process group" and got["groups"] == ["0"]
    # every matched pair ends within 25 us on both ranks: no collective was paired with the wrong one
    assert max(max(r["end_ns"] for r in c["ranks"]) - min(r["end_ns"] for r in c["ranks"])
               for c in got["collectives"]) < 25_000
    assert [r["label"] for r in report["multi_node"]["ranks"]] == ["rank 0", "rank 1"]


def test_recorded_late_rank_is_not_the_rank_with_most_communication_time(recorded):
    """Issue 31: the rank with the most NCCL kernel time is the one that waits; the late rank is the other."""
    folder, report = recorded
    got = report["collectives"]
    by_comm = max(report["multi_node"]["ranks"], key=lambda r: r["communication_ns"])["rank"]
    assert got["late_rank"] is not None and got["late_rank"] != by_comm
    assert report["multi_node"]["straggler"] is None and report["multi_node"]["late_rank"] == got["late_rank"]
    late = next(r for r in report["per_rank"] if r["rank"] == got["late_rank"])
    whole: Any = {**REPORT_SHELL, "runs": [report]}
    hint = f"rank {got['late_rank']}'s GPU is idle" in markdown.render(whole)
    assert hint == (late["idle_share"] >= 0.5)  # FSDP: rank 1 late at every collective with its GPU 93% idle


# --- TraceLens's NcclAnalyser on the same traces (tracelens_nccl_values.json, made by tracelens_nccl_values.py) ------

TRACELENS = json.loads((FIXTURES / "tracelens_nccl_values.json").read_text())


@pytest.mark.parametrize("folder", RECORDED)
def test_tracelens_agrees_on_skew_wait_size_and_bandwidth(folder):
    """TraceLens pairs by process group and order, from the kernels' own args; its skew, per-rank total wait, times
    arrived last and message size equal ours on its collectives (allreduce, allgather, reducescatter; no
    broadcast). Its comm latency is the shortest kernel of the ranks, ours the late rank's kernel (the same where the
    late rank's kernel is the shortest); its GB is 2^30 bytes, ours 10^9."""
    tracelens = TRACELENS["folders"][folder]
    got: Any = build_report(load_runs([FIXTURES / folder]))["runs"][0]["collectives"]
    base = int(load_trace(sorted((FIXTURES / folder).glob("*.json*"))[0]).get("baseTimeNanoseconds") or 0)
    ours = {c["ranks"][0]["start_ns"] - base: c for c in got["collectives"]}  # TraceLens reads `ts` alone
    waits = {r: 0 for r in got["ranks"]}
    last = {r: 0 for r in got["ranks"]}
    same_latency = 0
    for theirs in tracelens["collectives"]:
        start = round(theirs["rank_ts_us"]["0"] * 1000)
        mine = next(c for s, c in ours.items() if abs(s - start) <= 2)  # float microseconds: within 2 ns
        assert abs(theirs["skew_in_start_time_us"] * 1000 - mine["skew_ns"]) <= 2
        assert round(theirs["full_msg_size_mb"] * 2**20) == mine["bytes"]
        latency = theirs["comm_latency_us"] * 1000
        assert theirs["algo_bw_gbps"] * 2**30 / 1e9 == pytest.approx(mine["bytes"] / latency)
        durations = [r["end_ns"] - r["start_ns"] for r in mine["ranks"]]
        assert abs(latency - min(durations)) <= 2 and mine["time_ns"] >= min(durations)
        if mine["time_ns"] == min(durations):  # the late rank's kernel is the shortest
            same_latency += 1
            assert abs(latency - mine["time_ns"]) <= 2
        for r in mine["ranks"]:
            waits[r["rank"]] += r["wait_ns"]
        if mine["late_rank"] is not None:
            last[mine["late_rank"]] += 1
    for row in tracelens["straggler_summary"]:
        assert abs(row["total_wait_time_us"] * 1000 - waits[row["rank"]]) <= 100  # TraceLens rounds to 0.1 us
        assert row["times_arrived_last"] == last[row["rank"]]
    assert same_latency == len(tracelens["collectives"])  # on these traces, every time


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
    """HTA's comm/comp overlap (share of communication time overlapped by compute) over the kernels HTA kept (those
    launched in complete ProfilerSteps, named by correlation id): with HTA's compute (every kernel but NCCL and
    Memcpy/Memset, copy kernels on the SMs included) the sweep here gives HTA's percentage; with ours (copy kernels
    are not compute) at most as much communication is overlapped (docs/reports.md)."""
    hta = HTA_COMM["folders"][folder]
    for path in sorted((FIXTURES / folder).glob("*.json*")):
        trace = load_trace(path)
        rank = str(trace["distributedInfo"]["rank"])
        kept = set(hta["kept_kernel_correlations"][rank])
        kernels = [(e["name"], *interval(trace, e)) for e in events(trace, "kernel")
                   if e["args"]["correlation"] in kept]
        assert len(kernels) == len(kept)
        comm = [(s, e) for n, s, e in kernels if "nccl" in n.lower()]
        hta_compute = [(s, e) for n, s, e in kernels if "nccl" not in n.lower()]  # kernels: no Memcpy/Memset names
        ours_compute = [(s, e) for n, s, e in kernels if categorize(n) not in ("communication", "memory copy")]
        total = sweep_outside(comm, [])
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
    report: Any = build_report(load_runs([run]))["runs"][0]
    got = report["collectives"]
    assert got is not None
    assert (got["count"], got["late_rank"], got["skew_ns"]["max"]) == (2, 1, 7_000)
    assert [(r["rank"], r["wait_ns"], r["transfer_ns"]) for r in got["per_rank"]] == [(0, 1_000 + 7_000, 3_000 + 3_000),
                                                                                      (1, 0, 3_010 + 3_020)]
    # rank 0 waits 1 us from 5 us, with no compute then; its second wait, 10-17 us, is exposed too
    assert [r["exposed_wait_ns"] for r in got["per_rank"]] == [8_000, 0]
    assert [r["label"] for r in report["per_rank"]] == ["rank 0", "rank 1"]
    assert report["multi_node"] is not None and report["multi_node"]["late_rank"] == 1


def test_order_matching_aligns_windows_that_begin_at_different_collectives():
    """Rank 1's profiling window caught two all-reduces before rank 0's began (no Seq to tell): pairing the i-th with
    the i-th would pair each collective with an earlier one; the ends show the alignment."""
    step = 1_000_000
    r0 = rank_trace(0, [(KERNEL, 2 * step + 500 * i + 300, 2 * step + 500 * i + 400) for i in range(5)],
                    [dict(comm(n, seq=0), seq=None) for n in range(1, 6)])
    r1 = rank_trace(1, [(KERNEL, 500 * i, 500 * i + 400) for i in range(2)]
                    + [(KERNEL, 2 * step + 500 * i, 2 * step + 500 * i + 401) for i in range(5)],
                    [dict(comm(n, seq=0), seq=None) for n in range(1, 8)])
    got = analyze([r0, r1])
    assert got is not None
    assert got["matched_by"] == "order within process group" and got["count"] == 5
    assert {r["rank"]: r["unmatched"] for r in got["per_rank"]} == {0: 0, 1: 2}
    assert got["skew_ns"]["max"] == 300 and got["late_rank"] == 0


GPU_RUNS = FIXTURES.parent / "gpu_runs"


def test_our_tracer_per_rank_traces_every_figure_exact(tmp_path):
    """The embedded tracer's own two-rank H100 run (rocprofv3-format `rank<r>_<pid>_kernel_trace.csv`, no
    record_param_comms): ranks from the file names, kernels matched in order, every figure equal to the computation
    here (the CSV read with the csv module, pairs by nearest end among kernels of the same name)."""
    source = GPU_RUNS / "ours_h100_2rank"
    run = tmp_path / "ours_h100_2rank"
    (run / "vm").mkdir(parents=True)
    ranks: dict[int, dict] = {}
    for packed in sorted((source / "vm").glob("*_trace.csv.gz")):
        text = gzip.decompress(packed.read_bytes()).decode()
        (run / "vm" / packed.name.removesuffix(".gz")).write_text(text)
        if "kernel_trace" not in packed.name:
            continue
        rows = list(csv.DictReader(io.StringIO(text)))
        ranks[int(packed.name.split("_")[0].removeprefix("rank"))] = {
            "comm": sorted((int(r["Start_Timestamp"]), int(r["End_Timestamp"]), {"Collective name": r["Kernel_Name"]})
                           for r in rows if "nccl" in r["Kernel_Name"].lower()),
            "compute": [(int(r["Start_Timestamp"]), int(r["End_Timestamp"])) for r in rows
                        if "nccl" not in r["Kernel_Name"].lower() and categorize(r["Kernel_Name"]) != "memory copy"],
        }
    report: Any = build_report(load_runs([run]))["runs"][0]
    got = report["collectives"]
    assert got is not None and got["ranks"] == [0, 1] and len(ranks[0]["comm"]) == 36
    assert_matches(got, expected(ranks, pairs_by_nearest_end(ranks)))
    assert got["count"] == 36 and got["matched_by"].startswith("order")
    assert [r["label"] for r in report["per_rank"]] == ["rank 0", "rank 1"]
    assert report["multi_node"]["late_rank"] == got["late_rank"] == 0
    by_comm = max(report["multi_node"]["ranks"], key=lambda r: r["communication_ns"])["rank"]
    assert by_comm == 1  # the rank with the most NCCL kernel time is the one that waits
