"""trace_tables: per-event frames of real traces (tests/fixtures/kineto, PROVENANCE.md) equal an independent load
written here (json + gzip, microseconds as Decimal), to the nanosecond; and rocprofv3-format CSV folders equal the
csv module's reading of the same files."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.reports import load_runs, trace_tables
from madengine_rocprof.reports.model import TimingSource

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
KINETO = FIXTURES / "kineto"
TRACES = [
    "hta_two_ranks/sampled_rank-0.json.gz",
    "hta_two_ranks/sampled_rank-1.json.gz",
    "tracelens_h100_bert/gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens_mi300_bert/gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens_h100_falconsai/Falconsai_nsfw_image_detection__1016002.json.gz",
    "ours_h200_tt_v1/tt_v1_b8s128.pt.trace.json.gz",
    "hta_cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
]


# --- the independent load ---------------------------------------------------------------------------------------------

def load(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh, parse_float=Decimal)


def span(trace: dict, event: dict) -> tuple[int, int]:
    base = int(trace.get("baseTimeNanoseconds") or 0)
    start = base + int(Decimal(event["ts"]) * 1000)
    return start, start + int(Decimal(event["dur"]) * 1000)


def integer(value):
    return value if type(value) is int else None


def compact(value):
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def expected(trace: dict) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {"kernels": [], "copies": [], "runtime": [], "cpu_ops": [], "comms": []}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        cat, args = str(e.get("cat", "")).lower(), e.get("args") or {}
        start, end = span(trace, e) if cat in (
            "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "hip_runtime", "cpu_op",
            "user_annotation") else (0, 0)
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            out["kernels" if cat == "kernel" else "copies"].append((
                e["name"], integer(args.get("device", e.get("pid"))), integer(args.get("stream", e.get("tid"))),
                start, end, integer(args.get("correlation")), integer(args.get("External id"))))
        elif cat in ("cuda_runtime", "cuda_driver", "hip_runtime"):
            out["runtime"].append((e["name"], integer(e.get("pid")), integer(e.get("tid")), start, end,
                                   integer(args.get("correlation")), integer(args.get("External id"))))
        elif cat in ("cpu_op", "user_annotation"):
            out["cpu_ops"].append((
                e["name"], integer(e.get("pid")), integer(e.get("tid")), start, end, integer(args.get("External id")),
                compact(args.get("Input Dims")), compact(args.get("Input type")),
                compact(args.get("Input Strides")), compact(args.get("Concrete Inputs"))))
            if e["name"] == "record_param_comms" or e["name"].startswith("nccl:"):
                ranks = args.get("Process Group Ranks")
                out["comms"].append((
                    e["name"], integer(e.get("pid")), integer(e.get("tid")), start, end,
                    integer(args.get("External id")), args.get("Collective name"), integer(args.get("In msg nelems")),
                    integer(args.get("Out msg nelems")), args.get("dtype"), integer(args.get("Group size")),
                    args.get("Process Group Name"), args.get("Process Group Description"), integer(args.get("Seq")),
                    ranks if isinstance(ranks, str) else compact(ranks)))
    return out


COLUMNS = {"kernels": trace_tables.GPU_COLUMNS, "copies": trace_tables.GPU_COLUMNS,
           "runtime": trace_tables.RUNTIME_COLUMNS, "cpu_ops": trace_tables.CPU_COLUMNS,
           "comms": trace_tables.COMM_COLUMNS}


def kineto_source(path: Path) -> TimingSource:
    return TimingSource(path=path, rel=path.name, fmt="kineto", process=path.name, pass_id=None)


# --- Kineto -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", TRACES)
def test_kineto_tables_equal_an_independent_load(rel):
    path = KINETO / rel
    trace = load(path)
    tables = trace_tables.load_tables(kineto_source(path))
    assert tables is not None and tables.fmt == "kineto" and tables.path == path
    want = expected(trace)
    for key, columns in COLUMNS.items():
        frame = getattr(tables, key)
        assert frame.columns[:len(columns)] == list(columns), key
        got = list(frame.select(columns).iter_rows())
        assert got == want[key], key  # in file order, every value, exact ns
    info = trace.get("distributedInfo") or {}
    assert tables.distributed == info and tables.rank == info.get("rank")
    assert tables.world_size == info.get("world_size")
    assert [dict(d) for d in tables.device_properties] == json.loads(
        json.dumps(trace.get("deviceProperties") or [], default=float))
    steps: dict[int, tuple[int, int]] = {}  # the host's step ranges (not gpu_user_annotation), the first of a number
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op") and str(
                e.get("name", "")).startswith("ProfilerStep#"):
            steps.setdefault(int(e["name"].split("#")[1]), span(trace, e))
    assert [(s.number, s.start_ns, s.end_ns) for s in tables.steps] == [(n, *s) for n, s in sorted(steps.items())]


def test_two_ranks_carry_their_rank_and_links():
    """HTA's two-rank trace: ranks from distributedInfo; every kernel's correlation id names one runtime call of its
    rank (the 2023 Kineto there writes the correlation id as the runtime call's External id: no operator link)."""
    for rank in (0, 1):
        tables = trace_tables.load_tables(kineto_source(KINETO / f"hta_two_ranks/sampled_rank-{rank}.json.gz"))
        assert tables is not None and tables.rank == rank and tables.world_size == 128
        assert tables.distributed["backend"] == "nccl"
        joined = tables.kernels.join(tables.runtime, on="correlation", how="left", suffix="_rt")
        assert joined["name_rt"].null_count() == 0  # each kernel has its launch
        assert tables.comms.height > 0 and set(tables.comms["name"]) >= {"record_param_comms"}


def test_runtime_calls_link_to_operators():
    """Our H200 trace (torch 2.11): a runtime call's External id names the CPU operator that made it."""
    tables = trace_tables.load_tables(kineto_source(KINETO / "ours_h200_tt_v1/tt_v1_b8s128.pt.trace.json.gz"))
    assert tables is not None and tables.rank is None and tables.distributed == {}
    launches = tables.kernels.join(tables.runtime, on="correlation", how="inner", suffix="_rt")
    assert launches.height == tables.kernels.height
    ops = set(tables.cpu_ops["external_id"].drop_nulls().to_list())
    linked = launches["external_id_rt"].drop_nulls()
    assert linked.len() > 0.9 * launches.height and set(linked.to_list()) <= ops


def test_shapes_are_compact_json_text():
    """TraceLens's H100 BERT trace was recorded with record_shapes: the four shape args as compact JSON text."""
    tables = trace_tables.load_tables(
        kineto_source(KINETO / "tracelens_h100_bert/gaunernst_bert-small-uncased__1016001.json.gz"))
    assert tables is not None
    mm = tables.cpu_ops.filter(pl.col("name") == "aten::addmm").row(0, named=True)
    assert mm["input_dims"].startswith("[[") and " " not in mm["input_dims"]
    assert json.loads(mm["input_types"])[0] in ("float", "c10::Half", "c10::BFloat16")
    assert mm["input_strides"] is not None and mm["concrete_inputs"] is not None
    assert tables.device_properties[0]["name"] == "NVIDIA H100 80GB HBM3"


def test_report_pass_keeps_the_tables(tmp_path):
    """The report reads a Kineto trace once: the tables come from its own pass, and load_tables returns them."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(KINETO / "hta_two_ranks/sampled_rank-0.json.gz", run_dir / "rank0.json.gz")
    (run,) = load_runs([run_dir])
    (source,) = run.timing
    tables = trace_tables.load_tables(source)
    assert tables is not None and tables is source.tables
    assert tables.kernels.height == sum(k.calls for k in source.kernels.values())


def test_formats_without_links_have_no_tables(tmp_path):
    stats = tmp_path / "1_kernel_stats.csv"
    stats.write_text('"Name","Calls","TotalDurationNs"\n"k",1,5\n')
    source = TimingSource(path=stats, rel=stats.name, fmt="rocprofv3-stats", process="1", pass_id=None)
    assert trace_tables.load_tables(source) is None


# --- rocprofv3-format CSV ---------------------------------------------------------------------------------------------

def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_rocprofv3_csv_tables(tmp_path):
    """rocprofv3's published kernel_trace.csv and HIP API trace, as the per-rank files of rank 3: kernels with their
    Correlation_Id, API calls from the same prefix's hip_api_trace.csv, the rank from the file name."""
    docs = FIXTURES / "rocprofv3" / "docs-data"
    kernels = shutil.copy(docs / "kernel_trace.csv", tmp_path / "rank3_834304_kernel_trace.csv")
    api = shutil.copy(docs / "hip_trace.csv", tmp_path / "rank3_834304_hip_api_trace.csv")
    (run,) = load_runs([tmp_path])
    (source,) = run.timing
    tables = trace_tables.load_tables(source)
    assert tables is not None and tables.fmt == "rocprofv3-csv" and tables.rank == 3
    want = [(r["Kernel_Name"], int(r["Agent_Id"].split()[-1]), int(r["Stream_Id"]), int(r["Start_Timestamp"]),
             int(r["End_Timestamp"]), int(r["Correlation_Id"]), None) for r in csv_rows(Path(kernels))]
    assert list(tables.kernels.select(trace_tables.GPU_COLUMNS).iter_rows()) == want
    want_api = [(r["Function"], int(r["Process_Id"]), int(r["Thread_Id"]), int(r["Start_Timestamp"]),
                 int(r["End_Timestamp"]), int(r["Correlation_Id"]), None) for r in csv_rows(Path(api))]
    assert list(tables.runtime.select(trace_tables.RUNTIME_COLUMNS).iter_rows()) == want_api
    assert tables.cpu_ops.height == 0 and tables.comms.height == 0 and tables.steps == []
    assert trace_tables.load_tables(source) is tables  # read once


def test_rocprofv3_csv_bad_api_row_names_its_line(tmp_path):
    docs = FIXTURES / "rocprofv3" / "docs-data"
    shutil.copy(docs / "kernel_trace.csv", tmp_path / "7_kernel_trace.csv")
    lines = (docs / "hip_trace.csv").read_text().splitlines()
    lines[2] = lines[2].replace(lines[2].split(",")[-1], "1_000")
    (tmp_path / "7_hip_api_trace.csv").write_text("\n".join(lines) + "\n")
    (run,) = load_runs([tmp_path])
    from madengine_rocprof.errors import UserError
    with pytest.raises(UserError) as err:
        trace_tables.load_tables(run.timing[0])
    assert err.value.line == 3 and "1_000" in str(err.value)


def _loop_kernels(monkeypatch, path: Path) -> pl.DataFrame | str:
    """The kernel table as the csv-module loop reads it (the fast path switched off), or its error."""
    from madengine_rocprof.errors import UserError
    with monkeypatch.context() as patch:
        patch.setattr(trace_tables, "_fast_kernels", lambda _path: None)
        try:
            return trace_tables._gpu_csv(path, "kernel")
        except UserError as err:
            return str(err)


KERNEL_HEADER = "Kind,Agent_Id,Queue_Id,Stream_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\n"


@pytest.mark.parametrize("rows, fast", [
    (['K,"Agent 4",1,2,"void k<float, 4>(int)",7,100,200', "K,Agent 5,1,3,b,8,150,400"], True),
    (["K,4,1,,a,,100,200", 'K,,1,"",b,"",300,300'], True),  # empty stream/correlation/agent fields: None
    (["K,GPU 12 ,1,2,a,007,100,200", "K,agent,1,2,b,9,100,200"], True),  # trailing blank, no number: None
    (["K,Agent \u0664,1,2,a,7,100,200"], True),  # a non-ASCII digit: `_agent` decides, as in the loop
    (["K,4,1,+2,a,7,100,200", "K,4,1, 3,b,8,100,200"], False),  # sign, blank: parse_int's rules
    (["K,4,1,2,a,1.0e1,100,200"], False),  # decimal notation
    (["K,4,1,2,a,9223372036854775808,100,200"], False),  # over int64: the loop's error
    (["K,4,1,2,a,x1,100,200"], False),
    (["K,4,1,2,a,7,300,200"], False),  # end before start: the loop's error
    (["K,4,1,2,a,7,100", "K,4,1,2,b,8,100,200"], False),  # a short row: the loop's error
])
def test_rocprofv3_kernels_fast_path_equals_the_loop(tmp_path, monkeypatch, rows, fast):
    """The polars path builds exactly the csv-module loop's frame, and leaves to the loop what it cannot vouch for."""
    path = tmp_path / "1_kernel_trace.csv"
    path.write_text(KERNEL_HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    got = trace_tables._fast_kernels(path)
    assert (got is not None) == fast
    want = _loop_kernels(monkeypatch, path)
    assert not isinstance(want, str) or not fast  # the fast path never takes a file the loop refuses
    if got is not None:
        assert isinstance(want, pl.DataFrame) and got.schema == want.schema and got.equals(want)
    if not fast and isinstance(want, str):  # the loop's error, with its line, is what the reader raises
        from madengine_rocprof.errors import UserError
        with pytest.raises(UserError) as err:
            trace_tables._gpu_csv(path, "kernel")
        assert str(err.value) == want and ":2:" in want
    elif not fast:
        assert isinstance(want, pl.DataFrame) and trace_tables._gpu_csv(path, "kernel").equals(want)


@pytest.mark.parametrize("rel", ["docs-data/kernel_trace.csv", "docs-data-2024/kernel_trace.csv"])
def test_rocprofv3_kernels_fast_path_on_real_traces(tmp_path, monkeypatch, rel):
    path = Path(shutil.copy(FIXTURES / "rocprofv3" / rel, tmp_path / "1_kernel_trace.csv"))
    want = _loop_kernels(monkeypatch, path)
    got = trace_tables._gpu_csv(path, "kernel")
    assert isinstance(want, pl.DataFrame) and got.schema == want.schema and got.equals(want)
