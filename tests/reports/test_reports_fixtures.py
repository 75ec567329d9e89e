"""Reports on the real rocprofv3 outputs (6.2 and 7.x headers), checked against sums computed here with DictReader."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from madengine_rocprof.wrapper.contracts import ReportRun

from .reports_builders import dict_rows, place, report_one


def expected_kernels(path: Path) -> dict[str, tuple[int, int, int, int]]:
    durations: dict[str, list[int]] = {}
    for row in dict_rows(path):
        durations.setdefault(row["Kernel_Name"], []).append(int(row["End_Timestamp"]) - int(row["Start_Timestamp"]))
    return {n: (len(d), sum(d), min(d), max(d)) for n, d in durations.items()}


def assert_kernels_match(run: ReportRun, expected: dict) -> None:
    got = {k["name"]: (k["calls"], k["total_ns"], k["min_ns"], k["max_ns"]) for k in run["kernels"]}
    assert got == expected
    assert run["summary"]["dispatches"] == sum(v[0] for v in expected.values())
    assert run["summary"]["unique_kernels"] == len(expected)
    assert run["summary"]["gpu_time_ns"] == sum(v[1] for v in expected.values())
    totals = [k["total_ns"] for k in run["kernels"]]
    assert totals == sorted(totals, reverse=True)
    assert sum(k["share"] for k in run["kernels"]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "fixture, layout",
    [
        ("docs-data/kernel_trace.csv", "node01/834304_kernel_trace.csv"),  # 7.x header, "Agent 4" strings
        ("docs-data-2024/kernel_trace.csv", "69_kernel_trace.csv"),  # 6.2 header, flat <pid>_ naming
        ("docs-data/kernel_trace_truncated.csv", "node01/855217_kernel_trace.csv"),  # -T truncated names
    ],
)
def test_kernel_trace_every_header_version(rocprof_fixtures, tmp_path, fixture, layout):
    src = rocprof_fixtures / fixture
    place(src, tmp_path / "run" / layout)
    run = report_one(tmp_path / "run")
    assert_kernels_match(run, expected_kernels(src))
    assert run["sources"][0]["format"] == "rocprofv3-csv"
    assert run["sources"][0]["origin"] == layout.rsplit("_kernel_trace.csv", 1)[0]


def test_rocpd_converted_csv_with_leading_guid(rocprof_fixtures, tmp_path):
    """rocpd -> CSV conversion adds a leading Guid column; columns are found by name, so nothing shifts."""
    src = rocprof_fixtures / "docs-data/kernel_trace.csv"
    rows = dict_rows(src)
    out = tmp_path / "run" / "node01" / "834304_kernel_trace.csv"
    out.parent.mkdir(parents=True)
    with open(out, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
        writer.writerow(["Guid"] + list(rows[0]))
        for row in rows:
            writer.writerow(["0000ddb5-8903-7903-b269-cd8d3745bb8a"] + list(row.values()))
    assert_kernels_match(report_one(tmp_path / "run"), expected_kernels(src))


def test_rocpd_api_csv_is_not_mistaken_for_a_kernel_trace(rocprof_fixtures, tmp_path):
    """The real rocpd-to-csv sample is an API trace: named as a kernel trace it fails loudly, not with 0 kernels."""
    from madengine_rocprof.errors import UserError

    place(rocprof_fixtures / "docs-data/rocpd-to-csv.csv", tmp_path / "run" / "h" / "1_kernel_trace.csv")
    with pytest.raises(UserError) as err:
        report_one(tmp_path / "run")
    assert "1_kernel_trace.csv" in str(err.value) and "Kernel_Name" in str(err.value) and err.value.line == 1


@pytest.mark.parametrize("fixture", ["docs-data/counter_collection.csv", "docs-data-2024/counter_collection.csv",
                                     "docs-data/kernel_names.csv"])
def test_counter_collection_every_header_version(rocprof_fixtures, tmp_path, fixture):
    src = rocprof_fixtures / fixture
    place(src, tmp_path / "run" / "node01" / "15606_counter_collection.csv")
    run = report_one(tmp_path / "run")
    rows = dict_rows(src)
    for counter in {r["Counter_Name"] for r in rows}:
        values = [float(r["Counter_Value"]) for r in rows if r["Counter_Name"] == counter]
        got = next(c for c in run["counters"] if c["name"] == counter)
        assert got["dispatches"] == len(values)
        assert got["total"] == pytest.approx(sum(values))
        assert got["mean"] == pytest.approx(sum(values) / len(values))
        assert (got["min"], got["max"]) == (min(values), max(values))
    # counters alone still give the dispatches (test_reports_counter_dispatches.py checks them)
    assert [src["format"] for src in run["sources"]] == ["counters-csv"]


def test_counters_join_the_kernel_trace_of_the_same_run(rocprof_fixtures, tmp_path):
    place(rocprof_fixtures / "docs-data/kernel_trace.csv", tmp_path / "run/node01/834304_kernel_trace.csv")
    place(rocprof_fixtures / "docs-data/counter_collection.csv", tmp_path / "run/node01/834304_counter_collection.csv")
    run = report_one(tmp_path / "run")
    assert run["summary"]["dispatches"] == 9
    per_kernel = run["kernel_counters"]
    for row in dict_rows(rocprof_fixtures / "docs-data/counter_collection.csv"):
        assert per_kernel[row["Kernel_Name"]]["SQ_WAVES"] == pytest.approx(float(row["Counter_Value"]))


def test_kernel_stats_file(rocprof_fixtures, tmp_path):
    """A --stats file (same header for every *_stats.csv; the real sample is the HIP API one) is read by column name."""
    src = rocprof_fixtures / "docs-data/hip_api_stats.csv"
    place(src, tmp_path / "run" / "node01" / "77_kernel_stats.csv")
    run = report_one(tmp_path / "run")
    rows = dict_rows(src)
    got = {k["name"]: k for k in run["kernels"]}
    assert set(got) == {r["Name"] for r in rows}
    for r in rows:
        assert got[r["Name"]]["calls"] == int(r["Calls"])
        assert got[r["Name"]]["total_ns"] == pytest.approx(float(r["TotalDurationNs"]))
        assert got[r["Name"]]["min_ns"] == pytest.approx(float(r["MinNs"]))
    assert run["summary"]["dispatches"] == sum(int(r["Calls"]) for r in rows)
    assert any("no Perfetto trace" in note for note in run["notes"])


def test_memory_copies(rocprof_fixtures, tmp_path):
    src = rocprof_fixtures / "docs-data/memory_copy_trace.csv"
    place(rocprof_fixtures / "docs-data/kernel_trace.csv", tmp_path / "run/h/1_kernel_trace.csv")
    place(src, tmp_path / "run/h/1_memory_copy_trace.csv")
    run = report_one(tmp_path / "run")
    expected: dict[str, list[int]] = {}
    for r in dict_rows(src):
        expected.setdefault(r["Direction"], []).append(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]))
    got = {c["direction"]: (c["calls"], c["total_ns"]) for c in run["memory_copies"]}
    assert sorted(got.values()) == sorted((len(v), sum(v)) for v in expected.values())
    # copies are not kernels: kernel time is unchanged
    assert run["summary"]["gpu_time_ns"] == sum(
        v[1] for v in expected_kernels(rocprof_fixtures / "docs-data/kernel_trace.csv").values()
    )


def test_other_rocprofv3_outputs_are_ignored(rocprof_fixtures, tmp_path):
    """API traces, stats of other domains and PC sampling files in the same tree do not change kernel numbers."""
    for name in ("hip_api_stats.csv", "hip_domain_stats.csv", "hsa_api_trace.csv", "rccl_trace.csv",
                 "scratch_memory_trace.csv", "pc_sampling_host_trap.csv", "marker_api_trace.csv"):
        place(rocprof_fixtures / "docs-data" / name, tmp_path / "run" / "h" / f"1_{name}")
    place(rocprof_fixtures / "docs-data/kernel_trace.csv", tmp_path / "run/h/1_kernel_trace.csv")
    run = report_one(tmp_path / "run")
    assert_kernels_match(run, expected_kernels(rocprof_fixtures / "docs-data/kernel_trace.csv"))
