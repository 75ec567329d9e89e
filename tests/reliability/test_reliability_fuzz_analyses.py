"""Red team of the analyses added for issues 31 and 32 (trace tables, collectives across ranks, per-rank headline,
operator efficiency from shapes, idle-time causes and launch latency) and their views, with generated cases from
fixed seeds (issue 33's contract):

- real 2-rank H100 DDP traces (tests/fixtures/kineto/ours_h100_ddp_v1_2rank, sliced to their first collectives and
  the operators around them) with corrupted details: args of wrong types, unknown dtypes, garbage shapes, missing
  or repeated ids, wrong distributedInfo and deviceProperties, zero-length kernels, clock offsets, one rank file,
  two files of one rank, many ranks, names that carry markup and control bytes. `report` must exit 0 or 2 (never
  the bug handler), its JSON must load with a strict parser, its Markdown and HTML must carry no raw markup or
  control byte from a name;
- generated collectives fed to the analysis directly, checked against an exact computation written here (skew,
  late rank, wait and transfer), and timed where the matching once was quadratic;
- generated operator args fed to the cost models: never an exception, never a negative or unbounded count, and
  the GEMM family equal to a hand computation.
"""
from __future__ import annotations

import copy
import gzip
import json
import random
import re
import tempfile
import time
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.reports.analyses import collectives as coll
from madengine_rocprof.reports.analyses import efficiency, op_models

from .contract_helpers import BUG_MARK, cli, strict_json, time_limit

KINETO = Path(__file__).resolve().parents[1] / "fixtures" / "kineto"
DDP = KINETO / "ours_h100_ddp_v1_2rank"
GENERATED_REPORTS = 80  # whole `report` runs on mutated real traces (0.1 s of CPU each)
GENERATED_COLLECTIVES = 400
GENERATED_COSTS = 1500

EVIL = ["<script>alert(1)</script>", "a|b", "x\ny", "\x1b[2J", "\x00nul", "</svg><script>", "&amp;\"'", "`code`",
        "\r\u2028"]
GARBAGE = [10**30, 2**63, 2**64, -1, -2**63, 1e308, -1e308, 1.5, 0, True, None, "12", "", [], {}, [[1]], "nan",
           10**400, [[-1, 5]], [[10**30, 10**30]], [[1e308, 2]], [[1.5, 2.0]], [[True, False]], [["x"]], [[[[[1]]]]],
           "[[1,2]]", [1, [2, [3]]], ["c10::Unknown", "float"], ["float", "float"], [[2**62, 2**62], [2**62, 2**62]],
           ["[1, 1]", "garbage", "9" * 5000], ["True", "False"], {"a": 1}, *EVIL]
CPU_ARGS = ["Input Dims", "Input type", "Input Strides", "Concrete Inputs", "External id", "Sequence number"]
COMM_ARGS = ["Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size", "Process Group Name",
             "Process Group Description", "Process Group Ranks", "Seq"]


@cache
def seeds() -> tuple[dict, dict]:
    """Each rank's trace cut to its first 12 collective kernels, 60 other kernels before the last of them, their
    runtime calls and operators, the record_param_comms in that window and two ProfilerSteps: real structure,
    small enough to report in a tenth of a second."""
    out = []
    for rank in (0, 1):
        trace = json.loads(gzip.decompress((DDP / f"ddp_v1_2rank_rank{rank}.pt.trace.json.gz").read_bytes()))
        events = trace["traceEvents"]
        kernels = [e for e in events if e.get("cat") == "kernel"]
        nccl = [e for e in kernels if "nccl" in e["name"]][:12]
        until = max(e["ts"] + e["dur"] for e in nccl)
        compute = [e for e in kernels if "nccl" not in e["name"] and e["ts"] < until][:60]
        correlations = {e["args"].get("correlation") for e in nccl + compute}
        runtime = [e for e in events if e.get("cat") == "cuda_runtime"
                   and e.get("args", {}).get("correlation") in correlations]
        ids = {e["args"].get("External id") for e in runtime + nccl + compute}
        ops = [e for e in events if e.get("cat") == "cpu_op" and (
            e["args"].get("External id") in ids or (e["name"] == "record_param_comms" and e["ts"] < until))]
        steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")][:2]
        out.append({**{k: v for k, v in trace.items() if k != "traceEvents"},
                    "traceEvents": ops + runtime + nccl + compute + steps})
    return out[0], out[1]


def mutate(r: random.Random, traces: list[dict]) -> tuple[str, list[tuple[int, dict]]]:
    """One class of corruption, applied 1-4 times; returns the class and the (file number, trace) pairs to write."""
    kind = r.choice(["cpu", "comm", "kernel", "dist", "props", "corr", "names", "times", "seq", "files"])
    files = list(enumerate(traces))
    for _ in range(r.randint(1, 4)):
        t = r.choice(traces)
        events = t["traceEvents"]
        if kind == "cpu":
            r.choice([e for e in events if e.get("cat") == "cpu_op"])["args"][r.choice(CPU_ARGS)] = r.choice(GARBAGE)
        elif kind == "comm":
            e = r.choice([e for e in events if e.get("name") == "record_param_comms"])
            key = r.choice(COMM_ARGS)
            if r.random() < 0.3:
                e["args"].pop(key, None)
            else:
                e["args"][key] = r.choice([*GARBAGE, -5, 0, 1, 2**62, -2**40])
        elif kind == "kernel":
            e = r.choice([e for e in events if e.get("cat") == "kernel"])
            e["args"][r.choice(["correlation", "External id", "device", "stream"])] = r.choice(GARBAGE)
        elif kind == "dist":
            t["distributedInfo"] = r.choice([r.choice(GARBAGE), {"rank": r.choice(GARBAGE), "world_size": 2},
                                             {"rank": r.randint(0, 3), "world_size": r.choice(GARBAGE)}])
        elif kind == "props":
            t["deviceProperties"] = r.choice([r.choice(GARBAGE), [r.choice(GARBAGE)],
                                              [{"id": r.choice(GARBAGE), "name": r.choice(GARBAGE)}],
                                              [{"id": 0, "name": r.choice(EVIL)}]])
        elif kind == "corr":
            linked = [e for e in events if e.get("cat") in ("kernel", "cuda_runtime")]
            a, b = r.choice(linked), r.choice(linked)
            if r.random() < 0.5:
                b["args"]["correlation"] = a["args"].get("correlation")
            else:
                b["args"].pop("correlation", None)
        elif kind == "names":
            e = r.choice([e for e in events if e.get("cat") in ("kernel", "cpu_op")])
            e["name"] = r.choice(["ncclDevKernel_AllReduce_", "aten::mm", ""]) + r.choice(EVIL) + e["name"][:20]
        elif kind == "times":
            e = r.choice([e for e in events if e.get("cat") == "kernel"])
            e["dur" if r.random() < 0.6 else "ts"] = r.choice([0, 0.001, 1e12, e["ts"] + 1e9])
        elif kind == "seq":
            for n, e in enumerate(e for e in events if e.get("name") == "record_param_comms"):
                e["args"]["Seq"] = r.choice([n, 0, n // 2, -n])
                e["args"]["Process Group Name"] = "0"
    if kind == "files":
        c = r.random()
        if c < 0.25:
            files = files[:1]
        elif c < 0.5:
            files = [(0, traces[0]), (1, traces[0])]
        elif c < 0.75:
            files = [(i, traces[i % 2]) for i in range(r.choice([3, 8, 16]))]
        else:  # rank 1's clock ahead or behind
            shift = r.choice([1e6, -1e9, 3.7e3])
            for e in traces[1]["traceEvents"]:
                e["ts"] += shift
    return kind, files


def check_outputs(folder: Path) -> dict:
    """The JSON strictly parsed; no markup or control byte from a name in the Markdown or the HTML."""
    report = strict_json((folder / "r.json").read_text())
    markdown, html = (folder / "r.md").read_text(), (folder / "r.html").read_text()
    for text, what in ((markdown, "Markdown"), (html, "HTML")):
        for raw in ("<script", "</svg><script", "\x1b", "\x00", "\r"):
            assert raw not in text, (what, raw)
    for line in markdown.splitlines():  # a table row keeps its cells: a name's | is escaped, its newline gone
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = re.split(r"(?<!\\)\|", line)
            header = markdown.splitlines()[markdown.splitlines().index(line)]
            assert len(cells) == len(re.split(r"(?<!\\)\|", header))
    return report


def check_invariants(report: dict) -> None:
    run = report["runs"][0]
    c = run.get("collectives")
    if c:
        for row in c["collectives"]:
            assert row["bytes"] is None or row["bytes"] >= 0
            assert row["algbw_gbps"] is None or row["algbw_gbps"] >= 0
            assert row["group_size"] >= len(row["ranks"])
        if c["late_rank"] is not None and len(c["per_rank"]) == 2:
            late = next(p for p in c["per_rank"] if p["rank"] == c["late_rank"])
            assert late["wait_ns"] <= max(p["wait_ns"] for p in c["per_rank"])
    for device in (run.get("idle_causes") or {}).get("devices", []):  # four causes that add up to the idle time
        for part in [device, *(device.get("iterations") or [])]:
            causes = [part[k] for k in ("launch_ns", "sync_ns", "other_ranks_ns", "other_ns")]
            assert sum(causes) == part["idle_ns"] <= part["span_ns"] and min(causes) >= 0
            assert sum(part["other"].values()) == part["other_ns"]
    for row in (run.get("efficiency") or {}).get("rows", []):
        assert row["flops"] >= 0 and row["bytes"] >= 0
        assert (row["roofline_pct"] or 0) <= 100 or row.get("note") == efficiency.ABOVE_ROOFLINE


def test_generated_mutations_of_real_traces_keep_the_contract():
    base = seeds()
    found: dict[str, int] = {}
    for seed in range(GENERATED_REPORTS):
        r = random.Random(seed)
        traces = copy.deepcopy(list(base))
        kind, files = mutate(r, traces)
        found[kind] = found.get(kind, 0) + 1
        with tempfile.TemporaryDirectory(prefix="fuzz_") as tmp:
            run = Path(tmp) / "run"
            run.mkdir()
            for n, trace in files:
                (run / f"rank{n}.pt.trace.json").write_text(json.dumps(trace))
            code, _, err = cli("report", run, "--json", Path(tmp) / "r.json", "--markdown", Path(tmp) / "r.md",
                               "--html", Path(tmp) / "r.html", "-q")
            assert code in (0, 2) and BUG_MARK not in err and "Traceback" not in err, (seed, kind, err[-2000:])
            if code == 2:
                assert err.startswith("error: ") and "fix:" in err, (seed, kind, err)
                continue
            check_invariants(check_outputs(Path(tmp)))
    assert len(found) == 10  # every class of corruption drawn


# ---- collectives, generated and checked against an exact computation ---------------------------------------------


def rank_trace(rank: int, spans: list[tuple[int, int]], meta: list[dict] | None = None) -> coll.RankTrace:
    """A rank's collective kernels at the given (start, end); with `meta`, each launched (correlation) inside a
    record_param_comms carrying those args."""
    kernels = pl.DataFrame({"name": ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] * len(spans),
                            "start": [s for s, _ in spans], "end": [e for _, e in spans],
                            "correlation": list(range(1, len(spans) + 1))})
    if meta is None:
        return coll.RankTrace(rank, f"rank{rank}", kernels)
    runtime = pl.DataFrame({"name": ["cudaLaunchKernel"] * len(spans), "pid": [1] * len(spans),
                            "tid": [1] * len(spans), "start": [s - 50 for s, _ in spans],
                            "correlation": list(range(1, len(spans) + 1))})
    comms = pl.DataFrame([{"name": "record_param_comms", "pid": 1, "tid": 1, "start": s - 60, "end": s - 40,
                           "collective": m.get("collective"), "in_nelems": m.get("in_nelems"),
                           "out_nelems": m.get("out_nelems"), "dtype": m.get("dtype"),
                           "group_size": m.get("group_size"), "pg_name": m.get("pg_name"), "seq": m.get("seq")}
                          for (s, _), m in zip(spans, meta, strict=True)],
                         schema={"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64,
                                 "end": pl.Int64, "collective": pl.String, "in_nelems": pl.Int64,
                                 "out_nelems": pl.Int64, "dtype": pl.String, "group_size": pl.Int64,
                                 "pg_name": pl.String, "seq": pl.Int64})
    return coll.RankTrace(rank, f"rank{rank}", kernels, runtime, comms)


def test_generated_collectives_equal_an_exact_computation():
    for seed in range(GENERATED_COLLECTIVES):
        r = random.Random(seed)
        n_ranks, n = r.randint(2, 5), r.randint(1, 30)
        with_meta = r.random() < 0.6
        meta = [{"collective": r.choice(["allreduce", "allgather", None, "??"]),
                 "in_nelems": r.choice([1024, 0, -5, 2**62, None]), "out_nelems": r.choice([1024, -1, None]),
                 "dtype": r.choice(["Float", "BFloat16", "Unknown", None]),
                 "group_size": r.choice([n_ranks, 0, -3, 1, 2**40, None]), "pg_name": "0", "seq": i}
                for i in range(n)]
        starts = {rank: [i * 1_000_000 + r.randint(0, 400_000) for i in range(n)] for rank in range(n_ranks)}
        ends = [i * 1_000_000 + 500_000 + r.randint(0, 1_000) for i in range(n)]
        traces = [rank_trace(rank, list(zip(starts[rank], ends, strict=True)), meta if with_meta else None)
                  for rank in range(n_ranks)]
        result = coll.analyze(traces)
        assert result is not None and result["count"] == n
        json.dumps(result, allow_nan=False)
        caused = dict.fromkeys(range(n_ranks), 0)
        for i, row in enumerate(result["collectives"]):
            first, last = min(starts[k][i] for k in starts), max(starts[k][i] for k in starts)
            late = min(k for k in starts if starts[k][i] == last)
            assert (row["skew_ns"], row["late_rank"]) == (last - first, late if last > first else None)
            for entry in row["ranks"]:
                k = entry["rank"]
                assert entry["wait_ns"] == last - starts[k][i] and entry["transfer_ns"] == ends[i] - last
                caused[late] += entry["wait_ns"]
            assert row["bytes"] is None or row["bytes"] >= 0
            assert row["group_size"] >= n_ranks and (row["busbw_gbps"] or 0) >= 0
        top = max(caused.values())
        assert result["late_rank"] == (min(k for k, v in caused.items() if v == top) if top else None)
        # the late rank is the one the others wait on: it never waits more than every other rank
        waits = {p["rank"]: p["wait_ns"] for p in result["per_rank"]}
        if result["late_rank"] is not None and n_ranks == 2:
            assert waits[result["late_rank"]] <= min(waits.values()) or len(set(waits.values())) == 1


def test_matching_by_order_is_linear_in_the_collectives():
    """20,000 collectives a rank with no sequence numbers: the offset search compared every shift of one rank's
    sequence against the other's (400 s here); bounded candidates and sampled pairs keep it to seconds."""
    n = 20_000
    traces = [rank_trace(rank, [(i * 100_000 + (5_000 if rank == 0 else 0) + (3 if rank == 1 and i % 7 else 0),
                                 i * 100_000 + 20_000) for i in range(n + 5 * rank)]) for rank in (0, 1)]
    began = time.perf_counter()
    with time_limit(60):
        result = coll.analyze(traces)
    assert result is not None and result["count"] == n and result["late_rank"] == 0
    assert time.perf_counter() - began < 20


def test_collective_links_are_linear_under_a_long_annotation():
    """One nccl:* annotation spanning the whole trace made every kernel's lookup scan every earlier comms row."""
    n = 20_000
    spans = [(i * 10_000 + 1_000, i * 10_000 + 2_000) for i in range(n)]
    meta = [{"collective": "allreduce", "in_nelems": 256, "out_nelems": 256, "dtype": "Float", "group_size": 2,
             "pg_name": "0", "seq": i} for i in range(n)]
    traces = [rank_trace(rank, spans, meta) for rank in (0, 1)]
    for t in traces:
        assert t.comms is not None
        t.comms = pl.concat([t.comms, t.comms.head(1).with_columns(
            pl.lit("nccl:all_reduce").alias("name"), pl.lit(0).cast(pl.Int64).alias("start"),
            pl.lit(n * 10_000).cast(pl.Int64).alias("end"), pl.lit(None).cast(pl.String).alias("collective"))])
    began = time.perf_counter()
    with time_limit(60):
        result = coll.analyze(traces)
    assert result is not None and result["count"] == n and result["matched_by"] == "sequence number"
    assert result["collectives"][0]["bytes"] == 256 * 4
    assert time.perf_counter() - began < 20


def test_corrupt_counts_give_no_negative_bytes_or_impossible_groups():
    spans = [(1_000, 5_000)]
    for nelems, group, want_bytes, want_n in ((-5, 2, None, 2), (-5, -3, None, 2), (64, 0, 256, 2), (64, 1, 256, 2),
                                              (64, 8, 256, 8)):
        meta = [{"collective": "allreduce", "in_nelems": nelems, "out_nelems": None, "dtype": "Float",
                 "group_size": group, "pg_name": "0", "seq": 0}]
        result = coll.analyze([rank_trace(0, spans, meta), rank_trace(1, [(2_000, 5_000)], meta)])
        assert result is not None
        row = result["collectives"][0]
        assert (row["bytes"], row["group_size"]) == (want_bytes, want_n)


# ---- operator costs ----------------------------------------------------------------------------------------------


def test_generated_operator_args_never_raise_and_stay_bounded():
    r = random.Random(33)
    names = sorted(op_models.MODELS)
    dims_pool = [[], [[]], [[-1, 2]], [[2**40, 2**40], [2**40, 2**40]], [[1.5, 2]], [[True, 2]], [["3", 4]],
                 [[[1]]], "[[1, 2]]", [[1, 2], [2, 3], [3]], None, {}]
    for _ in range(GENERATED_COSTS):
        name = r.choice(names)
        k = r.randint(0, 4)
        dims = r.choice(dims_pool) if r.random() < 0.5 else [
            [r.choice([0, 1, 2, 7, 64, 2**31, 10**12]) for _ in range(r.randint(0, 4))] for _ in range(k)]
        types = [r.choice(["float", "c10::BFloat16", "c10::Half", "Unknown", "", None, 3, "double"])
                 for _ in range(k)]
        strides = r.choice([None, [], [[1]], "x", [[2**70]]])
        concrete = [r.choice(["", "True", "[1, 1]", "garbage", "9" * 5000, "[]", "(3,)", None]) for _ in range(k)]
        found = op_models.cost(name, dims, types, strides, concrete)
        if found is not None:
            assert type(found.flops) is int and type(found.bytes) is int
            assert 0 <= found.flops <= op_models.MAX_COUNT and 0 <= found.bytes <= op_models.MAX_COUNT


def test_generated_gemm_shapes_equal_a_hand_computation():
    r = random.Random(32)
    for _ in range(300):
        m, k, n, b = (r.randint(1, 4096) for _ in range(4))
        dtype, size = r.choice([("float", 4), ("c10::BFloat16", 2), ("c10::Half", 2)])
        mm = op_models.cost("aten::mm", [[m, k], [k, n]], [dtype, dtype], [], [])
        assert mm is not None and (mm.flops, mm.bytes) == (2 * m * n * k, (m * k + k * n + m * n) * size)
        addmm = op_models.cost("aten::addmm", [[n], [m, k], [k, n]], [dtype] * 3, [], ["", "", ""])
        assert addmm is not None and (addmm.flops, addmm.bytes) == (
            2 * m * n * k + m * n, (m * k + k * n + m * n + n) * size)
        bmm = op_models.cost("aten::bmm", [[b, m, k], [b, k, n]], [dtype, dtype], [], [])
        assert bmm is not None and (bmm.flops, bmm.bytes) == (b * 2 * m * n * k, b * (m * k + k * n + m * n) * size)
        # a mismatched inner dimension is not a GEMM of these shapes: no cost, never a guess
        assert op_models.cost("aten::mm", [[m, k], [k + 1, n]], [dtype, dtype], [], []) is None


# ---- regressions: each failed on main before this pass -----------------------------------------------------------


def _write(folder: Path, traces: list[dict]) -> Path:
    run = folder / "run"
    run.mkdir()
    for n, trace in enumerate(traces):
        (run / f"rank{n}.pt.trace.json").write_text(json.dumps(trace))
    return run


def test_a_control_byte_in_a_device_name_never_reaches_the_html(tmp_path):
    traces = copy.deepcopy(list(seeds()))
    traces[0]["deviceProperties"] = [{"id": 0, "name": "\x1b[2J\x00evil"}]
    run = _write(tmp_path, traces)
    code, _, err = cli("report", run, "--json", tmp_path / "r.json", "--markdown", tmp_path / "r.md", "--html",
                       tmp_path / "r.html", "-q")
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "\x1b" not in html and "\x00" not in html and "\\x1b[2J\\x00evil" in html


def test_ids_of_mixed_types_are_absent_not_an_internal_error(tmp_path):
    traces = copy.deepcopy(list(seeds()))
    ops = [e for e in traces[0]["traceEvents"] if e.get("cat") == "cpu_op"]
    # a ragged list after integers: polars' lenient conversion raised TypeError (the fuzz run's seed 1374)
    ops[-1]["args"]["External id"] = [1, [2, [3]]]
    ops[-2]["args"]["Sequence number"] = [1, [2, [3]]]
    run = _write(tmp_path, traces)
    code, _, err = cli("report", run, "--json", tmp_path / "r.json", "-q")
    assert code == 0 and BUG_MARK not in err, err
    strict_json((tmp_path / "r.json").read_text())


def test_a_float_or_text_id_links_nothing():
    from madengine_rocprof.reports.kineto_reader import _int_column

    assert _int_column([1, 2, None]).to_list() == [1, 2, None]
    assert _int_column([1, 1.5, "12", [3], {"a": 1}, 2**70, 3]).to_list() == [1, None, None, None, None, None, 3]
    assert _int_column([1, [1, [2, [3]]]]).to_list() == [1, None]


def test_rows_above_the_roofline_carry_a_note(tmp_path):
    """The seed's fp32 aten::mul and aten::silu on H100 run at 5.3 and 4.0 TB/s: their 8-16 MB fit in the 50 MB L2,
    beyond the 3.35 TB/s of HBM the roofline assumes."""
    run = _write(tmp_path, list(seeds()))
    code, _, err = cli("report", run, "--json", tmp_path / "r.json", "--markdown", tmp_path / "r.md", "-q")
    assert code == 0, err
    rows = strict_json((tmp_path / "r.json").read_text())["runs"][0]["efficiency"]["rows"]
    above = [r for r in rows if r["roofline_pct"] and r["roofline_pct"] > 100]
    assert above and all(r["note"] == efficiency.ABOVE_ROOFLINE for r in above)
    assert all("note" not in r for r in rows if r not in above)
    assert "groups run above 100% of their roofline" in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize("files", [1, 2])
def test_one_rank_file_or_one_rank_twice(tmp_path, files):
    base = seeds()
    run = _write(tmp_path, [base[0]] * files)
    code, _, err = cli("report", run, "--json", tmp_path / "r.json", "-q")
    assert code == 0, err
    c = strict_json((tmp_path / "r.json").read_text())["runs"][0]["collectives"]
    if files == 1:
        assert c is None
    else:  # two files naming rank 0: numbered in file order, said so, never merged into one rank
        assert c["ranks"] == [0, 1] and c["skew_ns"]["max"] == 0 and c["late_rank"] is None
        assert any("do not name distinct ranks" in n for n in c["notes"])


def test_many_ranks_keep_the_picture_and_table_bounded():
    """512 ranks drew 13 MB of SVG and a 518-column table; the late ranks keep their lanes and columns."""
    from madengine_rocprof.reports.blocks import Picture, Table
    from madengine_rocprof.reports.views import collectives as view

    r = random.Random(512)
    traces = [rank_trace(k, [(i * 1_000_000 + r.randint(0, 400_000), i * 1_000_000 + 500_000) for i in range(50)])
              for k in range(512)]
    result = coll.analyze(traces)
    assert result is not None and len(result["per_rank"]) == 512
    section = view.section({"collectives": result, "per_rank": None}, 10)  # type: ignore[typeddict-item]
    assert section is not None
    svg = next(b.svg for b in section.blocks if isinstance(b, Picture))
    widest = max(len(b.columns) for b in section.blocks if isinstance(b, Table))
    assert len(svg) < 1_000_000 and widest <= 6 + view.RANKS_DRAWN
    assert f">rank {result['late_rank']}<" in svg


def test_two_traces_claiming_one_rank_are_never_merged_in_the_headline(tmp_path):
    """Both files say rank 0: the collectives number them 0 and 1 (in file order); the headline gave both rows the
    label `rank 0` and the first file's wait at collectives, the second file's wait to no one."""
    from madengine_rocprof.reports.views import ranks as view

    traces = copy.deepcopy(list(seeds()))
    traces[1]["distributedInfo"]["rank"] = 0
    run = _write(tmp_path, traces)
    code, _, err = cli("report", run, "--json", tmp_path / "r.json", "-q")
    assert code == 0, err
    report = strict_json((tmp_path / "r.json").read_text())["runs"][0]
    labels = [r["label"] for r in report["per_rank"]]
    assert len(set(labels)) == 2 and all(label.startswith("rank 0 (") for label in labels)
    waits = {r["origin"]: r["wait_ns"] for r in report["collectives"]["per_rank"]}
    assert len(set(waits.values())) == 2  # the two files waited differently: each row must carry its own
    line = view.headline(report)[0]
    for row in report["per_rank"]:
        assert f"**{row['label']}** busy" in line
        part = line.split(f"**{row['label']}** busy", 1)[1].split("; **")[0]
        assert (f"({waits[row['origin']] / 1e6:,.3f} ms of it waiting" in part) == bool(waits[row["origin"]])


def test_many_ranks_keep_the_headline_short():
    from madengine_rocprof.reports.views import ranks as view

    rows = [{"rank": k, "label": f"rank {k}", "origin": f"rank{k}", "busy_ns": 1_000 + k, "idle_ns": 9_000 - k,
             "idle_share": (9_000 - k) / 10_000} for k in range(512)]
    facts = view.headline({"per_rank": rows, "collectives": None})  # type: ignore[typeddict-item]
    assert facts[0].startswith("512 ranks, the least and the most idle: **rank 511**") and "**rank 0**" in facts[0]
    assert len(facts[0]) < 400


def test_shapes_that_are_not_lists_are_cut_like_any_shape():
    from madengine_rocprof.reports.views import efficiency as view

    assert len(view._shape("9" * 10_000)) == view.SHAPE_CHARS
    assert view._shape([[2, 3], [3, 4]]) == "2x3 3x4" and view._shape(None) == ""


def test_a_device_id_beyond_int64_is_noted_not_an_internal_error(tmp_path):
    """`args.device` 10**400 on one kernel: the idle split compared it as a polars literal (OverflowError beyond
    Int128; the fuzz run's seed 7239)."""
    traces = copy.deepcopy(list(seeds()))
    next(e for e in traces[0]["traceEvents"] if e.get("cat") == "kernel")["args"]["device"] = 10**400
    run = _write(tmp_path, traces)
    code, _, err = cli("report", run, "--json", tmp_path / "r.json", "-q")
    assert code == 0 and BUG_MARK not in err, err
    idle = strict_json((tmp_path / "r.json").read_text())["runs"][0]["idle_causes"]
    assert any("the device id is not a device number (a corrupt `args.device`" in n for n in idle["notes"])
    for device in idle["devices"]:
        assert sum(device[k] for k in ("launch_ns", "sync_ns", "other_ranks_ns", "other_ns")) == device["idle_ns"]
