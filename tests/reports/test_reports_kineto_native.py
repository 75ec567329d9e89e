"""The report's native Kineto scanner (reports/kineto_native.py, native/kineto_scan.c) against the Python reader.

Every Kineto trace among the fixtures, and variants written here (compact JSON, escapes, memory events, blocks cut
in the middle of events), must give the same tables and the same `report --json` both ways; inputs the scanner is
not sure of must go to the Python reader (same figures, same errors). MADENGINE_ROCPROF_NATIVE_KINETO=0 and a
machine without a C compiler select the Python reader.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import kineto_native, kineto_reader, trace_tables
from madengine_rocprof.tracer import api_recorder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
TRACES = sorted(p for p in FIXTURES.rglob("*.json*") if p.name.endswith((".json", ".json.gz"))
                and kineto_reader.is_kineto_trace(p))
V1 = FIXTURES / "kineto" / "ours_h200_tt_v1" / "tt_v1_b8s128.pt.trace.json.gz"
DDP = FIXTURES / "kineto" / "ours_h100_ddp_v1_2rank" / "ddp_v1_2rank_rank0.pt.trace.json.gz"

pytestmark = pytest.mark.skipif(api_recorder.compiler() is None, reason="no C compiler to build the scanner")


def _read(path: Path, native: bool, monkeypatch) -> tuple[dict, str]:
    """Everything the report takes from a trace's read: the tables and the facts around them."""
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "1" if native else "0")
    read = kineto_reader._read(path, tables=True, native=kineto_native.read)
    why_not = kineto_native.why_not
    got = read.got
    out: dict = {}
    for key, frame in (got.host_frames or {}).items():  # as the reader keeps them (categorical names)
        out[f"host {key}"] = frame.with_columns(pl.col(pl.Categorical).cast(pl.String))
    tables = trace_tables.from_kineto(path, read)  # its tables take the reader's frames over
    out |= {key: getattr(tables, key) for key in ("kernels", "copies", "runtime", "cpu_ops", "comms")}
    out["steps"] = tables.steps
    out["facts"] = (read.base, read.rank, read.distributed, read.device_properties, got.memory, list(got.names),
                    list(got.devices), [bytes(c) for c in (got.kernels.name, got.kernels.device)])
    return out, why_not


def _outcome(path: Path, native: bool, monkeypatch) -> tuple[dict | str, str]:
    """What a read gives (the tables, or the error's text) and why the native path was not taken."""
    try:
        return _read(path, native, monkeypatch)
    except UserError as err:
        return str(err), kineto_native.why_not


def _check_equal(native: dict | str, python: dict | str) -> None:
    assert type(native) is type(python), (native, python)
    if isinstance(native, str) or isinstance(python, str):
        assert native == python
        return
    assert native.keys() == python.keys()
    for key, value in native.items():
        if isinstance(value, pl.DataFrame):
            assert value.schema == python[key].schema, key
            assert value.equals(python[key], null_equal=True), key
        else:
            assert value == python[key], key


def _assert_same(path: Path, monkeypatch) -> None:
    native, why_not = _outcome(path, True, monkeypatch)
    python, _ = _outcome(path, False, monkeypatch)
    assert why_not == "", why_not
    assert isinstance(native, dict)
    _check_equal(native, python)


def test_the_fixture_traces_are_found():
    assert len(TRACES) >= 20 and V1 in TRACES and DDP in TRACES


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_kineto_fixture_reads_natively_into_the_same_tables(path, monkeypatch):
    _assert_same(path, monkeypatch)


def test_events_cut_across_blocks_read_the_same(monkeypatch):
    """Small blocks: most events start in one block and end in another (the scanner keeps the cut part)."""
    monkeypatch.setattr(kineto_reader, "CHUNK", 4093)
    _assert_same(DDP, monkeypatch)


def _trace(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _write(tmp_path: Path, trace: dict | str, name: str = "t.pt.trace.json") -> Path:
    out = tmp_path / name
    out.write_text(trace if isinstance(trace, str) else json.dumps(trace), encoding="utf-8")
    return out


def test_compact_json_with_escapes_and_memory_events_reads_the_same(tmp_path, monkeypatch):
    trace = _trace(V1)
    events = trace["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel")
    events.append({**kernel, "name": 'a "quoted" kernel \u00e9\u4e2d', "ts": kernel["ts"] + 1})
    cpu = next(e for e in events if e.get("cat") == "cpu_op")
    events.append({**cpu, "name": "op\twith\ttabs", "args": {**cpu["args"], "Input Dims": [[1, 2], []],
                                                            "Concrete Inputs": ["", "3"]}})
    events += [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5.0, "s": "t",
                "args": {"Total Allocated": n, "Device Type": dt, "Device Id": di, "Bytes": 1}}
               for n, dt, di in ((100, 1, 0), (300, 1, 0), (50, 0, -1), (7, 6, 1), (9, None, None))]
    path = _write(tmp_path, json.dumps(trace, ensure_ascii=True, separators=(",", ":")))
    _assert_same(path, monkeypatch)
    native, _ = _read(path, True, monkeypatch)
    assert native["facts"][4] == {"GPU 0": 300, "CPU": 50, "GPU 1": 7, "device ?": 9}
    assert 'a "quoted" kernel \u00e9\u4e2d' in native["kernels"]["name"].to_list()


@pytest.mark.parametrize("seq", ['"7"', "1.5", "null", "[1, [2]]", '{"a": 1}', "7, \"Sequence number\": 8", "-3"])
def test_any_sequence_number_reads_natively_as_python_reads_it(seq, tmp_path, monkeypatch):
    """No table keeps Sequence number or Fwd thread id: the Python reader skips them whatever they hold (text, a
    float, a list, twice), and so does the scanner, without sending the file to the Python reader."""
    with gzip.open(DDP, "rt", encoding="utf-8") as fh:
        text = fh.read()
    changed = text.replace('"Sequence number": ', f'"Sequence number": {seq}, "Seq0": ', 3)
    changed = changed.replace('"Fwd thread id": ', f'"Fwd thread id": {seq}, "Fwd0": ', 3)
    assert changed.count(seq) >= 6
    _assert_same(_write(tmp_path, changed), monkeypatch)


def test_long_strings_blanks_and_nested_args_read_the_same(tmp_path, monkeypatch):
    """Strings, blank runs and skipped nested values longer than the scanner's 64-byte blocks, with escapes and
    non-ASCII text at every offset: the same tables both ways, on the native path."""
    trace = _trace(V1)
    events = trace["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel")
    cpu = next(e for e in events if e.get("cat") == "cpu_op")
    for i in range(70):
        name = "k" * i + '\\"\u00e9\t' + "\u4e2d" * (i % 5) + "x" * (140 - i)
        events.append({**kernel, "name": name, "ts": kernel["ts"] + i})
        nested = {"a": [[1, 2.5, -3e2], {"b": ["s" * i, None, True, False, {}], "c": []}], "d": "\u00e9" * i}
        events.append({**cpu, "name": f"op{i}", "args": {**cpu["args"], "Ev Idx": nested,
                                                          "Input Dims": [[i, 1024 + i], [], [[1, [2]]]]}})
    text = json.dumps(trace, indent=4, ensure_ascii=i % 2 == 0)
    text = text.replace('"ph": "X",', '"ph": "X",' + " " * 150 + "\n" * 3 + "\t" * 70, 50)
    path = _write(tmp_path, text)
    _assert_same(path, monkeypatch)
    native, _ = _read(path, True, monkeypatch)
    assert any(name.startswith("k" * 69 + '\\"') for name in native["kernels"]["name"].to_list())


@pytest.mark.parametrize("change, why", [
    (lambda t: t.replace('"dur": ', '"dur": 1, "dur": ', 1), "a key given twice"),
    (lambda t: t.replace('"ts": 4', '"ts": "4', 1).replace('.602, "dur"', '.602", "dur"', 1),
     "ts or dur not in Kineto's form"),
    (lambda t: t.replace('"dur": 111.017', '"dur": 1.11017e2', 1), "ts or dur not in Kineto's form"),
    (lambda t: t.replace('"dur": 111.017', '"dur": 111.0171', 1), "ts or dur not in Kineto's form"),
    (lambda t: t.replace('"dur": 111.017', '"dur": -111.017', 1), "ts or dur not in Kineto's form"),
    (lambda t: t.replace('"dur": 111.017', '"dur": NaN', 1), "not a JSON value"),
    (lambda t: t.replace('"External id": 2049', '"External\\u0020id": 2049', 1), "an escape in a key"),
    (lambda t: t.replace('"External id": 2049', '"External id": "2049"', 1), "an id not an integer"),
    (lambda t: t.replace('"Ev Idx": 0', '"Ev Idx": ' + "[" * 40 + "]" * 40, 1), "nested too deeply"),
    (lambda t: t.replace('"Ev Idx": 0', '"Ev Idx": "\\ud800"', 1), "a surrogate escape"),
    (lambda t: t.replace('"cat": "cpu_op"', '"cat": "cpu\\u005fop"', 1), "an escape in a category"),
    (lambda t: t.replace('"pid": 495', '"pid": 4.95', 1), "pid or tid not an integer or a string"),
    (lambda t: t.replace('"ph": "X"', '"ph":\f"X"', 1), "not a JSON value"),
    (lambda t: t.replace("},\n  {", "},,\n  {", 1), "an event not an object"),
])
def test_inputs_the_scanner_is_not_sure_of_go_to_the_python_reader(change, why, tmp_path, monkeypatch):
    """The scanner says why and the Python reader reads the file: the same tables, or the same error."""
    with gzip.open(V1, "rt", encoding="utf-8") as fh:
        text = fh.read()
    changed = change(text)
    assert changed != text
    path = _write(tmp_path, changed)
    native, why_not = _outcome(path, True, monkeypatch)
    assert why in why_not, why_not
    python, _ = _outcome(path, False, monkeypatch)
    _check_equal(native, python)


def test_invalid_utf8_goes_to_the_python_reader(tmp_path, monkeypatch):
    with gzip.open(V1, "rb") as fh:
        data = fh.read().replace(b'"name": "aten::zero_"', b'"name": "aten::zero_\xff"', 1)
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(data)
    # the Python reader's own refusal (a UnicodeDecodeError the CLI reports as unreadable input, exit 2)
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "1")
    with pytest.raises((UserError, UnicodeDecodeError)) as native:
        kineto_reader._read(path, tables=True, native=kineto_native.read)
    assert "invalid UTF-8" in kineto_native.why_not
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "0")
    with pytest.raises((UserError, UnicodeDecodeError)) as python:
        kineto_reader._read(path, tables=True, native=kineto_native.read)
    assert (type(native.value), str(native.value)) == (type(python.value), str(python.value))


def test_a_truncated_trace_is_the_python_readers_error(tmp_path, monkeypatch):
    with gzip.open(V1, "rb") as fh:
        data = fh.read()
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(data[: len(data) // 2])
    errors = []
    for native in ("1", "0"):
        monkeypatch.setenv(kineto_native.ENV_SWITCH, native)
        with pytest.raises(UserError) as err:
            kineto_reader._read(path, tables=True, native=kineto_native.read)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "not valid JSON" in errors[0]


def test_the_switch_and_a_missing_compiler_select_the_python_reader(monkeypatch):
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "0")
    assert kineto_native.read(V1) is None and kineto_native.why_not == f"{kineto_native.ENV_SWITCH}=0"
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "sometimes")
    with pytest.raises(UserError, match="not on or off"):
        kineto_reader._read(V1, tables=True, native=kineto_native.read)
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "1")
    monkeypatch.setattr(kineto_native, "_lib", None)

    def no_compiler(source):
        raise api_recorder.Unavailable("no C compiler (cc, gcc or clang) to build the native kineto_scan")

    monkeypatch.setattr(api_recorder, "build", no_compiler)
    read = kineto_reader._read(V1, tables=True, native=kineto_native.read)
    assert "no C compiler" in kineto_native.why_not and len(read.got.kernels) == 6210


def test_doctor_says_which_reader_the_report_uses(tmp_path):
    from madengine_rocprof.cli import doctor

    assert doctor.report_probe({"PATH": "/usr/bin:/bin"}).startswith("Report's Kineto reader: native scanner")
    assert doctor.report_probe({kineto_native.ENV_SWITCH: "0"}).startswith("Report's Kineto reader: Python (")
    assert "no C compiler" in doctor.report_probe({"PATH": str(tmp_path)})


def _report(run_dir: Path, out: Path, native: str) -> dict:
    env = {"PATH": "/usr/bin:/bin", kineto_native.ENV_SWITCH: native}
    done = subprocess.run([sys.executable, "-m", "madengine_rocprof", "report", str(run_dir), "--json", str(out),
                           "-q"], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    report.pop("generated_at")  # the clock, not the trace
    return report


@pytest.mark.parametrize("folder", ["ours_h100_ddp_v1_2rank", "hta_two_ranks", "tracelens_mi300_bert"])
def test_the_report_is_identical_both_ways(folder, tmp_path):
    run_dir = FIXTURES / "kineto" / folder
    native = _report(run_dir, tmp_path / "native.json", "1")
    python = _report(run_dir, tmp_path / "python.json", "0")
    assert native == python
    assert native["runs"][0]["summary"]["dispatches"] > 0


def test_the_report_reads_through_the_native_scanner(tmp_path, monkeypatch):
    """`report` (discovery's single pass) asks the native reader, which reads the trace (not the Python reader)."""
    from madengine_rocprof.cli import main

    calls = []
    real = kineto_native.read

    def counted(path):
        read = real(path)
        calls.append((path.name, read is not None))
        return read

    monkeypatch.setattr(kineto_native, "read", counted)
    monkeypatch.setenv(kineto_native.ENV_SWITCH, "1")
    assert main(["report", str(FIXTURES / "kineto" / "ours_h100_ddp_v1_2rank"), "--json", str(tmp_path / "r.json"),
                 "-q"]) == 0
    assert calls and all(native for _, native in calls), calls


@pytest.mark.parametrize("events", [
    [],
    [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "x"}}],
    [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 2, "ts": 10, "dur": 5},
     {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 2, "ts": 20, "dur": 5},
     {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": "main", "tid": 2, "ts": 11.5, "dur": 1.25,
      "args": None},
     {"ph": "X", "cat": "Kernel", "name": "k", "pid": 3, "tid": "stream 7", "ts": 12, "dur": 1}],
], ids=["no events", "metadata only", "old categories, a repeated step, text pid and tid"])
def test_small_traces_read_the_same(events, tmp_path, monkeypatch):
    path = _write(tmp_path, {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 1000})
    _assert_same(path, monkeypatch)


def test_the_input_limit_holds_on_the_native_path(monkeypatch):
    """MADENGINE_ROCPROF_MAX_INPUT_MB bounds what the trace decompresses to, whichever reader reads it."""
    from madengine_rocprof import inputs

    monkeypatch.setenv(inputs.LIMIT_ENV, "1")  # the DDP rank trace inflates to about 20 MB
    errors = []
    for native in ("1", "0"):
        monkeypatch.setenv(kineto_native.ENV_SWITCH, native)
        with pytest.raises(UserError, match="over the limit") as err:
            kineto_reader._read(DDP, tables=True, native=kineto_native.read)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_the_native_path_needs_no_numpy():
    """numpy is not a runtime dependency: the columns reach polars through the Arrow C data interface."""
    code = ("import sys; sys.modules['numpy'] = None; from pathlib import Path; "
            "from madengine_rocprof.reports import kineto_native as n, kineto_reader as r; "
            "read = r._read(Path(sys.argv[1]), tables=True, native=n.read); assert n.why_not == '', n.why_not; "
            "print(len(read.got.kernels), read.got.host_frames['cpu'].height)")
    done = subprocess.run([sys.executable, "-c", code, str(V1)], cwd=REPO, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6210", "34645"]
