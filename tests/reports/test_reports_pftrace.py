"""rocprofv3 `.pftrace` (Perfetto protobuf) runs: read by report, compare and kernels classify.

The traces are written by tests/reports/pftrace_writer.py from records: the kernel dispatches and memory copies of
the real rocprofv3 CSV fixtures (tests/fixtures/rocprofv3/docs-data) and random dispatches. Expected numbers come
from those records by plain arithmetic, not from the reader's code.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.cli import main
from madengine_rocprof.reports import build_report, load_runs
from madengine_rocprof.reports.pftrace_reader import read_slices

from .pftrace_writer import Record, write_pftrace
from .reports_builders import exact_union, expected_from_dispatches, random_dispatches, write_trace

FIXTURES = Path(__file__).parents[1] / "fixtures" / "rocprofv3" / "docs-data"


def real_records() -> list[Record]:
    """Kernel dispatches and memory copies of real rocprofv3 output (two runs of AMD's docs data)."""
    records = []
    with open(FIXTURES / "kernel_trace.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            records.append(Record("kernel_dispatch", row["Kernel_Name"], int(row["Start_Timestamp"]),
                                  int(row["End_Timestamp"]), agent=int(row["Agent_Id"].split()[-1]),
                                  stream=int(row["Stream_Id"]), queue=int(row["Queue_Id"]),
                                  thread=int(row["Thread_Id"]), corr_id=int(row["Correlation_Id"])))
    with open(FIXTURES / "memory_copy_trace.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            records.append(Record("memory_copy", row["Direction"], int(row["Start_Timestamp"]),
                                  int(row["End_Timestamp"]), agent=int(row["Destination_Agent_Id"].split()[-1]),
                                  stream=int(row["Stream_Id"]), corr_id=int(row["Correlation_Id"])))
    with open(FIXTURES / "hip_runtime_trace.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            records.append(Record("hip_api", row["Function"], int(row["Start_Timestamp"]),
                                  int(row["End_Timestamp"]), thread=int(row["Thread_Id"])))
    return records


def kernel_table(run) -> dict:
    return {k["name"]: (k["calls"], k["total_ns"], k["min_ns"], k["max_ns"]) for k in run["kernels"]}


@pytest.mark.parametrize("sdk_encoding", [True, False])
def test_real_records_round_trip(tmp_path, sdk_encoding):
    records = real_records()
    path = write_pftrace(tmp_path / "run" / "host" / "834304_results.pftrace", records, sdk_encoding=sdk_encoding)
    slices = list(read_slices(path))
    kernels = [r for r in records if r.category == "kernel_dispatch"]
    copies = [r for r in records if r.category == "memory_copy"]
    got = sorted((s.category, s.name, s.start, s.end) for s in slices)
    # the docs-data kernels never overlap on one queue, so the writer kept their times (checked here)
    assert got == sorted((r.category, r.name, r.start, r.end) for r in kernels + copies)
    streams = {int(r.stream) for r in kernels}
    assert {s.track for s in slices if s.category == "kernel_dispatch"} == {
        f"COMPUTE AGENT [4] STREAM [{n}] (GPU)" for n in streams}

    run = build_report(load_runs([tmp_path / "run"]))["runs"][0]
    expected = expected_from_dispatches([(r.name, r.start, r.end) for r in kernels])
    assert kernel_table(run) == expected
    assert run["summary"]["dispatches"] == len(kernels)
    assert run["sources"][0]["format"] == "rocprofv3-pftrace"


def test_same_numbers_as_the_csv_of_the_same_dispatches(tmp_path):
    dispatches = random_dispatches(["Cijk_Alik_Bljk_SB_MT128x128x16", "_attn_fwd_kernel", "vectorized_elementwise"],
                                   400, seed=3)
    write_trace(tmp_path / "csv" / "host" / "1_kernel_trace.csv", dispatches)
    write_pftrace(tmp_path / "pf" / "host" / "1_results.pftrace",
                  [Record("kernel_dispatch", n, s, e) for n, s, e in dispatches])
    csv_run, pf_run = build_report(load_runs([tmp_path / "csv", tmp_path / "pf"]))["runs"]
    assert kernel_table(pf_run) == kernel_table(csv_run) == expected_from_dispatches(dispatches)


def test_overlapping_dispatches_carry_the_writers_adjustment(tmp_path):
    # two kernels on one queue, the second starting 1000 ns before the first ends: the writer meets in the middle
    records = [Record("kernel_dispatch", "a", 10_000, 20_000), Record("kernel_dispatch", "b", 19_000, 30_000)]
    path = write_pftrace(tmp_path / "1_results.pftrace", records)
    assert [(s.name, s.start, s.end) for s in read_slices(path)] == [("a", 10_000, 19_500), ("b", 19_500, 30_000)]


def test_busy_time_is_an_exact_union_per_device(tmp_path):
    records = [Record("kernel_dispatch", "k", s, e, agent=a, stream=st_, queue=st_)
               for s, e, a, st_ in [(0, 100, 1, 1), (50, 180, 1, 2), (300, 400, 1, 1), (0, 1000, 2, 1)]]
    write_pftrace(tmp_path / "run" / "1_results.pftrace", records)
    run = load_runs([tmp_path / "run"])[0]
    devices = {d.device: d for d in run.timing[0].devices}
    assert devices["agent 1"].busy_ns == exact_union([(0, 100), (50, 180), (300, 400)]) == 280
    assert devices["agent 2"].busy_ns == 1000


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.integers(0, 2**40), st.integers(0, 10**6),
                          st.integers(1, 3)), min_size=1, max_size=40),
       st.booleans())
def test_random_traces_match_their_records(tmp_path_factory, rows, sdk_encoding):
    # every dispatch on its own queue: no overlap adjustment, so the slices are exactly the records
    records = [Record("kernel_dispatch", n, s, s + d, queue=q * 1000 + i)
               for i, (n, s, d, q) in enumerate(rows)]
    path = write_pftrace(tmp_path_factory.mktemp("pf") / "1_results.pftrace", records, sdk_encoding=sdk_encoding)
    got = sorted((s.name, s.start, s.end) for s in read_slices(path))
    assert got == sorted((r.name, r.start, r.end) for r in records)


def test_cli_report_compare_and_classify(tmp_path, capsys):
    def dispatches(slower_ns: int, rep: int):
        return [("Cijk_Alik_Bljk_SB_MT128x128x16", i * 10_000, i * 10_000 + 5_000 + slower_ns + (i * 7 + rep) % 50)
                for i in range(200)]

    for label, slower in (("base", 0), ("new", 2_000)):
        for rep in range(3):  # repeated runs: the gate needs the run-to-run spread (workload_result.json marks a run)
            run = tmp_path / label / f"rep{rep}"
            write_pftrace(run / "host" / "1_results.pftrace",
                          [Record("kernel_dispatch", n, s, e) for n, s, e in dispatches(slower, rep)])
            (run / "workload_result.json").write_text(json.dumps({"schema_version": 1, "status": "ok"}))
    out = tmp_path / "r.json"
    runs = [tmp_path / "base" / "rep0", tmp_path / "new" / "rep0"]
    assert main(["report", *map(str, runs), "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert [r["summary"]["dispatches"] for r in report["runs"]] == [200, 200]
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--gate"]) == 1  # 40% slower kernels
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "base"), "--gate"]) == 0
    capsys.readouterr()
    assert main(["kernels", "classify", "--run", str(runs[0])]) == 0
    assert "GEMM" in capsys.readouterr().out


def _good_trace(tmp_path) -> bytes:
    path = write_pftrace(tmp_path / "good.pftrace", [Record("kernel_dispatch", "k", 100, 200)])
    return path.read_bytes()


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:-3], "ends inside a packet"),
    (lambda b: b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "broken varint"),
    (lambda b: b"\x0f" + b, "bad protobuf field"),
    (lambda b: b"\x0a\x02\xff\xff", "not a Perfetto trace packet"),
])
def test_damaged_traces_exit_2_with_the_file_named(tmp_path, capsys, mutate, message):
    damaged = mutate(_good_trace(tmp_path))
    run = tmp_path / "run"
    run.mkdir()
    (run / "1_results.pftrace").write_bytes(damaged)
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert message in err and "1_results.pftrace" in err and "Traceback" not in err


def test_cut_off_trace_is_refused_not_undercounted(tmp_path, capsys):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    path = write_pftrace(tmp_path / "run" / "1_results.pftrace",
                         [Record("kernel_dispatch", "k", 100, 200), Record("kernel_dispatch", "k", 300, 400)])
    trace = pb.Trace.FromString(path.read_bytes())
    del trace.packet[-1]  # the last SLICE_END is gone: a whole packet, so the protobuf is still valid
    path.write_bytes(trace.SerializeToString())
    assert main(["report", str(tmp_path / "run")]) == 2
    assert "never ended" in capsys.readouterr().err
