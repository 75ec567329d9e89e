"""The native kernel-trace reader (reports/native/csv_columns.c, reports/csv_native.py; issue 33) against the path
it replaces (the line guard, polars, the csv module), which MADENGINE_ROCPROF_NATIVE_CSV=0 selects.

For every file, both paths must give the same table (values and dtypes) or the same error message. The native
reader must also actually read the plain files rocprofv3 writes (else the comparison would prove nothing) and
refuse, to the Python path, every file outside its subset: ragged lines, quoted newlines, CR, quotes inside fields,
float / negative / huge / quoted timestamps, NUL and other control bytes, non-UTF-8 names, a BOM. Blank lines are
skipped as the csv module skips them; the Python path gives such a file to the csv module (String names there)."""
from __future__ import annotations

import gzip
import json
import random
import uuid
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import csv_native, csv_readers, trace_tables
from madengine_rocprof.tracer import api_recorder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PLAIN = FIXTURES / "rocprofv3" / "docs-data" / "kernel_trace.csv"  # rocprofv3 1.0 (ROCm 6.4 docs), unedited
ROCPROFV3_TRACES = sorted(
    p for p in FIXTURES.rglob("*kernel_trace*.csv*") if p.suffix in (".csv", ".gz"))
HEADER = PLAIN.read_text().splitlines()[0]
NATIVE_ROW = '"KERNEL_DISPATCH","Agent 4",1,1,834304,{n},10,"{name}",1,{start},{end},0,0,8,0,16,64,1,1,1024,1024,1'


def row(name: str = "k", start: int | str = 100, end: int | str = 200, n: int = 1) -> str:
    return NATIVE_ROW.format(name=name, start=start, end=end, n=n)


def table_of(path: Path, native: bool, monkeypatch, tracks: bool = False, device: str = "agent"):
    """(the table or the error message, why the native reader did not read it)."""
    monkeypatch.setenv(csv_native.ENV_SWITCH, "1" if native else "0")
    monkeypatch.setattr(csv_native, "why_not", "not asked")  # a file refused before any reader (no header)
    try:
        return csv_readers.kernel_trace_table(path, tracks=tracks, device=device), csv_native.why_not
    except UserError as err:
        return f"UserError: {err}", csv_native.why_not


def assert_same(path: Path, monkeypatch, tracks: bool = False, device: str = "agent") -> str:
    """Both paths agree on `path`; returns why the native reader did not read it ("" when it did)."""
    native, why_not = table_of(path, True, monkeypatch, tracks, device)
    python, python_why = table_of(path, False, monkeypatch, tracks, device)
    assert python_why in (f"{csv_native.ENV_SWITCH}=0", "not asked")
    if isinstance(native, str) or isinstance(python, str):
        assert native == python
    else:
        if why_not == "" and native.schema != python.schema:
            # the csv module read it there (only for blank lines, which the line guard cannot judge): String names
            assert any(line.strip() == b"" for line in path.read_bytes().split(b"\n")[:-1])
            assert dict(python.schema) == {k: pl.String if v == pl.Categorical else v for k, v in native.schema.items()}
            native = native.with_columns(pl.col(pl.Categorical).cast(pl.String))
        assert_frame_equal(native, python)  # values and dtypes (Categorical names, Int64 times)
    return why_not


# the columns trace_tables reads through csv_readers.fast_columns (its per-event kernel table)
STRINGS: dict[str, tuple[str, ...]] = {"name": ("Kernel_Name",), "agent": ("Agent_Id",),
                                       "stream": ("Stream_Id", "Queue_Id"), "correlation": ("Correlation_Id",)}
TIMES: dict[str, tuple[str, ...]] = {"start": ("Start_Timestamp",), "end": ("End_Timestamp",)}


def assert_same_columns(path: Path, monkeypatch) -> str:
    """fast_columns and the per-event tables agree with the native reader on and off; returns its why_not."""
    got: dict[bool, tuple[object, str, object]] = {}
    for native in (True, False):
        monkeypatch.setenv(csv_native.ENV_SWITCH, "1" if native else "0")
        columns, why_not = csv_readers.fast_columns(path, STRINGS, TIMES), csv_native.why_not
        try:
            kernels: object = trace_tables.from_rocprofv3_csv(path).kernels
        except UserError as err:
            kernels = str(err)
        got[native] = (columns, why_not, kernels)
    for a, b in zip(got[True][::2], got[False][::2], strict=True):
        if isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame):
            assert_frame_equal(a, b)
        elif isinstance(a, pl.DataFrame) and b is None:  # the guard cannot judge blank lines: the csv loop reads it
            assert any(line.strip() == b"" for line in path.read_bytes().split(b"\n")[:-1])
        else:
            assert a == b
    return got[True][1]


@pytest.fixture(autouse=True)
def built():
    if csv_native.library() is None:
        pytest.skip(f"the native reader did not build: {csv_native.why_not}")


def unpacked(path: Path, tmp_path: Path) -> Path:
    if path.suffix != ".gz":
        return path
    out = tmp_path / path.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


@pytest.mark.parametrize("fixture", ROCPROFV3_TRACES, ids=lambda p: str(p.relative_to(FIXTURES)))
@pytest.mark.parametrize(("tracks", "device"), [(False, "agent"), (True, "agent"), (False, "thread")])
def test_fixtures_read_alike(fixture: Path, tracks, device, tmp_path, monkeypatch):
    """Every kernel trace among the fixtures (rocprofv3 documentation data, our tracer's H100 runs): one table."""
    path = unpacked(fixture, tmp_path)
    why_not = assert_same(path, monkeypatch, tracks, device)
    assert assert_same_columns(path, monkeypatch) == why_not
    assert why_not == ""  # the plain layout is read natively: the comparison above compared two paths


def test_reads_plain_file_exactly(tmp_path, monkeypatch):
    """Values checked against the text written here, not only against the other path."""
    path = tmp_path / "kernel_trace.csv"
    names = ["void f<int, 2>(float*, int)", "g", "Cijk_Alik_Bljk_SB_MT128x128x16", "f\u00e9\u4e2d\U0001f600"]
    rows = [(names[i % 4], 10 * i, 10 * i + i % 7) for i in range(50)]
    path.write_text("\n".join([HEADER, *(row(n, s, e, i) for i, (n, s, e) in enumerate(rows))]) + "\n")
    table, why_not = table_of(path, True, monkeypatch, tracks=True)
    assert why_not == ""
    assert table.schema == {"name": pl.Categorical(), "start": pl.Int64, "end": pl.Int64,
                            "device": pl.Categorical(), "track": pl.String}
    assert table["name"].cast(pl.String).to_list() == [r[0] for r in rows]
    assert table["start"].to_list() == [r[1] for r in rows]
    assert table["end"].to_list() == [r[2] for r in rows]
    assert set(table["device"].cast(pl.String)) == {"Agent 4"}
    assert set(table["track"]) == {"agent Agent 4 queue 1"}  # Stream_Id is the queue column read first


# what the native reader reads itself: (file text, True) or refuses to the Python path: (file text, False)
GOOD = [row("a", 1, 5), row("b", 2, 9)]
CASES = {
    "no final newline": ("\n".join([HEADER, *GOOD]), True),
    "comma inside a quoted name": ("\n".join([HEADER, row("f(int, int)", 1, 2)]) + "\n", True),
    "tab inside a name": ("\n".join([HEADER, row("a\tb", 1, 2)]) + "\n", True),
    "leading zeros": ("\n".join([HEADER, row("a", "007", "0010")]) + "\n", True),
    "largest int64": ("\n".join([HEADER, row("a", 0, 2**63 - 1)]) + "\n", True),
    "empty device": ("\n".join([HEADER, row("a").replace('"Agent 4"', "")]) + "\n", True),
    "empty quoted device": ("\n".join([HEADER, row("a").replace('"Agent 4"', '""')]) + "\n", True),
    "non-UTF-8 outside the read columns": (
        "\n".join([HEADER, row("a").replace("KERNEL_DISPATCH", "KERNEL_\udcff")]) + "\n", True),
    "equal start and end": ("\n".join([HEADER, row("a", 5, 5)]) + "\n", True),
    "fewer fields": ("\n".join([HEADER, GOOD[0], GOOD[1].rsplit(",", 1)[0]]) + "\n", False),
    "more fields": ("\n".join([HEADER, GOOD[0] + ",1", GOOD[1]]) + "\n", False),
    "extra empty field": ("\n".join([HEADER, GOOD[0] + ","]) + "\n", False),
    "quoted newline": ("\n".join([HEADER, row("a\nb")]) + "\n", False),
    "CRLF": ("\r\n".join([HEADER, *GOOD]) + "\r\n", False),
    "bare CR in a name": ("\n".join([HEADER, row("a\rb")]) + "\n", False),
    "escaped quote": ("\n".join([HEADER, row('a""b')]) + "\n", False),
    "quote inside an unquoted field": ("\n".join([HEADER, GOOD[0].replace(",1,1,", ',1",1,')]) + "\n", False),
    "text after a closing quote": ("\n".join([HEADER, row('a"b')]) + "\n", False),
    "float timestamp": ("\n".join([HEADER, row("a", "1.5", 9)]) + "\n", False),
    "exponent timestamp": ("\n".join([HEADER, row("a", "1e3", "2e3")]) + "\n", False),
    "negative start": ("\n".join([HEADER, row("a", -5, 9)]) + "\n", False),
    "plus sign": ("\n".join([HEADER, row("a", "+5", 9)]) + "\n", False),
    "blank around a number": ("\n".join([HEADER, row("a", " 5", 9)]) + "\n", False),
    "end before start": ("\n".join([HEADER, row("a", 9, 5)]) + "\n", False),
    "2^63": ("\n".join([HEADER, row("a", 0, 2**63)]) + "\n", False),
    "2^64 - 1": ("\n".join([HEADER, row("a", 2**64 - 2, 2**64 - 1)]) + "\n", False),
    "2^64": ("\n".join([HEADER, row("a", 0, 2**64)]) + "\n", False),
    "20 digits": ("\n".join([HEADER, row("a", 0, "00000000000000000009")]) + "\n", False),
    "quoted timestamp": ("\n".join([HEADER, GOOD[0].replace(",1,5,", ',"1",5,')]) + "\n", False),
    "empty timestamp": ("\n".join([HEADER, row("a", "", 5)]) + "\n", False),
    "empty name": ("\n".join([HEADER, row("")]) + "\n", False),
    "unquoted empty name": ("\n".join([HEADER, row("x").replace(',"x",', ",,")]) + "\n", False),
    "NUL in a name": ("\n".join([HEADER, row("a\0b")]) + "\n", False),
    "NUL in another column": ("\n".join([HEADER, GOOD[0].replace("KERNEL", "KER\0NEL")]) + "\n", False),
    "unit separator": ("\n".join([HEADER, row("a\x1fb")]) + "\n", False),
    "non-UTF-8 name": ("\n".join([HEADER, row("a\udcffb")]) + "\n", False),
    "overlong UTF-8 name": ("\n".join([HEADER, row("a\udcc0\udcafb")]) + "\n", False),
    "UTF-16 surrogate in UTF-8": ("\n".join([HEADER, row("a\udced\udca0\udc80")]) + "\n", False),
    "blank line inside": ("\n".join([HEADER, GOOD[0], "", GOOD[1]]) + "\n", True),
    "blank lines at the end": ("\n".join([HEADER, *GOOD]) + "\n\n\n", True),
    "blank header line": ("\n".join(["", HEADER, *GOOD]) + "\n", False),
    "blank lines only": (HEADER + "\n\n\n", False),
    "byte order mark": ("\ufeff" + "\n".join([HEADER, *GOOD]) + "\n", False),
    "header only": (HEADER + "\n", False),
    "ragged header": (HEADER + ',"Extra"\n' + "\n".join(GOOD) + "\n", False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_and_edge_files(case, tmp_path, monkeypatch):
    text, native = CASES[case]
    path = tmp_path / "kernel_trace.csv"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    for tracks, device in ((False, "agent"), (True, "agent"), (False, "thread")):
        why_not = assert_same(path, monkeypatch, tracks, device)
        assert (why_not == "") == native, why_not
    assert assert_same_columns(path, monkeypatch) == why_not


def test_lines_across_read_chunks_and_many_names(tmp_path, monkeypatch):
    """A file larger than the reader's 8 MiB buffer (lines cut at every chunk boundary), 20,000 distinct names (the
    name table grows many times) and one 9 MiB name (a line longer than the buffer)."""
    rng = random.Random(33)
    lines = [HEADER]
    for i in range(60_000):
        start = rng.randrange(10**15)
        lines.append(row(f"kernel_{rng.randrange(20_000)}_" + "x" * rng.randrange(200), start,
                         start + rng.randrange(10**6), i))
    lines.insert(30_000, row("long_" + "y" * (9 << 20), 5, 6))
    path = tmp_path / "kernel_trace.csv"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size > 16 << 20
    assert assert_same(path, monkeypatch) == ""
    assert assert_same_columns(path, monkeypatch) == ""


def test_no_compiler_python_path(tmp_path, monkeypatch):
    """Without a built library the Python path reads the file, with the same table."""
    def unavailable(*_args, **_kwargs):
        raise api_recorder.Unavailable("no C compiler (test)")

    monkeypatch.setattr(csv_native, "_lib", None)
    monkeypatch.setattr(csv_native, "_failed", "")
    monkeypatch.setattr(api_recorder, "build", unavailable)
    table, why_not = table_of(PLAIN, True, monkeypatch)
    assert why_not == "no C compiler (test)"
    monkeypatch.undo()
    expected, native_why = table_of(PLAIN, True, monkeypatch)
    assert native_why == ""
    assert_frame_equal(table, expected)


def test_switch_forces_python_path(monkeypatch):
    for value, native in (("0", False), ("off", False), ("1", True), ("", True)):
        monkeypatch.setenv(csv_native.ENV_SWITCH, value)
        assert csv_readers.kernel_trace_table(PLAIN).height == 9
        assert (csv_native.why_not == "") == native


# bytes a mutation inserts: the structural and troublesome ones
NASTY = [b",", b'"', b'""', b"\n", b"\r", b"\r\n", b"\0", b"\t", b"\x1f", b"\xff", b"\xc3", b"\xc3\xa9", b"-", b".",
         b"e", b"9", b"99999999999999999999", b" ", b"\xef\xbb\xbf"]


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(NASTY), st.integers(0, 3)), max_size=4))
def test_mutated_files_read_alike(edits, tmp_path, monkeypatch):
    """Random insertions and deletions of troublesome bytes anywhere in a real rocprofv3 file: still one answer."""
    data = bytearray(PLAIN.read_bytes())
    for at, insert, delete in edits:
        at %= len(data) + 1
        data[at:at + delete] = insert
    # a fresh name per example: hypothesis reuses tmp_path, and a same-size rewrite within one mtime tick would
    # meet the line guard's per-file-version cache (csv_readers._VOUCHED), which a report never does
    path = tmp_path / f"mutated_{uuid.uuid4().hex}_kernel_trace.csv"
    path.write_bytes(bytes(data))
    for tracks, device in ((False, "agent"), (True, "agent")):
        assert_same(path, monkeypatch, tracks, device)
    assert_same_columns(path, monkeypatch)


def report_outputs(run: Path, out: Path, monkeypatch, native: bool) -> dict[str, object]:
    """`report RUN` in-process: its JSON (less the time it was generated), Markdown and Perfetto files."""
    from madengine_rocprof.cli import main

    monkeypatch.setenv(csv_native.ENV_SWITCH, "1" if native else "0")
    out.mkdir()
    assert main(["report", str(run), "--json", str(out / "r.json"), "--markdown", str(out / "r.md"),
                 "--perfetto", str(out / "perfetto"), "-q"]) == 0
    report = json.loads((out / "r.json").read_text())
    report.pop("generated_at")
    return {"json": report, "markdown": (out / "r.md").read_text(),
            **{p.name: p.read_text() for p in sorted((out / "perfetto").iterdir())}}


@pytest.mark.parametrize("run", ["rocprofv3/docs-data", "rocprofv3/docs-data-2024", "gpu_runs/ours_h100_2rank/vm"])
def test_reports_alike(run, tmp_path, monkeypatch):
    """Whole reports (statistics, busy time, tables, Perfetto tracks) with the native reader on and off."""
    source = FIXTURES / run
    if any(source.glob("*.gz")):
        copy = tmp_path / "run"
        copy.mkdir()
        for path in source.glob("*.gz"):
            unpacked(path, copy)
        source = copy
    native = report_outputs(source, tmp_path / "native", monkeypatch, True)
    assert csv_native.why_not == ""
    assert native == report_outputs(source, tmp_path / "python", monkeypatch, False)
