"""rocprofv3 JSON, rocpd SQLite, legacy rocprof, multi-process/multi-pass trees, built from the documented formats."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.reports import build_report, load_runs
from madengine_rocprof.wrapper.contracts import ReportRun

from .reports_builders import (
    HEADER_62,
    STATS_HEADER,
    expected_from_dispatches,
    random_dispatches,
    write_csv,
    write_trace,
)

NAMES = ["Cijk_Alik_Bljk_SB_MT128x128x16", "void at::native::vectorized_elementwise_kernel<4, add>(int)",
         "_attn_fwd_kernel", "__amd_rocclr_copyBuffer", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]


def report_one(run_dir: Path) -> ReportRun:
    return build_report(load_runs([run_dir]))["runs"][0]


def kernel_table(run: ReportRun) -> dict:
    return {k["name"]: (k["calls"], k["total_ns"], k["min_ns"], k["max_ns"]) for k in run["kernels"]}


def write_rocprofv3_json(path: Path, dispatches, symbols_as_dict=False) -> None:
    ids = {name: i for i, name in enumerate(sorted({d[0] for d in dispatches}), start=1)}
    symbols = [{"kernel_id": i, "kernel_name": f"_Z{i}mangled", "formatted_kernel_name": n} for n, i in ids.items()]
    doc = {
        "rocprofiler-sdk-tool": [
            {
                "metadata": {"pid": 1},
                "kernel_symbols": {str(s["kernel_id"]): s for s in symbols} if symbols_as_dict else symbols,
                "buffer_records": {
                    "kernel_dispatch": [
                        {
                            "kind": 11,
                            "start_timestamp": s,
                            "end_timestamp": e,
                            "correlation_id": {"internal": n, "external": 0},
                            "dispatch_info": {
                                "kernel_id": ids[name],
                                "dispatch_id": n,
                                "agent_id": {"handle": 4},
                                "queue_id": {"handle": 1},
                            },
                        }
                        for n, (name, s, e) in enumerate(dispatches, start=1)
                    ]
                },
            }
        ]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("symbols_as_dict", [False, True])
def test_rocprofv3_json(tmp_path, symbols_as_dict):
    dispatches = random_dispatches(NAMES, 300, seed=1)
    write_rocprofv3_json(tmp_path / "run" / "h" / "9_results.json", dispatches, symbols_as_dict)
    run = report_one(tmp_path / "run")
    assert kernel_table(run) == expected_from_dispatches(dispatches)
    assert run["sources"][0]["format"] == "rocprofv3-json"


def test_legacy_chrome_json_named_results_json_is_ignored(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text(json.dumps({"traceEvents": []}))
    write_trace(tmp_path / "run" / "h" / "1_kernel_trace.csv", random_dispatches(NAMES, 10, seed=2))
    assert report_one(tmp_path / "run")["summary"]["dispatches"] == 10


def make_rocpd(path: Path, dispatches, counters=(), with_kernels_view=True) -> None:
    """A database with the same unsuffixed views rocpd exposes (kernels, top_kernels, counters_collection)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE rocpd_kernel_dispatch_0001 (id INTEGER, name TEXT, pid INTEGER, agent_abs_index INTEGER, "
                "queue_id INTEGER, start INTEGER, `end` INTEGER)")
    con.executemany("INSERT INTO rocpd_kernel_dispatch_0001 VALUES (?,?,?,?,?,?,?)",
                    [(i, n, 7, 0, 1, s, e) for i, (n, s, e) in enumerate(dispatches)])
    if with_kernels_view:
        con.execute("CREATE VIEW kernels AS SELECT id, name, pid, agent_abs_index, queue_id, start, `end`, "
                    "(`end` - start) AS duration FROM rocpd_kernel_dispatch_0001")
    con.execute(
        "CREATE VIEW top_kernels AS SELECT name, COUNT(*) AS total_calls, SUM(`end` - start) / 1000.0 AS "
        "total_duration, "
        "(SUM(`end` - start) / COUNT(*)) / 1000.0 AS average, 0.0 AS percentage FROM rocpd_kernel_dispatch_0001 "
        "GROUP BY name ORDER BY total_duration DESC"
    )
    con.execute(
        "CREATE TABLE pmc_0001 (dispatch_id INTEGER, kernel_name TEXT, counter_name TEXT, value REAL, start INTEGER, "
        "`end` INTEGER)"
    )
    con.executemany("INSERT INTO pmc_0001 VALUES (?,?,?,?,?,?)", counters)
    con.execute(
        "CREATE VIEW counters_collection AS SELECT dispatch_id, kernel_name, counter_name, value, start, `end`, "
        "(`end` - start) AS duration FROM pmc_0001"
    )
    con.commit()
    con.close()


def test_rocpd_kernels_view_and_counters(tmp_path):
    dispatches = random_dispatches(NAMES, 400, seed=3)
    counters = []
    for i, (name, s, e) in enumerate(dispatches[:50]):
        counters += [(i, name, "FETCH_SIZE", 100.0 + i, s, e), (i, name, "WRITE_SIZE", 50.0, s, e),
                     (i, name, "TCC_HIT_sum", 30.0, s, e), (i, name, "TCC_MISS_sum", 10.0 + i % 3, s, e)]
    make_rocpd(tmp_path / "run" / "h" / "7_results.db", dispatches, counters)
    run = report_one(tmp_path / "run")
    assert kernel_table(run) == expected_from_dispatches(dispatches)
    derived = {d["name"]: d["value"] for d in run["derived_metrics"]}
    hits = 30.0 * 50
    misses = sum(10.0 + i % 3 for i in range(50))
    assert derived["L2 cache hit rate"] == pytest.approx(100 * hits / (hits + misses))
    kb = sum(100.0 + i for i in range(50)) + 50.0 * 50
    ns = sum(e - s for _, s, e in dispatches[:50])
    assert derived["memory traffic"] == pytest.approx(kb * 1024 / 1e9)
    assert derived["achieved memory bandwidth"] == pytest.approx(kb * 1024 / ns)


def test_rocpd_top_kernels_only(tmp_path):
    dispatches = random_dispatches(NAMES, 200, seed=4)
    make_rocpd(tmp_path / "run" / "7_results.db", dispatches, with_kernels_view=False)
    run = report_one(tmp_path / "run")
    expected = expected_from_dispatches(dispatches)
    for k in run["kernels"]:
        assert k["calls"] == expected[k["name"]][0]
        assert k["total_ns"] == pytest.approx(expected[k["name"]][1])  # view is in microseconds; converted back
        assert k["min_ns"] is None


def test_legacy_rocprof_results_csv_and_stats(tmp_path):
    dispatches = random_dispatches(NAMES, 120, seed=5)
    header = [
        "Index",
        "KernelName",
        "gpu-id",
        "queue-id",
        "queue-index",
        "pid",
        "tid",
        "grd",
        "wgr",
        "lds",
        "scr",
        "arch_vgpr",
        "accum_vgpr",
        "sgpr",
        "wave_size",
        "sig",
        "obj",
        "SQ_WAVES",
        "DispatchNs",
        "BeginNs",
        "EndNs",
        "CompleteNs",
        "DurationNs",
    ]
    rows = [[i, n, 0, 0, i, 11, 11, 1024, 64, 0, 0, 8, 0, 16, 64, "0x0", "0x0", 16, s - 10, s, e, e + 5, e - s]
            for i, (n, s, e) in enumerate(dispatches)]
    write_csv(tmp_path / "legacy" / "results.csv", header, rows)
    run = report_one(tmp_path / "legacy")
    assert kernel_table(run) == expected_from_dispatches(dispatches)
    assert run["sources"][0]["format"] == "legacy-csv"

    expected = expected_from_dispatches(dispatches)
    write_csv(tmp_path / "stats" / "results.stats.csv", ["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage"],
              [[n, c, t, t / c, 0.0] for n, (c, t, _, _) in expected.items()])
    run = report_one(tmp_path / "stats")
    assert {k["name"]: (k["calls"], k["total_ns"]) for k in run["kernels"]} == {
        n: (v[0], v[1]) for n, v in expected.items()
    }
    assert run["sources"][0]["format"] == "legacy-stats"


def test_multi_process_multi_rank_merged_with_origin(tmp_path):
    parts = {
        "node01/1001_kernel_trace.csv": random_dispatches(NAMES, 100, seed=10),
        "node01/1002_kernel_trace.csv": random_dispatches(NAMES, 80, seed=11),
        "node02/rank1_2001_kernel_trace.csv": random_dispatches(NAMES[:3], 60, seed=12),
    }
    for rel, dispatches in parts.items():
        write_trace(tmp_path / "run" / rel, dispatches)
    run = report_one(tmp_path / "run")
    everything = [d for ds in parts.values() for d in ds]
    assert kernel_table(run) == expected_from_dispatches(everything)
    assert {s["origin"]: s["dispatches"] for s in run["sources"]} == {
        "node01/1001": 100, "node01/1002": 80, "node02/rank1_2001": 60}
    assert run["summary"]["processes"] == 3


def test_multi_pass_counts_kernel_time_once_and_counters_from_every_pass(tmp_path, rocprof_fixtures):
    pass1 = random_dispatches(NAMES, 50, seed=20)
    pass2 = random_dispatches(NAMES, 50, seed=21)
    write_trace(tmp_path / "run" / "pmc_1" / "h" / "1_kernel_trace.csv", pass1)
    write_trace(tmp_path / "run" / "pmc_2" / "h" / "2_kernel_trace.csv", pass2)
    write_trace(tmp_path / "run" / "pmc_10" / "h" / "3_kernel_trace.csv", pass2)
    cc_header = ["Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value"]
    write_csv(tmp_path / "run" / "pmc_1" / "h" / "1_counter_collection.csv", cc_header, [[1, NAMES[0], "SQ_WAVES", 64]])
    write_csv(
        tmp_path / "run" / "pmc_2" / "h" / "2_counter_collection.csv", cc_header, [[1, NAMES[0], "SQ_INSTS_VALU", 640]]
    )
    run = report_one(tmp_path / "run")
    assert kernel_table(run) == expected_from_dispatches(pass1)
    assert [s["pass"] for s in run["sources"]] == ["pmc_1"]
    assert {c["name"] for c in run["counters"]} == {"SQ_WAVES", "SQ_INSTS_VALU"}
    assert {d["name"]: d["value"] for d in run["derived_metrics"]}["VALU instructions per wave"] == pytest.approx(10.0)
    assert any("pmc_2, pmc_10" in note for note in run["notes"])


def test_same_process_in_several_formats_is_counted_once(tmp_path):
    dispatches = random_dispatches(NAMES, 90, seed=30)
    write_trace(tmp_path / "run" / "h" / "5_kernel_trace.csv", dispatches)
    write_rocprofv3_json(tmp_path / "run" / "h" / "5_results.json", dispatches)
    make_rocpd(tmp_path / "run" / "h" / "5_results.db", dispatches)
    expected = expected_from_dispatches(dispatches)
    write_csv(tmp_path / "run" / "h" / "5_kernel_stats.csv", STATS_HEADER,
              [[n, c, t, t / c, 0, lo, hi, 0] for n, (c, t, lo, hi) in expected.items()])
    run = report_one(tmp_path / "run")
    assert kernel_table(run) == expected
    assert [s["format"] for s in run["sources"]] == ["rocprofv3-csv"]
    assert len(run["skipped_sources"]) == 3


def test_stats_only_tree(tmp_path):
    """`rocprofv3 --kernel-trace --stats` trees where only <host>/<pid>_kernel_stats.csv was kept still report."""
    write_csv(tmp_path / "run" / "node01" / "311_kernel_stats.csv", STATS_HEADER,
              [[NAMES[0], 4, 4000, 1000.0, 80.0, 900, 1100, 10.0], [NAMES[1], 10, 1000, 100.0, 20.0, 90, 110, 1.0]])
    run = report_one(tmp_path / "run")
    assert run["summary"]["dispatches"] == 14
    assert run["summary"]["gpu_time_ns"] == 5000
    assert [k["name"] for k in run["kernels"]] == [NAMES[0], NAMES[1]]
    assert run["kernels"][0]["share"] == pytest.approx(0.8)


def test_6_2_header_and_7_header_processes_in_one_run(tmp_path):
    a = random_dispatches(NAMES, 40, seed=40)
    b = random_dispatches(NAMES, 40, seed=41)
    write_trace(tmp_path / "run" / "h" / "1_kernel_trace.csv", a)
    write_trace(tmp_path / "run" / "h" / "2_kernel_trace.csv", b, header=HEADER_62)
    assert kernel_table(report_one(tmp_path / "run")) == expected_from_dispatches(a + b)


def test_large_synthetic_trace_matches_independent_sums(tmp_path):
    dispatches = random_dispatches(NAMES + [f"kernel_{i}" for i in range(200)], 30_000, seed=50)
    write_trace(tmp_path / "run" / "h" / "1_kernel_trace.csv", dispatches)
    run = report_one(tmp_path / "run")
    assert kernel_table(run) == expected_from_dispatches(dispatches)
    assert run["summary"]["longest_process_span_ns"] == dispatches[-1][2] - dispatches[0][1]


def counter_rows(dispatches, counter, value_of):
    """rocprofv3 7.x counter_collection rows: one per dispatch for `counter`, with the dispatch's timestamps."""
    return [[i, name, counter, value_of(i), s, e] for i, (name, s, e) in enumerate(dispatches)]


CC_TIMED = ["Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value", "Start_Timestamp", "End_Timestamp"]


def test_bandwidth_when_counters_come_from_different_passes(tmp_path):
    """FETCH_SIZE read on pass 1 and WRITE_SIZE on pass 2: each is divided by the time of its own pass."""
    pass1, pass2 = random_dispatches(NAMES, 40, seed=60), random_dispatches(NAMES, 40, seed=61)
    write_csv(
        tmp_path / "run/pmc_1/h/1_counter_collection.csv",
        CC_TIMED,
        counter_rows(pass1, "FETCH_SIZE", lambda i: 10.0 * i),
    )
    write_csv(
        tmp_path / "run/pmc_2/h/2_counter_collection.csv", CC_TIMED, counter_rows(pass2, "WRITE_SIZE", lambda i: 3.0)
    )
    run = report_one(tmp_path / "run")
    t1 = sum(e - s for _, s, e in pass1)
    t2 = sum(e - s for _, s, e in pass2)
    expected = (sum(10.0 * i for i in range(40)) * 1024 / t1) + (3.0 * 40 * 1024 / t2)
    derived = {d["name"]: d["value"] for d in run["derived_metrics"]}
    assert derived["achieved memory bandwidth"] == pytest.approx(expected)


def test_amd_fp32_throughput(tmp_path):
    dispatches = random_dispatches(NAMES, 30, seed=62)
    rows = []
    for counter, value in (
        ("SQ_INSTS_VALU_ADD_F32", 100.0),
        ("SQ_INSTS_VALU_MUL_F32", 50.0),
        ("SQ_INSTS_VALU_FMA_F32", 200.0),
    ):
        rows += counter_rows(dispatches, counter, lambda i, v=value: v)
    write_csv(tmp_path / "run/h/1_counter_collection.csv", CC_TIMED, rows)
    derived = {d["name"]: d["value"] for d in report_one(tmp_path / "run")["derived_metrics"]}
    ns = sum(e - s for _, s, e in dispatches)
    assert derived["FP32 vector throughput"] == pytest.approx(64 * 30 * (100 + 50 + 2 * 200) / ns)


def test_nvidia_counters_converted_by_the_wrapper(tmp_path):
    dispatches = random_dispatches(NAMES, 20, seed=63)
    rows = []
    for counter, value_of in (
        ("gpu__time_duration.sum", lambda i: 1000.0 + i),
        ("dram__bytes_read.sum", lambda i: 5e5),
        ("dram__bytes_write.sum", lambda i: 1e5),
        ("lts__t_sector_hit_rate.pct", lambda i: 50.0 + i),
    ):
        rows += counter_rows(dispatches, counter, value_of)
    write_csv(tmp_path / "run/h/1_counter_collection.csv", CC_TIMED, rows)
    run = report_one(tmp_path / "run")
    derived = {d["name"]: d["value"] for d in run["derived_metrics"]}
    duration = sum(1000.0 + i for i in range(20))
    assert derived["achieved DRAM bandwidth"] == pytest.approx(20 * 6e5 / duration)
    hit = next(c for c in run["counters"] if c["name"] == "lts__t_sector_hit_rate.pct")
    assert hit["mean"] == pytest.approx(sum(50.0 + i for i in range(20)) / 20)


@pytest.mark.parametrize("fmt", ["json", "rocpd", "legacy"])
def test_perfetto_from_every_timeline_format(tmp_path, fmt):
    from madengine_rocprof.reports.perfetto import write_trace

    dispatches = random_dispatches(NAMES, 25, seed=64)
    if fmt == "json":
        write_rocprofv3_json(tmp_path / "run/h/1_results.json", dispatches)
    elif fmt == "rocpd":
        make_rocpd(tmp_path / "run/h/1_results.db", dispatches)
    else:
        write_csv(tmp_path / "run/results.csv", ["KernelName", "gpu-id", "queue-id", "BeginNs", "EndNs"],
                  [[n, 0, 1, s, e] for n, s, e in dispatches])
    (run,) = load_runs([tmp_path / "run"])
    out = tmp_path / "trace.json"
    assert write_trace(run, out) == 25
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    t0 = dispatches[0][1]
    assert [(e["name"], e["ts"], e["dur"]) for e in events] == [
        (n, pytest.approx((s - t0) / 1e3), pytest.approx((e - s) / 1e3)) for n, s, e in dispatches]


kernel_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=40
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(kernel_names, st.integers(0, 10**15), st.integers(0, 10**9)), min_size=1, max_size=60))
def test_any_names_and_durations_round_trip(tmp_path_factory, rows):
    """Names with quotes, commas, newlines or any unicode, and any durations: the report equals plain sums."""
    run_dir = tmp_path_factory.mktemp("prop")
    dispatches = [(name, start, start + duration) for name, start, duration in rows]
    write_trace(run_dir / "h" / "1_kernel_trace.csv", dispatches)
    assert kernel_table(report_one(run_dir)) == expected_from_dispatches(dispatches)
