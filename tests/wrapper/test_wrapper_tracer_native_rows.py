"""The native converter of Kineto JSON traces (tracer/native/kineto_rows.c, tracer/native_rows.py; issues 25 item 5
and 26 item 5): the same bytes as the Python reader and writer for every option, on real traces, on traces in
torch.profiler's layout and on generated ones; the Python path wherever it is not sure; whole lines on a full disk."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.tracer import api_recorder, convert, native_rows

from . import kineto_files as kf
from .wrapper_testlib import REPO

pytestmark = pytest.mark.skipif(native_rows.library() is None, reason=f"no native converter: {native_rows.why_not}")
REAL_TRACES = sorted((REPO / "tests" / "fixtures" / "kineto").glob("*/*.json.gz"))
OPTIONS = [dict(cpu=False, api=True, memcpy=True, stats=True), dict(cpu=True, stats=True),
           dict(cpu=False, truncate=True, max_rows=7, api=True, memcpy=True, stats=False),
           dict(cpu=True, truncate=True, max_rows=3), dict(cpu=False, max_rows=0, api=True)]


def convert_with(path: Path, out: Path, native: bool, **options):
    """(files written -> bytes, kernel events) or the exception (type, text); and why the native path was not used."""
    os.environ[native_rows.ENV_SWITCH] = "1" if native else "0"
    out.mkdir(parents=True, exist_ok=True)
    try:
        written, count = convert.write_trace_file(str(path), str(out), "7_", **options)
        result: object = ({Path(p).name: Path(p).read_bytes() for p in written}, count)
    except Exception as exc:  # noqa: BLE001 - both paths must fail alike
        result = (type(exc), str(exc))
    finally:
        os.environ.pop(native_rows.ENV_SWITCH, None)
    left = sorted(p.name for p in out.iterdir())
    return result, left, native_rows.why_not


def assert_same(path: Path, tmp: Path, *, native_expected: bool | None = True, **options) -> Any:
    """Both paths on `path`: the same files (bytes), the same count or the same error; returns the result."""
    native, native_left, why = convert_with(path, tmp / "native", True, **options)
    python, python_left, _ = convert_with(path, tmp / "python", False, **options)
    assert native == python, (path, options, why)
    assert native_left == python_left  # no other file (no temporary one) on either path
    if native_expected is not None:
        assert (why == "") is native_expected, why
    return native


# ---------------------------------------------------------------- real traces
@pytest.mark.skipif(not REAL_TRACES, reason="no recorded Kineto traces in tests/fixtures/kineto")
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_every_recorded_trace_gives_the_python_paths_bytes(tmp_path, options):
    """tests/fixtures/kineto (PROVENANCE.md): torch.profiler traces from H100, H200, MI300, MI250, MI210, a CPU-only
    run, 2021-format ones; all in Kineto's layout, so the native converter takes every one."""
    rows = 0
    for i, trace in enumerate(REAL_TRACES):
        path = tmp_path / f"{i}.json"
        path.write_bytes(gzip.decompress(trace.read_bytes()))
        result = assert_same(path, tmp_path / str(i), **options)
        rows += result[1] if isinstance(result, tuple) and isinstance(result[1], int) else 0
    # kernel events in the traces: the recorded H200 runs alone hold 6,210 + 1,234 kernels and 34,670 CPU operators
    assert rows >= (40_000 if options["cpu"] else 10_000)


def test_a_real_torch_profiler_export(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        a = torch.randn(8, 8)
        for _ in range(30):
            torch.mm(a, a).add_(1)
    path = tmp_path / "real.json"
    prof.export_chrome_trace(str(path))
    files, count = assert_same(path, tmp_path, cpu=True, stats=True)
    assert count >= 60 and files["7_kernel_trace.csv"].count(b'"aten::mm"') == 30


# ---------------------------------------------------------------- torch.profiler's layout (kineto_files)
COPY = ('  {\n    "ph": "X", "cat": "gpu_memcpy", "name": %s, "pid": 0, "tid": 7,\n    "ts": %s, "dur": %s,\n'
        '    "args": {\n      "device": %d, "stream": %d, "correlation": %d, "bytes": 4\n    }\n  },\n')


def _copy(start_ns: int, dur: str, name: str, device: int, stream: int, corr: int) -> str:
    return COPY % (json.dumps(name), kf.us(start_ns), dur, device, stream, corr)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_traces_in_torch_profilers_layout(tmp_path, options):
    events = [kf.span(0)]
    for i in range(1, 60):
        events.append(kf.cpu_op(['aten::mm', 'x "y", z', "\u00e9\u4e2d\U0001f600", "a\\b", "void f<int>(int)"][i % 5],
                                1 + i % 3, 5000 * (60 - i), 10 * i, i, external_first=bool(i % 2)))
    for i in range(1, 40):
        events.append(kf.runtime_call("cudaLaunchKernel", 100 + i % 2, 1000 * i, 400, i))
        events.append(kf.kernel(f'void k<{i % 4}>(float*, "q", a\\b)', 1000 * (40 - i) + 77, 90 + i, i,
                                stream=7 + i % 2, grid=(i, 2, 1), block=(128, 1, 1)))
    events += [_copy(5000, "0.250", "Memcpy HtoD (Pageable -> Device)", 0, 7, 3),
               _copy(4000, "1.000", "Memcpy DtoH (Device -> Pinned)", 1, 9, 4), _copy(4000, "2.000", "Memcpy", 1, 9, 5)]
    path = tmp_path / "t.json"
    kf.write(path, 1_790_857_026_123_456_789, events, end_ns=10**6)
    files, count = assert_same(path, tmp_path, **options)
    assert count == (59 if options["cpu"] else 39)
    if options.get("memcpy"):
        assert b'"MEMORY_COPY_HOST_TO_DEVICE",7,"CPU","Agent 0"' in files["7_memory_copy_trace.csv"]


# ---------------------------------------------------------------- generated traces
RAW_NAMES = st.one_of(
    st.text(max_size=12).map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.text(max_size=12).map(json.dumps),  # \uXXXX escapes, surrogate pairs included
    st.sampled_from(['"a\\u0062"', '"\\ud800"', '"\\udc00x"', '"tab\\there"', '"x\\/y"', '"bad\\q"', '"nul\x00"',
                     '"ctl\x01"', '"INVALID"', '"q\\"ph\\": 1"', '"(anonymous namespace)::f<int>(int)"',
                     '"void ns::k<(anonymous namespace)::T>(int)"', '"Memcpy DtoD (Device -> Device)"']))
TIME = st.one_of(st.integers(0, 10**7).map(lambda ns: kf.us(ns)), st.integers(0, 10**7).map(lambda ns: kf.us(ns)),
                 st.integers(0, 10**5).map(str),
                 st.tuples(st.integers(0, 9999), st.text("0123456789", min_size=4, max_size=9)).map(
                     lambda p: f"{p[0]}.{p[1]}"),
                 st.integers(0, 2**63 // 1000).map(str), st.sampled_from(["9223372036854775.807", "0.0005", "1.0015",
                                                                          "0.0025", "18446744073709551.615"]))
CATEGORY = st.sampled_from(["cpu_op", "cpu_op", "cpu_op", "kernel", "kernel", "kernel", "cuda_runtime", "cuda_driver",
                            "hip_runtime", "gpu_memcpy",
                            "user_annotation"])
INT = st.one_of(st.integers(-5, 50), st.integers(-2**63, 2**63 - 1))
ARGS = st.one_of(
    st.none(),
    st.fixed_dictionaries({}, optional={"External id": st.integers(0, 99), "correlation": st.integers(0, 9),
                                        "device": st.integers(0, 3), "stream": INT, "registers per thread": INT,
                                        "shared memory": st.integers(0, 10**6),
                                        "grid": st.lists(st.integers(-3, 1 << 20), min_size=3, max_size=3),
                                        "block": st.lists(st.integers(-3, 1024), min_size=3, max_size=3),
                                        "Input Dims": st.just([[8, 128], []]), "note": st.text(max_size=5)}))


@st.composite
def events(draw) -> str:
    cat = draw(CATEGORY)
    args = draw(ARGS)
    text = (f'  {{\n    "ph": "X", "cat": "{cat}", "name": {draw(RAW_NAMES)}, "pid": {draw(INT)},'
            f' "tid": {draw(st.integers(0, 3))},\n    "ts": {draw(TIME)}, "dur": {draw(TIME)}')
    if args is not None:
        keys = list(args)
        if draw(st.booleans()):
            keys.reverse()
        pairs = ", ".join(f"{json.dumps(k)}: {json.dumps(args[k])}" for k in keys)
        text += ',\n    "args": {\n      ' + pairs + "\n    }"
    return text + "\n  },\n"


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=st.lists(events(), min_size=2, max_size=12),
       base=st.one_of(st.integers(0, 2**41), st.integers(0, 2**41), st.integers(0, 2**62), st.just(2**63 - 10**10)),
       options=st.sampled_from(OPTIONS))
def test_generated_traces_give_the_python_paths_bytes(tmp_path_factory, body, base, options):
    """Odd names (quotes, commas, backslashes, escapes, lone surrogates, NUL, invalid UTF-8), more than three decimals,
    times near 2**63 ns, args missing or in another order, values out of range: the same files or the same error."""
    folder = tmp_path_factory.mktemp("gen")
    path = folder / "t.json"
    path.write_bytes(kf.document(base, body).encode().replace(b"INVALID", b"\xff\xfe"))  # not UTF-8
    assert_same(path, folder, native_expected=None, **options)


def test_more_than_three_decimals_round_half_to_even_and_times_near_two_to_the_63(tmp_path):
    body = [kf.CPU_OP % ('"a"', 1, 1, "0.0005", "0.0015", 1, 0),
            kf.CPU_OP % ('"b"', 1, 1, "0.00050001", "2.0025", 2, 0),
            kf.CPU_OP % ('"c"', 1, 1, "9223372036854775.000", "0.807", 3, 0)]
    path = tmp_path / "t.json"
    path.write_text(kf.document(0, body))
    files, _count = assert_same(path, tmp_path, cpu=True)
    lines = files["7_kernel_trace.csv"].decode().splitlines()
    assert [line.split(",")[9:11] for line in lines[1:]] == [["0", "2"], ["1", "2003"],
                                                             [str(2**63 - 808), str(2**63 - 1)]]
    path.write_text(kf.document(1, body))  # one nanosecond more: beyond int64, so the Python path's exact integers
    files, _count = assert_same(path, tmp_path / "over", native_expected=False, cpu=True)
    assert str(2**63) in files["7_kernel_trace.csv"].decode()


# ---------------------------------------------------------------- the Python path where the layout is another
@pytest.mark.parametrize("text", [
    '{"traceEvents": [{"name": "a", "ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}',  # key order
    '{"traceEvents": [{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}',  # no spaces
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": "1", "tid": 1, "ts": 1, "dur": 2}]}',
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1e3, "dur": 2}]}',
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2,'
    ' "args": {"External id": 1.5}}]}',
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2,'
    ' "args": {"k": {"nested": 1}}}]}',
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "ph", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}',
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2,'
    ' "args": {"External id": 1, "External id": 2}}]}',
    '[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]',  # no traceEvents key
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2',  # cut
    "",  # empty
])
def test_what_the_native_reader_is_not_sure_of_goes_to_the_python_path(tmp_path, text):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert_same(path, tmp_path, native_expected=False, cpu=True, stats=True)


def test_the_switch_and_a_missing_compiler_select_the_python_path(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    kf.write(path, 0, [kf.cpu_op("a", 1, 10, 5, 1)])
    monkeypatch.setenv(native_rows.ENV_SWITCH, "0")
    assert native_rows.library() is None and native_rows.why_not == f"{native_rows.ENV_SWITCH}=0"
    monkeypatch.delenv(native_rows.ENV_SWITCH)
    monkeypatch.setattr(native_rows, "_lib", None)
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(tmp_path / "cache"))  # no build there yet
    monkeypatch.setattr(api_recorder.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("CC", raising=False)
    written, count = convert.write_trace_file(str(path), str(tmp_path), "1_", cpu=True)
    assert count == 1 and "no C compiler" in native_rows.why_not
    assert [Path(w).name for w in written] == ["1_kernel_trace.csv", "1_kernel_stats.csv", "1_phase_markers.csv"]


def test_doctor_says_which_writer_would_write(tmp_path):
    from madengine_rocprof.cli import doctor

    env = {"PATH": os.environ["PATH"]}
    assert doctor.tracer_probes(env)[2].startswith("Trace CSV writer: native converter")
    assert doctor.tracer_probes({**env, native_rows.ENV_SWITCH: "0"})[2].startswith("Trace CSV writer: Python (")
    assert "no C compiler" in doctor.tracer_probes({"PATH": str(tmp_path)})[2]


def test_the_tracer_summary_says_which_writer_wrote(tmp_path):
    """The torch.profiler backend through the product path: its summary names the native writer."""
    pytest.importorskip("torch")
    app = tmp_path / "app.py"
    app.write_text("import torch\nx = torch.ones(4)\nfor _ in range(20):\n    x = x + 1\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "madengine_rocprof", "wrap", "--profiler", "embedded",
                           "--kernel-trace", "--stats", "-d", str(tmp_path / "out"), "--", sys.executable, str(app)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    summary = json.loads(next((tmp_path / "out").rglob("*_tracer_summary.json")).read_text())
    assert summary["csv_writer"] == "native (C)" and summary["kernel_rows"] >= 20


# ---------------------------------------------------------------- whole lines when the disk takes no more
FSIZE_APP = r"""
import resource, signal, sys
sys.path.insert(0, sys.argv[1])
from madengine_rocprof.tracer import convert, native_rows
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit: EFBIG instead of a signal
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[4]), int(sys.argv[4])))
try:
    convert.write_trace_file(sys.argv[2], sys.argv[3], "1_", cpu=True, stats=True)
except OSError as exc:
    print(type(exc).__name__, exc.errno, native_rows.why_not or "native", "|", exc)
"""


@pytest.mark.parametrize("limit", [100, 300_000])
def test_a_full_file_system_keeps_every_whole_row_and_raises_as_the_python_path(tmp_path, limit):
    """EFBIG (a file size limit) stands for ENOSPC: the same cut-back code. 100 bytes: not even the header, so no
    file (as LineWriter); otherwise the file ends after its last whole row, and the rows are the first ones."""
    path = tmp_path / "t.json"
    kf.write(path, 0, [kf.cpu_op(f'op "{i % 13}", with a comma', 7, 1000 * i, 500, i) for i in range(1, 20_001)])
    outs = {}
    messages = set()
    for native in (True, False):
        out = tmp_path / f"out_{native}"
        out.mkdir()
        env = {**os.environ, native_rows.ENV_SWITCH: "1" if native else "0"}
        done = subprocess.run([sys.executable, "-c", FSIZE_APP, str(REPO), str(path), str(out), str(limit)],
                              capture_output=True, text=True, timeout=120, env=env)
        assert done.stdout.split()[:2] == ["OSError", "27"], done.stdout + done.stderr  # EFBIG
        assert done.stdout.split()[2] == ("native" if native else f"{native_rows.ENV_SWITCH}=0")
        messages.add(done.stdout.split("|", 1)[1].strip())
        outs[native] = {p.name: p.read_bytes() for p in out.iterdir()}
    assert messages == {"[Errno 27] File too large"}  # the same error text on both paths
    by_c, by_python = outs[True], outs[False]
    if limit == 100:
        assert by_c == {} and by_python == {}
        return
    text = by_c["1_kernel_trace.csv"]
    assert list(by_c) == ["1_kernel_trace.csv"] and text.endswith(b"\n") and len(text) <= limit
    full = tmp_path / "full"
    full.mkdir()
    convert.write_trace_file(str(path), str(full), "1_", cpu=True)
    assert (full / "1_kernel_trace.csv").read_bytes().startswith(text)  # the first rows, whole, none missing
    assert by_python["1_kernel_trace.csv"].startswith(text[:len(text) // 2])  # the Python path's blocks: other cut


def test_an_unwritable_folder_raises_as_the_python_path(tmp_path):
    path = tmp_path / "t.json"
    kf.write(path, 0, [kf.cpu_op("a", 1, 10, 5, 1)])
    for native in (True, False):
        os.environ[native_rows.ENV_SWITCH] = "1" if native else "0"
        try:
            with pytest.raises(FileNotFoundError) as err:
                convert.write_trace_file(str(path), str(tmp_path / "missing"), "1_", cpu=True)
        finally:
            del os.environ[native_rows.ENV_SWITCH]
        assert err.value.filename == str(tmp_path / "missing" / "1_kernel_trace.csv")


KILL_APP = r"""
import sys
sys.path.insert(0, sys.argv[1])
from madengine_rocprof.tracer import convert, native_rows
native_rows.library()
print("ready", flush=True)
sys.stdin.readline()
convert.write_trace_file(sys.argv[2], sys.argv[3], "1_", cpu=True)
print("done", flush=True)
"""


def test_a_kill_while_the_native_writer_runs_keeps_the_first_rows(tmp_path):
    """SIGKILL part way: kernel_trace.csv holds the first rows of the full file, cut at a row's end, or at a page
    inside a write(2) of a block (the kernel's limit, as for LineWriter: tracer/line_writer.py)."""
    import signal
    import time

    path = tmp_path / "t.json"
    kf.write(path, 0, [kf.cpu_op(f"aten::op_{i % 50}", 7, 1000 * i, 500, i) for i in range(1, 300_001)])
    full = tmp_path / "full"
    full.mkdir()
    convert.write_trace_file(str(path), str(full), "1_", cpu=True)
    expected = (full / "1_kernel_trace.csv").read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    target = out / "1_kernel_trace.csv"
    proc = subprocess.Popen([sys.executable, "-c", KILL_APP, str(REPO), str(path), str(out)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (target.exists() and target.stat().st_size > 0):
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    text = target.read_bytes()
    assert len(text) > 0 and expected.startswith(text)
    assert text.endswith(b"\n") or len(text) % 4096 == 0
    if len(text) < len(expected):
        assert proc.returncode == -signal.SIGKILL


def test_the_cupti_backends_chrome_trace_is_read_natively_with_the_dicts_rows(tmp_path):
    """A Kineto-layout JSON written by another backend (convert.write_chrome_trace of cupti_records.chrome_trace):
    the native converter takes it and writes what the rows made from the dict give."""
    from madengine_rocprof.tracer import cupti_records as cr

    start = 1_790_857_026_000_000_000
    records: list[tuple] = []
    for i in range(1, 301):
        start += 1000 + 37 * i
        records.append((cr.KERNEL, {"start": start, "end": start + 900 + i, "correlation_id": i, "name": i % 7,
                                    "device_id": 0, "context_id": 1, "stream_id": 7 + i % 2, "grid_x": i,
                                    "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1,
                                    "registers_per_thread": 32, "static_shared_memory": 0,
                                    "dynamic_shared_memory": 16, "graph_id": 0}))
    trace = cr.chrome_trace(records, kernel_name=lambda p: f'void k_{p}<"q">(float*)', api_name_of=lambda k, c: "x",
                            pid=1)
    path = tmp_path / "c.json"
    convert.write_chrome_trace(trace, str(path))
    (tmp_path / "native").mkdir()
    (tmp_path / "dict").mkdir()
    native, count = convert.write_trace_file(str(path), str(tmp_path / "native"), "1_", cpu=False, stats=True)
    assert native_rows.why_not == "" and count == 300
    from_dict = convert.write_files(convert.from_dict(trace), str(tmp_path / "dict"), "1_", cpu=False, stats=True)
    assert [Path(p).read_bytes() for p in native] == [Path(p).read_bytes() for p in from_dict]


@pytest.mark.parametrize("value,expected", [("0", False), ("off", False), ("false", False), ("1", True),
                                            ("on", True), ("", True), ("maybe", True)])
def test_the_switch_is_read_by_the_tracer_settings_rules(value, expected):
    """The words the wrapper accepts turn the native converter off; a value it refuses keeps the default (on)."""
    assert native_rows.enabled({native_rows.ENV_SWITCH: value}) is expected
