"""`report --perfetto` on a Kineto trace writes its events from the trace tables the report read (one vectorised
pass), byte for byte what the per-event writer (a second read of the file) writes; where the tables cannot say it
exactly, the per-event writer runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.reports import discover, perfetto

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kineto"
FOLDERS = ["ours_h100_ddp_v1_2rank", "hta_two_ranks", "tracelens_mi300_bert", "ours_h100_tt_v4_graph",
           "kineto_tb_resnet50"]


def _perfetto(folder: Path, out: Path) -> bytes:
    assert main(["report", str(folder), "--perfetto", str(out), "-q"]) == 0
    (trace,) = out.glob("*.perfetto.json")
    return trace.read_bytes()


@pytest.mark.parametrize("name", FOLDERS)
def test_the_tables_path_writes_what_the_per_event_path_writes(name, tmp_path, monkeypatch):
    fast = _perfetto(FIXTURES / name, tmp_path / "fast")
    monkeypatch.setattr(perfetto, "dispatch_frame", lambda source: None)  # the per-event writer, file read again
    assert fast == _perfetto(FIXTURES / name, tmp_path / "slow")
    events = json.loads(fast)["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) > 0


def test_a_stream_that_is_not_an_integer_takes_the_per_event_path(tmp_path):
    with gzip.open(FIXTURES / "ours_h100_gemm" / "gemm_shapes.pt.trace.json.gz", "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    kernel["args"]["stream"] = "s7"  # iter_kineto writes the text as the trace spells it
    run = tmp_path / "run"
    run.mkdir()
    (run / "t.pt.trace.json").write_text(json.dumps(trace))
    tracks = {e["args"]["name"] for e in json.loads(_perfetto(run, tmp_path / "pf"))["traceEvents"]
              if e["name"] == "thread_name"}
    assert any(t.endswith("stream s7") for t in tracks)


def test_times_past_ten_to_the_fifteen_ns_keep_the_float_text(tmp_path):
    frame = pl.DataFrame({"name": ["a", "b\u00e9\"", "a"], "start": [0, 10**15 + 1, 2 * 10**15 + 123456],
                          "end": [1500, 10**15 + 7, 2 * 10**15 + 999999],
                          "track": ["GPU 0 stream 7", "GPU 0 stream 7", "GPU 1 stream 3"]})
    lines: list[str] = []

    def emit(event: dict) -> None:
        lines.append(",\n" + json.dumps(event, separators=(",", ":"), allow_nan=False))

    perfetto._write_frame(frame.with_columns(pl.col("name").cast(pl.Categorical)), 1, 0, emit, lines.append)
    got = json.loads("[" + "".join(lines)[2:] + "]")
    xs = [e for e in got if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"], e["tid"]) for e in xs] == [
        ("a", 0.0, 1.5, 1), ("b\u00e9\"", round((10**15 + 1) / 1e3, 3), 0.006, 1),
        ("a", round((2 * 10**15 + 123456) / 1e3, 3), round(876543 / 1e3, 3), 2)]
    assert [e["args"]["name"] for e in got if e["ph"] == "M"] == ["GPU 0 stream 7", "GPU 1 stream 3"]


def test_micros_text_is_json_dumps_of_the_rounded_float():
    values = [0, 1, 10, 999, 1000, 1500, 1_000_001, 123_456_789, 10**15 - 1, 987_654_321_012_345]
    got = pl.select(perfetto._micros(pl.lit(pl.Series(values, dtype=pl.Int64)))).to_series().to_list()
    assert got == [json.dumps(round(v / 1e3, 3)) for v in values]


def test_dispatch_frame_needs_tables():
    from madengine_rocprof.reports.model import TimingSource

    assert discover.dispatch_frame(TimingSource(Path("x"), "x", "kineto", "x", None)) is None
