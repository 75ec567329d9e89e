"""Issue 25, the readers side, from a red-team pass (docs/architecture.md, "Red-team pass over the readers"):

- valid uint64 timestamps (2^63 .. 2^64-1) and sums of durations past 2^63 are read exactly (Python ints, polars
  Int128) by every reader of every format: rocprofv3 CSV (kernel trace, counter collection, memory copies), JSON,
  rocpd, pftrace, Kineto. Before: a refusal ("over 2^63-1") or, for Kineto, the internal-error handler;
- kernel_stats.csv rows are consistent (MinNs, MaxNs each non-negative, MinNs <= MaxNs <= TotalDurationNs);
- every reader of one format takes the same decision on the same file (`report`, `report --perfetto`, `compare`).
The numbers expected here are computed from the records as written, with Python integers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.reports.pftrace_writer import Record, write_pftrace

from .contract_helpers import (
    assert_contract,
    cli,
    cli_subprocess,
    kt_row,
    report_json,
    report_kernels,
    strict_json,
    write_kernel_trace,
    write_rocpd,
)
from .test_reliability_fuzz import FUZZ, RESULTS_JSON, _Home, _write, mutated_json
from .test_reliability_fuzz_traces import KINETO

BIG = 2**64 - 1
SPANS = {  # label -> (start, end) per dispatch, all of kernel "kA"
    "two of 2^62: sum 2^63": [(0, 2**62), (2**62, 2**63)],
    "start at 2^63": [(2**63, 2**63 + 1_000)],
    "the largest uint64": [(BIG - 7, BIG)],
    "one span over 2^63": [(5, BIG)],
    "four of 2^64-1-2^63: sum over 2^64": [(2**63, BIG)] * 4,
    "small and huge in one file": [(100, 400), (2**63 + 5, 2**63 + 9)],
}


def _expected(spans: list[tuple[int, int]]) -> dict[str, tuple[int, int]]:
    return {"kA": (len(spans), sum(end - start for start, end in spans))}


def _results_json(spans: list[tuple[int, int]]) -> str:
    return json.dumps({"rocprofiler-sdk-tool": [{
        "kernel_symbols": [{"kernel_id": 7, "formatted_kernel_name": "kA"}],
        "buffer_records": {"kernel_dispatch": [
            {"dispatch_info": {"kernel_id": 7, "agent_id": {"handle": 4}, "queue_id": {"handle": 1}},
             "start_timestamp": start, "end_timestamp": end} for start, end in spans]}}]})


def _kineto(spans: list[tuple[int, int]]) -> str:
    """baseTimeNanoseconds carries the large part; ts/dur in microseconds with three decimals (as Kineto writes)."""
    base = min(start for start, _ in spans)
    def micros(ns: int) -> str:
        return f"{ns // 1000}.{ns % 1000:03d}"

    events = [{"ph": "X", "cat": "kernel", "name": "kA", "pid": 0, "tid": 7, "ts": micros(start - base),
               "dur": micros(end - start), "args": {"device": 0, "stream": 7}} for start, end in spans]
    text = json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": base, "traceEvents": events})
    return text.replace('"ts": "', '"ts": ').replace('", "dur": "', ', "dur": ').replace('", "args"', ', "args"')


def _write_format(run: Path, fmt: str, spans: list[tuple[int, int]]) -> str:
    """A run of one format holding `spans`; returns the file's name (what a refusal must name)."""
    if fmt == "csv":
        return write_kernel_trace(run, [kt_row("kA", s, e, n=i + 1) for i, (s, e) in enumerate(spans)]).name
    if fmt == "json":
        return _write(run / "node0" / "4242_results.json", _results_json(spans)).name
    if fmt == "pftrace":
        (run / "node0").mkdir(parents=True, exist_ok=True)
        records = [Record("kernel_dispatch", "kA", s, e, queue=i) for i, (s, e) in enumerate(spans)]
        return write_pftrace(run / "node0" / "4242_results.pftrace", records).name
    if fmt == "counters":
        rows = "".join(f'{i},{i},4,"kA",SQ_WAVES,12,{s},{e}\n' for i, (s, e) in enumerate(spans, start=1))
        return _write(run / "node0" / "4242_counter_collection.csv", "Correlation_Id,Dispatch_Id,Agent_Id,Kernel_Name,"
                      "Counter_Name,Counter_Value,Start_Timestamp,End_Timestamp\n" + rows).name
    assert fmt == "kineto"
    return _write(run / "rank0.pt.trace.json", _kineto(spans)).name


def _width(spans: list[tuple[int, int]]) -> int:
    return max(e for _, e in spans) - min(s for s, _ in spans)


# Kineto times are relative to baseTimeNanoseconds: a trace spanning 2^63 ns (292 years) is refused instead
# (test_kineto_times_out_of_uint64_are_exit_2)
@pytest.mark.parametrize("fmt, label", [(fmt, label) for label in SPANS
                                        for fmt in ("csv", "json", "pftrace", "counters", "kineto")
                                        if fmt != "kineto" or _width(SPANS[label]) < 2**63])
def test_uint64_timestamps_are_exact_in_every_format(tmp_path, fmt, label):
    spans = SPANS[label]
    run = tmp_path / "run"
    _write_format(run, fmt, spans)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None, err
    assert report_kernels(report) == _expected(spans)
    if fmt != "counters":  # a counter file's dispatches carry no timeline
        assert report["runs"][0]["summary"]["gpu_time_ns"] == _expected(spans)["kA"][1]
        code, _, err = cli("report", run, "-q", "--perfetto", tmp_path / "pf")
        assert_contract(code, err)
        assert code == 0, err
        events = strict_json((tmp_path / "pf" / "run.perfetto.json").read_text())["traceEvents"]
        assert len([e for e in events if e.get("ph") == "X"]) == len(spans)


def test_rocpd_sum_of_durations_past_2_63_is_exact(tmp_path):
    """SQLite integers stop at 2^63-1, but their sum need not: it was refused ("more than 2^63 ns")."""
    kernels = [("kA", 0, 2**63 - 1, 1, 1), ("kA", 5, 2**63 - 1, 1, 1)]
    run = tmp_path / "run"
    write_rocpd(run / "node0" / "4242_results.db", kernels=kernels)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None, err
    assert report_kernels(report) == {"kA": (2, 2 * (2**63 - 1) - 5)}


def test_memory_copies_at_2_63_count_exactly(tmp_path):
    run = tmp_path / "run"
    write_kernel_trace(run, [kt_row("kA", 2**63, 2**63 + 100)])
    _write(run / "node0" / "4242_memory_copy_trace.csv",
           '"Kind","Direction","Source_Agent_Id","Destination_Agent_Id","Correlation_Id","Start_Timestamp",'
           f'"End_Timestamp"\n"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",0,4,1,{2**63 + 200},{2**63 + 250}\n')
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None, err
    assert report_kernels(report) == {"kA": (1, 100)}
    assert report["runs"][0]["summary"]["busy_ns"] == 150  # the copy counts towards the device's busy time


@pytest.mark.parametrize("events, base, what", [
    ([(1e300, 2.5)], 0, "out of range"),  # was the internal-error handler (OverflowError)
    ([(1.0, 2.5)], 2**64 - 1, "outside [0, 2^64)"),
    ([(-5.0, 1.0)], 0, "outside [0, 2^64)"),
])
def test_kineto_times_out_of_uint64_are_exit_2(tmp_path, events, base, what):
    run = tmp_path / "run"
    trace = {"schemaVersion": 1, "baseTimeNanoseconds": base, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "kA", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
         "args": {"device": 0, "stream": 7}} for ts, dur in events]}
    _write(run / "rank0.pt.trace.json", json.dumps(trace))
    for argv in (["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp_path / "pf"],
                 ["compare", run, run, "-q"]):
        code, _, err = cli(*argv)
        assert_contract(code, err)
        assert code == 2 and "rank0.pt.trace.json" in err and what in err, err


@pytest.mark.parametrize("row, what", [
    ({"MinNs": "1200", "MaxNs": "1100"}, "MinNs 1200 is above MaxNs 1100"),
    ({"MaxNs": "5000"}, "MaxNs 5000 is above TotalDurationNs 3000"),
    ({"Calls": "0"}, "with 0 Calls"),
    ({"MaxNs": "-1"}, "MaxNs"),
])
def test_kernel_stats_rows_are_consistent(tmp_path, row, what):
    values = {"Name": "kA", "Calls": "3", "TotalDurationNs": "3000", "AverageNs": "1000", "Percentage": "100",
              "MinNs": "900", "MaxNs": "1100", "StdDev": "1"} | row
    run = tmp_path / "run"
    _write(run / "node0" / "4242_kernel_stats.csv", ",".join(values) + "\n" + ",".join(values.values()) + "\n")
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 2 and "4242_kernel_stats.csv:2" in err and what in err, err


# ---------------------------------------------------------------- every reader of a format decides alike

def _decisions(tmp: Path, run: Path, name: str) -> list[bool]:
    """Per reader (report, report --perfetto, compare): refused, naming the file?"""
    out = []
    commands: list[list[str | Path]] = [["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp / "pf"],
                                        ["compare", run, run, "-q", "--json", tmp / "c.json"]]
    for argv in commands:
        code, _, err = cli(*argv)
        assert_contract(code, err)
        out.append(code == 2 and name in err)
    return out


@FUZZ
@given(fmt=st.sampled_from(["json", "kineto"]), data=st.data())
def test_fuzz_readers_of_one_json_format_agree(fmt, data):
    """Issue 25: `report`, `report --perfetto` and `compare` disagreed on one file. The CSV case is fuzzed in
    test_reliability_fuzz.py; here the JSON formats: all three refuse a mutated file, or none does."""
    seed = RESULTS_JSON if fmt == "json" else KINETO
    text = data.draw(mutated_json(seed))
    with _Home() as tmp:
        run = tmp / "run"
        name = "4242_results.json" if fmt == "json" else "rank0.pt.trace.json"
        _write(run / ("node0/" + name if fmt == "json" else name), text)
        decisions = _decisions(tmp, run, name)
        assert len(set(decisions)) == 1, decisions


SQL = st.one_of(st.integers(-3, 5_000), st.sampled_from([None, "t", 2.0, 2.5, float("nan"), 2**63 - 1, -(2**63)]))


@FUZZ
@given(kernels=st.lists(st.tuples(st.sampled_from(["kA", "kB"]), SQL, SQL, st.integers(0, 2), st.integers(0, 2)),
                        max_size=5))
def test_fuzz_readers_of_rocpd_agree(kernels):
    with _Home() as tmp:
        run = tmp / "run"
        write_rocpd(run / "node0" / "4242_results.db", kernels=kernels)
        decisions = _decisions(tmp, run, "4242_results.db")
        assert len(set(decisions)) == 1, (decisions, kernels)


# ---------------------------------------------------------------- a rocpd view that never ends

ENDLESS_VIEWS = {
    "recursive": "CREATE VIEW kernels AS WITH RECURSIVE r(name, start, `end`, agent_abs_index, queue_id) AS "
                 "(SELECT 'kA', 0, 1, 0, 0 UNION ALL SELECT name, start + 1, `end` + 1, 0, 0 FROM r) SELECT * FROM r",
    "cross join": "CREATE VIEW kernels AS SELECT 'kA' AS name, a.x AS start, a.x + 1 AS `end`, 0 AS agent_abs_index, "
                  "0 AS queue_id FROM n a, n b, n c, n d, n e, n f",
}


def _endless_rocpd(path: Path, view: str) -> Path:
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    with con:
        con.execute("CREATE TABLE rocpd_metadata (tag TEXT, value TEXT)")
        con.execute("CREATE TABLE n (x INTEGER)")
        con.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(1000)])
        con.execute(ENDLESS_VIEWS[view])
    con.close()
    return path


@pytest.mark.parametrize("view", list(ENDLESS_VIEWS))
def test_a_rocpd_view_without_end_is_exit_2_not_a_hang(tmp_path, monkeypatch, view):
    """A view that recurses or cross-joins without end (10^18 rows from a 20 kB file) hung every reader: SQLite's
    work is now bounded by the file's size (rocpd_reader.STEPS_PER_BYTE). In a subprocess with the shipped budget,
    then the three readers in-process with a small one."""
    from madengine_rocprof.reports import rocpd_reader

    run = tmp_path / "run"
    _endless_rocpd(run / "node0" / "4242_results.db", view)
    code, _, err = cli_subprocess("report", run, "-q", timeout=120)
    assert_contract(code, err, allowed=(2,))
    assert "4242_results.db" in err and "views compute far more rows" in err, err
    monkeypatch.setattr(rocpd_reader, "STEPS_BASE", 20_000_000)
    assert _decisions(tmp_path, run, "4242_results.db") == [True, True, True]


# ---------------------------------------------------------------- rocpd info tables listing an id twice


def _rocpd_with_info_listed_twice(path: Path, table: str, change: str | None) -> int:
    """The benchmark's rocpd layout (views over suffixed tables), with the view `table` listing its rows twice
    (a database merged twice); `change`: a column changed in the second copy. Returns the sum of the durations."""
    import sqlite3
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "reports"))
    import make_rocpd

    _, total = make_rocpd.write(path, 400, 5, 2, seed=7)
    con = sqlite3.connect(path)
    with con:
        sql = con.execute("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?", (table,)).fetchone()[0]
        body = sql.split(" AS ", 1)[1]
        second = body
        if change:  # "EXPR AS column": the second copy's column
            value, column = change.split(" AS ")
            columns = [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
            second = body.replace("SELECT *", "SELECT " + ", ".join(value if c == column else c for c in columns))
        con.execute(f"DROP VIEW {table}")
        con.execute(f"CREATE VIEW {table} AS {body} UNION ALL {second}")
    con.close()
    return total


@pytest.mark.parametrize("table", ["rocpd_info_kernel_symbol", "rocpd_info_agent"])
def test_rocpd_info_rows_listed_twice_count_once(tmp_path, table):
    """Each dispatch joined both copies: calls and time doubled, exit 0 (silently wrong numbers); and the kernels
    view of the file (read by --perfetto and compare) said otherwise. Identical copies are one row now."""
    run = tmp_path / "run"
    total = _rocpd_with_info_listed_twice(run / "n" / "4242_results.db", table, None)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None, err
    assert (report["runs"][0]["summary"]["dispatches"], report["runs"][0]["summary"]["gpu_time_ns"]) == (400, total)
    code, _, err = cli("report", run, "-q", "--perfetto", tmp_path / "pf")
    assert code == 0, err
    events = strict_json((tmp_path / "pf" / "run.perfetto.json").read_text())["traceEvents"]
    assert len([e for e in events if e.get("ph") == "X"]) == 400


@pytest.mark.parametrize("table, change", [("rocpd_info_kernel_symbol", "'other' AS display_name"),
                                           ("rocpd_info_agent", "absolute_index + 10 AS absolute_index")])
def test_rocpd_info_id_with_two_meanings_is_exit_2(tmp_path, table, change):
    run = tmp_path / "run"
    _rocpd_with_info_listed_twice(run / "n" / "4242_results.db", table, change)
    assert _decisions(tmp_path, run, "4242_results.db") == [True, True, True]
    _, _, err = cli("report", run, "-q")
    assert table in err and "appears in" in err, err


# ---------------------------------------------------------------- one key, two meanings


def test_kineto_trace_events_given_twice_is_exit_2(tmp_path):
    """Two "traceEvents" lists: the streaming decoder read the first (1 kernel) where Python's json reads the last
    (2 kernels), with exit 0. The keys around the events now go through the strict loader."""
    event = {"ph": "X", "cat": "kernel", "name": "kA", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
             "args": {"device": 0, "stream": 7}}
    text = json.dumps({"schemaVersion": 1, "traceEvents": [event]})[:-1] + ', "traceEvents": ' + json.dumps(
        [event, event]) + "}"
    run = tmp_path / "run"
    _write(run / "rank0.pt.trace.json", text)
    assert _decisions(tmp_path, run, "rank0.pt.trace.json") == [True, True, True]
    _, _, err = cli("report", run, "-q")
    assert "traceEvents" in err and "twice" in err, err


@pytest.mark.parametrize("key,first,second", [("dur", "2.0", "7.0"), ("ts", "1.0", "9.0")])
def test_kineto_event_giving_a_key_twice_is_exit_2(tmp_path, key, first, second):
    """`"dur": 2.0, "dur": 7.0` in one event: msgspec keeps the last, Python's json too; the number is ambiguous, so
    every reader refuses it and names the event. A key of the same name inside args is not a repeat."""
    event = {"ph": "X", "cat": "kernel", "name": "kA", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
             "args": {"device": 0, "stream": 7, "name": "not a repeat", "ts": "nor this"}}
    text = json.dumps(event)
    twice = text.replace(f'"{key}": {json.dumps(event[key])}', f'"{key}": {first}, "{key}": {second}', 1)
    assert twice != text
    run = tmp_path / "run"
    _write(run / "rank0.pt.trace.json", json.dumps({"schemaVersion": 1, "traceEvents": [event, event]})
           .replace(text, twice, 1))
    assert _decisions(tmp_path, run, "rank0.pt.trace.json") == [True, True, True]
    _, _, err = cli("report", run, "-q")
    assert f'"{key}" twice' in err and "traceEvents[0]" in err, err
    ok = tmp_path / "ok"  # args keys named like event keys: read as before
    _write(ok / "rank0.pt.trace.json", json.dumps({"schemaVersion": 1, "traceEvents": [event, event]}))
    code, out, err = cli("report", ok, "-q")
    assert code == 0, err


def test_results_json_kernel_id_naming_two_kernels_is_exit_2(tmp_path):
    """kernel_symbols listing one kernel_id twice with two names: its dispatches counted under the last, exit 0."""
    doc = json.loads(_results_json([(100, 400)]))
    doc["rocprofiler-sdk-tool"][0]["kernel_symbols"].append({"kernel_id": 7, "formatted_kernel_name": "kB"})
    run = tmp_path / "run"
    _write(run / "node0" / "4242_results.json", json.dumps(doc))
    assert _decisions(tmp_path, run, "4242_results.json") == [True, True, True]
    _, _, err = cli("report", run, "-q")
    assert "kernel_symbols[1]" in err and "names two kernels" in err, err


def test_pftrace_name_that_is_not_utf8_is_exit_2(tmp_path):
    """A flipped byte in a track name: protobuf handed over bytes, and the reader's regex raised TypeError (the
    internal-error handler). Found by test_fuzz_pftrace (cut=265, flips=[(42, 128)])."""
    from .test_reliability_fuzz_traces import PFTRACE

    data = bytearray(PFTRACE[:265])
    data[42] = 128
    run = tmp_path / "run"
    run.mkdir()
    (run / "1_results.pftrace").write_bytes(bytes(data))
    for argv in (["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp_path / "pf"]):
        code, _, err = cli(*argv)
        assert_contract(code, err)
        assert code == 2 and "1_results.pftrace" in err, err


# ---------------------------------------------------------------- counter_collection.csv: one dispatch, one meaning

COUNTER_HEAD = "Dispatch_Id,Process_Id,Agent_Id,Kernel_Name,Counter_Name,Counter_Value,Start_Timestamp,End_Timestamp\n"


@pytest.mark.parametrize("second", ['1,77,4,"kB",GRBM_COUNT,3,100,150', '1,77,4,"kA",GRBM_COUNT,3,100,190'])
def test_counter_rows_of_one_dispatch_disagreeing_are_exit_2(tmp_path, second):
    """A dispatch's rows naming another kernel or other timestamps: the first row counted, silently."""
    run = tmp_path / "run"
    _write(run / "node0" / "77_counter_collection.csv", COUNTER_HEAD + '1,77,4,"kA",SQ_WAVES,12,100,150\n' + second)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 2 and "77_counter_collection.csv:3" in err and "dispatch 1" in err, err


def test_counter_dispatch_ids_of_two_processes_in_one_file_are_two_dispatches(tmp_path):
    """Dispatch ids restart per process: a file holding two processes (Process_Id) had their dispatch 1 merged into
    one (calls 1, the second's time lost), exit 0."""
    run = tmp_path / "run"
    _write(run / "node0" / "77_counter_collection.csv", COUNTER_HEAD + '1,77,4,"kA",SQ_WAVES,12,100,150\n'
           '1,78,4,"kA",SQ_WAVES,12,100,170\n')
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None, err
    assert report_kernels(report) == {"kA": (2, 50 + 70)}
