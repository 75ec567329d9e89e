"""Malformed input gets a clear error naming the file and line, a non-zero exit, and no output files."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import build_report, load_runs

from .reports_builders import HEADER_7, random_dispatches, write_trace

NAMES = ["gemm_kernel", "add_kernel"]


def fails(run_dir: Path) -> UserError:
    with pytest.raises(UserError) as err:
        build_report(load_runs([run_dir]))
    return err.value


def test_truncated_csv_names_file_and_line(tmp_path, rocprof_fixtures):
    src = (rocprof_fixtures / "docs-data" / "kernel_trace.csv").read_text()
    cut = src[: src.index("\n", src.index("\n", src.index("\n") + 1) + 1) + 60]  # header, 2 rows, part of the 3rd
    path = tmp_path / "run" / "h" / "1_kernel_trace.csv"
    path.parent.mkdir(parents=True)
    path.write_text(cut)
    err = fails(tmp_path / "run")
    assert err.file == str(path) and err.line == 4
    assert "fields" in err.what and "truncated" in str(err)


def test_truncated_inside_a_quoted_name(tmp_path):
    path = tmp_path / "run" / "h" / "1_kernel_trace.csv"
    write_trace(path, random_dispatches(NAMES, 5, seed=1))
    path.write_text(path.read_text() + '"KERNEL_DISPATCH","Agent 4",1,1,1,9,9,"void trunc')
    err = fails(tmp_path / "run")
    assert err.file == str(path) and err.line == 7


@pytest.mark.parametrize("drop", ["Kernel_Name", "Start_Timestamp", "End_Timestamp"])
def test_missing_required_column(tmp_path, drop):
    header = [c for c in HEADER_7 if c != drop]
    path = tmp_path / "run" / "h" / "1_kernel_trace.csv"
    path.parent.mkdir(parents=True)
    path.write_text(",".join(f'"{c}"' for c in header) + "\n")
    err = fails(tmp_path / "run")
    assert err.line == 1 and drop in err.what and err.file == str(path)


@pytest.mark.parametrize("name", ["1_kernel_trace.csv", "1_kernel_stats.csv", "1_counter_collection.csv"])
def test_empty_file(tmp_path, name):
    path = tmp_path / "run" / "h" / name
    path.parent.mkdir(parents=True)
    path.write_text("")
    err = fails(tmp_path / "run")
    assert err.file == str(path) and "empty" in err.what


def test_non_numeric_timestamp_and_negative_duration(tmp_path):
    path = tmp_path / "run" / "h" / "1_kernel_trace.csv"
    write_trace(path, [("a", 10, 20), ("b", 30, 40)])
    path.write_text(path.read_text().replace(",30,40,", ",30,abc,"))
    err = fails(tmp_path / "run")
    assert err.line == 3 and "End_Timestamp" in err.what
    write_trace(path, [("a", 10, 20), ("b", 50, 40)])
    err = fails(tmp_path / "run")
    assert err.line == 3 and "before" in err.what


def test_corrupt_sqlite(tmp_path):
    path = tmp_path / "run" / "1_results.db"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"SQLite format 3\x00" + b"\x13" * 2000)
    err = fails(tmp_path / "run")
    assert err.file == str(path) and "SQLite" in err.what


def test_truncated_json(tmp_path):
    path = tmp_path / "run" / "1_results.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"rocprofiler-sdk-tool": [{"kernel_symbols": [], "buffer_records": {"kernel_dispatch": [{"start_ti'
    )
    err = fails(tmp_path / "run")
    assert err.file == str(path) and err.line == 1 and err.column is not None


def test_bad_workload_result(tmp_path):
    write_trace(tmp_path / "run" / "h" / "1_kernel_trace.csv", [("a", 1, 2)])
    (tmp_path / "run" / "workload_result.json").write_text("{not json")
    err = fails(tmp_path / "run")
    assert (err.file or "").endswith("workload_result.json") and err.line == 1


def test_no_profiler_output(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("hello")
    err = fails(tmp_path / "run")
    assert "no profiler output" in err.what and "kernel_trace.csv" in (err.fix or "")


def test_cli_error_exit_code_and_nothing_written(tmp_path, capsys):
    good = tmp_path / "good"
    write_trace(good / "h" / "1_kernel_trace.csv", random_dispatches(NAMES, 10, seed=2))
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    trace = bad / "h" / "1_kernel_trace.csv"
    trace.write_text(trace.read_text()[:-30])
    out = tmp_path / "out"
    code = main(["report", str(good), str(bad), "--html", str(out / "r.html"), "--json", str(out / "r.json"),
                 "--perfetto", str(out / "pf")])
    assert code == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("error: ") and str(trace) in stderr
    assert not out.exists() or not any(out.rglob("*"))


def test_cli_unknown_baseline(tmp_path, capsys):
    write_trace(tmp_path / "a" / "h" / "1_kernel_trace.csv", [("k", 1, 2)])
    assert main(["report", str(tmp_path / "a"), "--baseline", "nope", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--baseline" in err and "a" in err


def test_cli_not_a_directory(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_workload_result_must_be_an_object(tmp_path):
    write_trace(tmp_path / "run" / "h" / "1_kernel_trace.csv", [("a", 1, 2)])
    (tmp_path / "run" / "workload_result.json").write_text(json.dumps([1, 2]))
    assert "JSON object" in fails(tmp_path / "run").what
