"""The Kineto trace tables' compact dtypes (Categorical texts, Int32 ids where they fit) hold the trace's values."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.reports import kineto_native, kineto_reader, trace_tables
from madengine_rocprof.tracer import api_recorder

DDP = Path(__file__).resolve().parents[1] / "fixtures" / "kineto" / "ours_h100_ddp_v1_2rank" / \
    "ddp_v1_2rank_rank0.pt.trace.json.gz"
READERS = [pytest.param(False, id="python"), pytest.param(True, id="native", marks=pytest.mark.skipif(
    api_recorder.compiler() is None, reason="no C compiler to build the scanner"))]


def _tables(path: Path, native: bool, monkeypatch) -> trace_tables.TraceTables:
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "1" if native else "0")
    return trace_tables.from_kineto(path, kineto_reader._read(path, tables=True, native=kineto_native.read))


def _cpu_ops(trace: dict) -> list[dict]:
    """The cpu_op / user_annotation complete events, read independently with json."""
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]


@pytest.mark.parametrize("native", READERS)
def test_texts_are_categorical_and_small_ids_int32(native, monkeypatch):
    tables = _tables(DDP, native, monkeypatch)
    for key in ("kernels", "copies", "runtime", "cpu_ops"):
        assert tables._frame(key).schema["name"] == pl.Categorical, key
    for key in ("input_dims", "input_types", "input_strides", "concrete_inputs"):
        assert tables.cpu_ops.schema[key] == pl.Categorical
    assert tables.comms.schema["name"] == pl.String
    for key in ("cpu_ops", "runtime"):
        assert [tables._frame(key).schema[k] for k in ("pid", "tid", "external_id")] == [pl.Int32] * 3, key
    assert tables.runtime.schema["correlation"] == pl.Int64  # joined with the kernels' Int64 ids
    assert "seq" not in tables.cpu_ops.columns and "fwd_tid" not in tables.cpu_ops.columns  # read by no analysis
    with gzip.open(DDP, "rt", encoding="utf-8") as fh:
        ops = _cpu_ops(json.load(fh))
    assert sorted(tables.cpu_ops["name"].cast(pl.String).to_list()) == sorted(e["name"] for e in ops)
    assert sorted(tables.cpu_ops["tid"].to_list()) == sorted(e["tid"] for e in ops)
    ids = [e.get("args", {}).get("External id") for e in ops]
    assert sorted(tables.cpu_ops["external_id"].drop_nulls().to_list()) == sorted(i for i in ids if i is not None)


@pytest.mark.parametrize("native", READERS)
def test_an_id_past_int32_keeps_int64_and_its_value(native, tmp_path, monkeypatch):
    with gzip.open(DDP, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    big = 2**40 + 7  # a pthread id as some tracers write the tid
    for event in _cpu_ops(trace):
        event["tid"] = big
    path = tmp_path / "big_tid.pt.trace.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    ops = _tables(path, native, monkeypatch).cpu_ops
    assert ops.schema["tid"] == pl.Int64 and ops.schema["pid"] == pl.Int32
    assert set(ops["tid"].to_list()) == {big}
