"""Counter-only runs (rocprofv3 `-i counters.txt` without --kernel-trace, ncu converted by the wrapper):
dispatches, unique kernels and hotspots come from the counter_collection rows."""
from __future__ import annotations

import json

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.wrapper.contracts import ReportRun

from .reports_builders import dict_rows, place, random_dispatches, report_one, write_csv, write_trace

NAMES = ["Cijk_Alik_Bljk_SB_MT128x128x16", "void at::native::vectorized_elementwise_kernel<4, add>", "_attn_fwd_kernel"]
CC_HEADER = ["Correlation_Id", "Dispatch_Id", "Agent_Id", "Kernel_Name", "Counter_Name", "Counter_Value",
             "Start_Timestamp", "End_Timestamp"]


def per_dispatch(rows: list[dict], id_column: str = "Dispatch_Id") -> dict[str, dict]:
    """Independent grouping with the csv module: the first row of each dispatch id."""
    first: dict[str, dict] = {}
    for row in rows:
        first.setdefault(row[id_column], row)
    return first


def counter_rows(dispatches, counters, first_id=1, ncu_durations=None, relative=False):
    """Long-format rows: every counter for every (name, start, end) dispatch.

    ncu_durations adds gpu__time_duration.sum."""
    rows = []
    for i, (name, start, end) in enumerate(dispatches):
        dispatch_id = first_id + i
        if relative:  # ncu replay timestamps: start at 0
            start, end = 0, end - start
        values = dict(counters)
        if ncu_durations is not None:
            values["gpu__time_duration.sum"] = ncu_durations[i]
        for counter, value in values.items():
            rows.append([dispatch_id, dispatch_id, "Agent 0", name, counter, float(value), start, end])
    return rows


def kernel_calls_and_totals(run: ReportRun) -> dict[str, tuple]:
    return {k["name"]: (k["calls"], k["total_ns"]) for k in run["kernels"]}


@pytest.mark.parametrize("fixture", ["docs-data/counter_collection.csv", "docs-data-2024/counter_collection.csv",
                                     "docs-data/kernel_names.csv"])
def test_real_counter_collection_gives_dispatches_and_kernels(rocprof_fixtures, tmp_path, fixture):
    src = rocprof_fixtures / fixture
    place(src, tmp_path / "run" / "node01" / "15606_counter_collection.csv")
    run = report_one(tmp_path / "run")
    dispatches = per_dispatch(dict_rows(src))
    timed = "Start_Timestamp" in next(iter(dispatches.values()))
    expected: dict[str, list[int]] = {}
    for row in dispatches.values():
        duration = int(row["End_Timestamp"]) - int(row["Start_Timestamp"]) if timed else 0
        expected.setdefault(row["Kernel_Name"], []).append(duration)
    assert run["summary"]["has_kernel_data"]
    assert run["summary"]["dispatches"] == len(dispatches)
    assert run["summary"]["unique_kernels"] == len(expected)
    assert [s["format"] for s in run["sources"]] == ["counters-csv"]
    assert any("come from the counter collection" in note for note in run["notes"])
    if timed:
        assert kernel_calls_and_totals(run) == {n: (len(d), sum(d)) for n, d in expected.items()}
        assert run["summary"]["gpu_time_ns"] == sum(sum(d) for d in expected.values())
        assert {(k["min_ns"], k["max_ns"]) for k in run["kernels"]} == {(min(d), max(d)) for d in expected.values()}
        assert run["summary"]["kernel_time_from"] == ["counter collection (End - Start)"]
    else:
        assert kernel_calls_and_totals(run) == {n: (len(d), None) for n, d in expected.items()}
        assert run["summary"]["gpu_time_ns"] is None
        assert [k["calls"] for k in run["kernels"]] == sorted((k["calls"] for k in run["kernels"]), reverse=True)
        assert any("no timestamps" in note for note in run["notes"])


def test_kernel_trace_wins_over_counter_rows_of_the_same_process(rocprof_fixtures, tmp_path):
    place(rocprof_fixtures / "docs-data/kernel_trace.csv", tmp_path / "run/node01/834304_kernel_trace.csv")
    place(rocprof_fixtures / "docs-data/counter_collection.csv", tmp_path / "run/node01/834304_counter_collection.csv")
    run = report_one(tmp_path / "run")
    trace = dict_rows(rocprof_fixtures / "docs-data/kernel_trace.csv")
    assert [s["format"] for s in run["sources"]] == ["rocprofv3-csv"]
    assert run["summary"]["dispatches"] == len(trace)
    assert run["summary"]["gpu_time_ns"] == sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in trace)
    assert run["summary"]["kernel_time_from"] == ["kernel trace"]
    assert not any("come from the counter collection" in note for note in run["notes"])


def test_process_without_trace_next_to_one_with_trace(tmp_path):
    """Per process: the traced process keeps its trace, the counter-only one is derived from its counter rows."""
    traced, counted = random_dispatches(NAMES, 30, seed=1), random_dispatches(NAMES, 20, seed=2)
    write_trace(tmp_path / "run/h/1_kernel_trace.csv", traced)
    write_csv(tmp_path / "run/h/2_counter_collection.csv", CC_HEADER, counter_rows(counted, {"SQ_WAVES": 64}))
    run = report_one(tmp_path / "run")
    assert {s["origin"]: (s["format"], s["dispatches"]) for s in run["sources"]} == {
        "h/1": ("rocprofv3-csv", 30), "h/2": ("counters-csv", 20)}
    assert run["summary"]["gpu_time_ns"] == sum(e - s for _, s, e in traced + counted)


@pytest.mark.parametrize("pass_dir", ["pmc", "pass"])
def test_multi_pass_counter_only_counts_dispatches_from_the_first_pass(tmp_path, pass_dir):
    """Every pass re-ran the same dispatches (other timestamps, other counters): only the first pass counts."""
    passes = {n: random_dispatches(NAMES, 40, seed=10 + n) for n in (1, 2, 10)}
    same_names = [name for name, _, _ in passes[1]]
    for n in (2, 10):  # the same kernels in the same order, durations differ per re-run
        passes[n] = [(name, s, e) for name, (_, s, e) in zip(same_names, passes[n], strict=True)]
    for n, dispatches in passes.items():
        write_csv(tmp_path / f"run/{pass_dir}_{n}/h/{100 + n}_counter_collection.csv", CC_HEADER,
                  counter_rows(dispatches, {f"COUNTER_{n}_A": n, f"COUNTER_{n}_B": 2 * n}))
    run = report_one(tmp_path / "run")
    assert run["summary"]["dispatches"] == 40
    assert [s["pass"] for s in run["sources"]] == [f"{pass_dir}_1"]
    assert run["summary"]["gpu_time_ns"] == sum(e - s for _, s, e in passes[1])
    assert {c["name"] for c in run["counters"]} == {f"COUNTER_{n}_{x}" for n in (1, 2, 10) for x in "AB"}
    assert any(f"{pass_dir}_2, {pass_dir}_10" in note and f"of {pass_dir}_1 only" in note for note in run["notes"])


def test_ncu_conversion_prefers_gpu_time_duration(tmp_path):
    """The wrapper's ncu conversion: replay-relative timestamps, kernel time from gpu__time_duration.sum."""
    dispatches = random_dispatches(NAMES, 25, seed=3)
    durations = [1000.0 + 37 * i for i in range(25)]  # deliberately unlike End - Start
    path = write_csv(tmp_path / "run/vm/720_counter_collection.csv", CC_HEADER,
                     counter_rows(dispatches, {"sm__cycles_elapsed.avg": 5.0}, ncu_durations=durations, relative=True))
    run = report_one(tmp_path / "run")
    expected: dict[str, list[float]] = {}
    for row in per_dispatch(dict_rows(path)).values():
        dispatch_rows = [r for r in dict_rows(path) if r["Dispatch_Id"] == row["Dispatch_Id"]]
        value = next(float(r["Counter_Value"]) for r in dispatch_rows if r["Counter_Name"] == "gpu__time_duration.sum")
        expected.setdefault(row["Kernel_Name"], []).append(value)
    assert kernel_calls_and_totals(run) == {n: (len(d), pytest.approx(sum(d))) for n, d in expected.items()}
    assert run["summary"]["gpu_time_ns"] == pytest.approx(sum(durations))
    assert run["summary"]["kernel_time_from"] == ["counter collection (gpu__time_duration.sum)"]
    assert any("per-replay durations" in note for note in run["notes"])
    assert sum(c["share"] for c in run["categories"]) == pytest.approx(1.0)


def test_correlation_id_when_dispatch_id_is_absent(tmp_path):
    dispatches = random_dispatches(NAMES, 15, seed=4)
    rows = [row[:1] + row[2:] for row in counter_rows(dispatches, {"A": 1, "B": 2})]
    write_csv(tmp_path / "run/h/1_counter_collection.csv", CC_HEADER[:1] + CC_HEADER[2:], rows)
    run = report_one(tmp_path / "run")
    assert run["summary"]["dispatches"] == 15
    assert run["summary"]["gpu_time_ns"] == sum(e - s for _, s, e in dispatches)


def test_ncu_style_comparison_and_capped_counter_table(tmp_path, capsys):
    """Two counter-only runs: the comparison has numbers, and the counter table stops at 25 rows."""
    runs = []
    for label, seed in (("base", 5), ("new", 6)):
        dispatches = random_dispatches(NAMES, 12, seed=seed)
        counters = {f"metric_{i:02d}": i for i in range(30)}
        write_csv(tmp_path / label / "vm/1_counter_collection.csv", CC_HEADER,
                  counter_rows(dispatches, counters, ncu_durations=[e - s for _, s, e in dispatches], relative=True))
        runs.append(dispatches)
    out_json, out_html = tmp_path / "r.json", tmp_path / "r.html"
    code = main(
        ["report", str(tmp_path / "base"), str(tmp_path / "new"), "--json", str(out_json), "--html", str(out_html)]
    )
    text = capsys.readouterr().out
    assert code == 0
    report = json.loads(out_json.read_text())
    gpu = [sum(e - s for _, s, e in d) for d in runs]
    assert [(r["dispatches"], r["gpu_time_ns"]) for r in report["comparison"]] == [(12, gpu[0]), (12, gpu[1])]
    assert report["comparison"][1]["gpu_time_speedup"] == pytest.approx(gpu[0] / gpu[1])
    assert [r["unique_kernels"] for r in report["comparison"]] == [len({n for n, _, _ in d}) for d in runs]
    assert len(report["runs"][0]["counters"]) == 31  # the JSON keeps every counter
    assert "no kernel timing in this run" not in text
    assert "| metric_23 |" in text and "| metric_24 |" not in text  # gpu__time_duration.sum sorts first
    assert "6 more counters not shown" in text  # 30 metrics + gpu__time_duration.sum = 31, 25 shown
    html = out_html.read_text()
    assert "metric_23" in html and "metric_24" not in html and "6 more counters not shown" in html


def test_untimed_counter_run_renders(rocprof_fixtures, tmp_path, capsys):
    place(rocprof_fixtures / "docs-data-2024/counter_collection.csv", tmp_path / "run/h/1_counter_collection.csv")
    out_html = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "run"), "--html", str(out_html)]) == 0
    text = capsys.readouterr().out
    assert "kernels by calls" in text and "kernels by calls" in out_html.read_text()
