import csv

import pytest

from madengine_rocprof.runner.results import PERF_COLUMNS, append_perf_row, parse_performance


@pytest.mark.parametrize("log, expected", [
    ("x\nperformance: 4263.88 tokens_per_second\n", (4263.88, "tokens_per_second")),
    ("performance:   12 samples/s, more\n", (12.0, "samples/s")),
    ("performance: 1.5e3 tok_s\nperformance: 9 later\n", (1500.0, "tok_s")),  # madengine takes the first
    ("performance: -0.5 delta\n", (-0.5, "delta")),
    ("no line here\n", None),
    ("performance: fast tokens\n", None),
])
def test_parse_performance(log, expected):
    assert parse_performance(log) == expected


def test_perf_csv_appends_and_keeps_rows_and_extra_columns(tmp_path):
    path = tmp_path / "perf.csv"
    path.write_text("model,status,custom\nold,SUCCESS,kept\n")
    append_perf_row(path, {"model": "m1", "performance": 1.5, "status": "FAILURE", "args": "--a 'x, y'"})
    append_perf_row(path, {"model": "m2", "status": "SUCCESS"})
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        fields = list(reader.fieldnames or [])
        assert fields[: len(PERF_COLUMNS)] == list(PERF_COLUMNS) and fields[-1] == "custom"
    assert [(r["model"], r["status"]) for r in rows] == [("old", "SUCCESS"), ("m1", "FAILURE"), ("m2", "SUCCESS")]
    assert rows[0]["custom"] == "kept" and rows[1]["args"] == "--a 'x, y'" and rows[1]["performance"] == "1.5"
    assert not list(tmp_path.glob(".perf.csv.*"))  # no temporary file left behind


def test_perf_csv_rejects_unknown_column_and_writes_nothing(tmp_path):
    path = tmp_path / "perf.csv"
    with pytest.raises(ValueError):
        append_perf_row(path, {"model": "m", "bogus": 1})
    assert not path.exists()


@pytest.mark.parametrize("result, expected", [
    ({"settings": {"dtype": "fp32"}}, "fp32"),  # what the run used wins over the card's label
    ({"settings": {"dtype": " bf16 "}}, "bf16"),
    ({"settings": {"dtype": ""}}, "bf16"),
    ({"settings": {"dtype": 16}}, "bf16"),
    ({"settings": None}, "bf16"),
    ({}, "bf16"),
    ([], "bf16"),
])
def test_precision_is_the_dtype_the_workload_ran_in_else_the_label(result, expected):
    from madengine_rocprof.runner.record import precision_of

    assert precision_of(result, "bf16") == expected
