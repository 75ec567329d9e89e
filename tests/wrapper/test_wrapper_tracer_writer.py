"""The embedded tracer's write-out (issues 24 item 3, 25 item 5, 26 item 5): exact nanoseconds from Kineto's decimal
text, a fast reader that agrees with the JSON parser, files in whole lines that keep what was written when a
signal, a time-out or a full disk ends the write, no temporary file left, and any output folder name."""
from __future__ import annotations

import csv
import decimal
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.tracer import convert, runtime
from madengine_rocprof.tracer.line_writer import LineWriter

from . import kineto_files as kf
from .wrapper_testlib import REPO

ABSOLUTE_NS = 1_790_857_026_123_456_789  # an absolute-time start: 1.79e18 ns, far beyond 2**53


def read_csv(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------- exact times
def test_absolute_kineto_times_become_exact_nanoseconds(tmp_path):
    """Kineto's `ts` of an absolute-time trace (base 0) is 1790857026123456.789 us; through a float it came out
    tens of nanoseconds off."""
    path = tmp_path / "trace.json"
    kf.write(path, 0, [kf.cpu_op("aten::mm", 1, ABSOLUTE_NS, 70, 1),
                       kf.cpu_op("aten::add", 1, ABSOLUTE_NS + 1001, 3, 2)])
    expected = [(ABSOLUTE_NS, ABSOLUTE_NS + 70), (ABSOLUTE_NS + 1001, ABSOLUTE_NS + 1004)]
    rows = convert.kernel_rows(convert.load(str(path)), cpu=True)  # the JSON parser's dict
    assert [(r[9], r[10]) for r in rows] == expected
    rows = convert.kernel_rows(convert.read_kineto(str(path), cpu=True))  # the fast reader
    assert [(r[9], r[10]) for r in rows] == expected
    written = convert.write_files(str(path), str(tmp_path), "p_", cpu=True)
    trace = read_csv(written[0])
    assert trace[0]["Start_Timestamp"] == str(ABSOLUTE_NS) and trace[0]["End_Timestamp"] == str(ABSOLUTE_NS + 70)


@pytest.mark.parametrize("ts,dur,ns", [("123", "456", (123_000, 456_000)), ("1.5", "2.25", (1500, 2250)),
                                       ("7.000", "0.1234", (7000, 123)), ("12.3456", "0.0005", (12346, 0))])
def test_times_with_other_decimals_in_kineto_layout(tmp_path, ts, dur, ns):
    """Other writers' microseconds: integers (HTA's traces), fewer or more decimals; every event of the file alike,
    so the fast path's all-three-decimals shortcut must not take them."""
    event = kf.cpu_op("aten::mm", 1, 0, 0, 1).replace('"ts": 0.000', f'"ts": {ts}').replace('"dur": 0.000',
                                                                                             f'"dur": {dur}')
    path = tmp_path / "t.json"
    kf.write(path, 0, [event, event])
    fast = convert.read_kineto(str(path), cpu=True)
    assert (fast.op_start[0], fast.op_dur[0]) == ns
    assert _fields(fast) == _fields(convert.from_dict(convert.load(str(path)), cpu=True))


def test_relative_times_add_to_the_base_exactly():
    trace = {"baseTimeNanoseconds": ABSOLUTE_NS, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 4788306846961.098, "dur": 0.07, "args": {}}]}
    (row,) = convert.kernel_rows(trace)
    assert (row[9], row[10]) == (ABSOLUTE_NS + 4788306846961098, ABSOLUTE_NS + 4788306846961168)


@pytest.mark.parametrize("text,ns", [("1.5", 1500), ("0.0005", 0), ("0.0015", 2), ("2e3", 2_000_000), (7, 7000),
                                     ("1790857026123456.789", 1790857026123456789)])
def test_microseconds_to_nanoseconds(text, ns):
    assert convert.us_to_ns(text) == ns


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "1e999999999", "x", True])
def test_times_that_are_not_numbers_are_refused(bad):
    with pytest.raises(convert.BadTrace):
        convert.us_to_ns(bad)


# ---------------------------------------------------------------- fast reader == JSON parser
NAMES = st.one_of(st.sampled_from(["aten::mm", 'q"uote', "back\\slash", "{lambda(int)#1}", "ph", '"ph": "X"',
                                   "tab\there", "\u00e9t\u00e9 \u2603", "a,b", "void k<{1}>(int)"]),
                  st.text(min_size=0, max_size=12))
EVENTS = st.lists(st.tuples(NAMES, st.integers(0, 1 << 62), st.integers(0, 10**9), st.integers(1, 50), st.booleans()),
                  min_size=0, max_size=40)


def _fields(events: convert.Events) -> tuple:
    return (events.base, events.op_start, events.op_dur, events.op_tid, events.op_name, events.op_corr,
            events.op_extra, events.launcher, events.api)


def _compact(base: int, ops, gpu: bool) -> str:
    """The same events in another writer's layout: no spaces, keys in another order."""
    parts = []
    for i, (name, start, dur, tid, _first) in enumerate(ops, 1):
        if gpu:
            parts.append(f'{{"name":"cudaLaunchKernel","cat":"cuda_runtime","ph":"X","pid":4242,"tid":{tid},'
                         f'"ts":{kf.us(start)},"dur":0.005,"args":{{"correlation":{i}}}}}')
            parts.append(f'{{"name":{json.dumps(name)},"ph":"X","cat":"kernel","ts":{kf.us(start + 7)},'
                         f'"dur":{kf.us(dur)},"pid":0,"tid":{tid},"args":{{"device":0,"stream":{tid},'
                         f'"correlation":{i},"registers per thread":32,"shared memory":0,"grid":[{i},2,1],'
                         f'"block":[{tid},1,1]}}}}')
        else:
            parts.append(f'{{"name":{json.dumps(name)},"ph":"X","cat":"cpu_op","pid":4242,"tid":{tid},'
                         f'"ts":{kf.us(start)},"dur":{kf.us(dur)},"args":{{"External id":{i}}}}}')
    return f'{{"traceEvents":[{",".join(parts)}],"baseTimeNanoseconds":{base}}}'


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=EVENTS, base=st.integers(0, 1 << 62), gpu=st.booleans(), chunk=st.sampled_from([64, 700, 16 << 20]))
def test_the_fast_reader_agrees_with_the_json_parser(tmp_path_factory, monkeypatch, ops, base, gpu, chunk):
    monkeypatch.setattr(convert, "CHUNK", chunk)  # small chunks: cuts between and inside events are exercised
    folder = tmp_path_factory.mktemp("kineto")
    path = folder / "trace.json"
    if gpu:
        parts = []
        for i, (name, start, dur, tid, _first) in enumerate(ops, 1):
            parts.append(kf.runtime_call("cudaLaunchKernel", tid, start, 5, i))
            parts.append(kf.kernel(name, start + 7, dur, i, stream=tid, grid=(i, 2, 1), block=(tid, 1, 1)))
    else:
        parts = [kf.cpu_op(name, tid, start, dur, i, external_first=first)
                 for i, (name, start, dur, tid, first) in enumerate(ops, 1)]
    kf.write(path, base, [kf.span(0), *parts])
    expected = convert.from_dict(json.loads(path.read_text(encoding="utf-8"), parse_float=decimal.Decimal),
                                 cpu=not gpu)
    assert _fields(convert.read_kineto(str(path), cpu=not gpu)) == _fields(expected)
    assert len(expected) == len(ops)
    other = folder / "other.json"
    other.write_text(_compact(base, ops, gpu), encoding="utf-8")
    assert _fields(convert.read_kineto(str(other), cpu=not gpu))[:6] == _fields(expected)[:6]


REAL_TRACES = sorted((REPO / "tests" / "fixtures" / "kineto").glob("*/*.json.gz"))


@pytest.mark.skipif(not REAL_TRACES, reason="no recorded Kineto traces in tests/fixtures/kineto")
@pytest.mark.parametrize("cpu", [True, False])
def test_the_fast_reader_agrees_with_the_json_parser_on_traces_others_recorded(tmp_path, monkeypatch, cpu):
    """Kineto traces recorded by others (H100, MI300, MI210, MI250; see tests/fixtures/kineto/PROVENANCE.md): every one
    is read by the fast path, with the JSON parser's results."""
    import gzip

    monkeypatch.setattr(convert, "_read_generic", None)  # a fallback would raise here
    for trace in REAL_TRACES:
        raw = gzip.decompress(trace.read_bytes())
        path = tmp_path / "t.json"
        path.write_bytes(raw)
        expected = convert.from_dict(json.loads(raw, parse_float=decimal.Decimal), cpu=cpu)
        assert _fields(convert.read_kineto(str(path), cpu=cpu)) == _fields(expected), trace


def test_the_fast_reader_reads_a_real_torch_profiler_export(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        a = torch.randn(8, 8)
        for _ in range(50):
            torch.mm(a, a)
    path = tmp_path / "real.json"
    prof.export_chrome_trace(str(path))
    fast = convert.read_kineto(str(path), cpu=True)
    assert _fields(fast) == _fields(convert.from_dict(convert.load(str(path)), cpu=True))
    assert fast.op_name.count("aten::mm") == 50
    chunk = path.read_bytes()
    assert convert._fast_chunk(chunk[chunk.index(b'"traceEvents"'):], convert.Events(True))  # Kineto's layout


def test_rows_come_out_in_start_order_whatever_the_file_order(tmp_path):
    path = tmp_path / "t.json"
    kf.write(path, 10, [kf.cpu_op("b", 2, 5000, 10, 1), kf.cpu_op("a", 1, 1000, 10, 2), kf.cpu_op("c", 1, 5000, 1, 3)])
    rows = convert.kernel_rows(convert.read_kineto(str(path), cpu=True), cpu=True)
    assert [(r[5], r[6], r[7], r[9]) for r in rows] == [(1, 1, "a", 1010), (2, 2, "b", 5010), (3, 3, "c", 5010)]


# ---------------------------------------------------------------- whole lines, on a full disk
FSIZE_APP = r"""
import resource, signal, sys
sys.path.insert(0, sys.argv[1])
from madengine_rocprof.tracer.line_writer import LineWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit: EFBIG instead of a signal
resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))
with LineWriter(sys.argv[2]) as out:
    out.write("head\n")
    try:
        for i in range(1000):
            out.write("".join(f"{i},{j},row\n" for j in range(50)))
    except OSError as exc:
        print(exc.errno)
"""


def test_a_file_size_limit_cuts_back_to_the_last_whole_line(tmp_path):
    target = tmp_path / "t.csv"
    done = subprocess.run([sys.executable, "-c", FSIZE_APP, str(REPO), str(target)], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "27", done.stderr  # EFBIG
    text = target.read_text()
    assert text.endswith("row\n") and len(text) <= 10_000
    assert all(line.endswith(",row") for line in text.splitlines()[1:])  # whole lines only


def test_line_writer_takes_only_whole_lines(tmp_path):
    with LineWriter(str(tmp_path / "x")) as out, pytest.raises(ValueError):
        out.write("no newline")


# ---------------------------------------------------------------- output folders with quotes and backslashes
def test_kineto_gets_a_path_it_can_write_for_any_folder(tmp_path):
    odd = tmp_path / 'q"uote\\back'
    odd.mkdir()
    with runtime.kineto_path(str(odd / "1_perfetto_trace.json")) as target:
        assert not runtime._UNSAFE_IN_JSON.search(target)
        Path(target).write_text("{}")
    assert (odd / "1_perfetto_trace.json").read_text() == "{}"
    with runtime.kineto_path(str(tmp_path / "plain.json")) as target:
        assert target == str(tmp_path / "plain.json")


# ---------------------------------------------------------------- real processes, real signals (CPU torch)
LOOP_APP = """
import sys, time, torch
a = torch.ones(4)
for _ in range(int(sys.argv[2])):
    a = a + 1
open(sys.argv[1], "w").write("ready")
time.sleep(3600)
"""


def _traced(tmp_path: Path, out: Path, ops: int = 60_000, argv_prefix=()) -> subprocess.Popen:
    script = tmp_path / "loop.py"
    script.write_text(LOOP_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MADENGINE_ROCPROF")}
    env.update(PYTHONPATH=str(REPO / "madengine_rocprof" / "tracer" / "inject"),
               MADENGINE_ROCPROF_TRACER_HOME=str(REPO), MADENGINE_ROCPROF_TRACER_OUT=str(out),
               CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    return subprocess.Popen([*argv_prefix, sys.executable, str(script), str(tmp_path / "ready"), str(ops)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            # SIGINT at its default: a shell's background job (`cmd &`) starts it ignored, and then
                            # Python never installs its KeyboardInterrupt handler
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait(predicate, seconds: float = 120, step: float = 0.005) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(step)


def _host(out: Path) -> Path:
    return out / socket.gethostname()


def _check_complete(out: Path) -> int:
    """Every file whole, rows = the operators in the Chrome trace, stats over every row, no temporary file."""
    host = _host(out)
    names = sorted(p.name for p in host.iterdir())
    assert not [n for n in names if n.startswith(".") or n.endswith(".tmp")], names
    (trace,) = [host / n for n in names if n.endswith("_kernel_trace.csv")]
    (chrome,) = [host / n for n in names if n.endswith("_perfetto_trace.json")]
    (stats,) = [host / n for n in names if n.endswith("_kernel_stats.csv")]
    rows = read_csv(trace)
    ops = sum(1 for e in json.loads(chrome.read_text())["traceEvents"] if e.get("cat") == "cpu_op")
    assert len(rows) == ops > 0
    assert sum(int(r["Calls"]) for r in read_csv(stats)) == len(rows)
    return len(rows)


def _wait_until_writing(out: Path) -> None:
    """Returns once the tracer has begun writing (its first file appears)."""
    _wait(lambda: _host(out).is_dir() and any(_host(out).iterdir()))


@pytest.mark.slow
def test_a_second_ctrl_c_while_the_trace_is_written_loses_nothing(tmp_path):
    out = tmp_path / "out"
    proc = _traced(tmp_path, out)
    _wait(lambda: (tmp_path / "ready").exists())
    proc.send_signal(signal.SIGINT)  # KeyboardInterrupt: the app ends, the tracer writes at exit
    _wait_until_writing(out)
    proc.send_signal(signal.SIGINT)  # the impatient second Ctrl-C, during the write
    _out, err = proc.communicate(timeout=120)
    assert "Ctrl-C while the trace was written" in err, err
    assert _check_complete(out) >= 60_000


@pytest.mark.slow
def test_a_second_sigterm_while_the_trace_is_written_loses_nothing(tmp_path):
    out = tmp_path / "out"
    proc = _traced(tmp_path, out)
    _wait(lambda: (tmp_path / "ready").exists())
    proc.send_signal(signal.SIGTERM)
    _wait_until_writing(out)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM
    assert _check_complete(out) >= 60_000


@pytest.mark.slow
def test_a_time_out_keeps_the_trace(tmp_path):
    """The runner's reaper ends a step at its --timeout: SIGTERM, then SIGKILL after the grace."""
    out = tmp_path / "out"
    reaper = REPO / "madengine_rocprof" / "runner" / "reaper.py"
    proc = _traced(tmp_path, out, ops=20_000,
                   argv_prefix=(sys.executable, str(reaper), "--grace", "15", "--timeout", "25", "--"))
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 124, err  # ended by the time-out's SIGTERM within the grace (137: SIGKILL was needed)
    assert (tmp_path / "ready").exists()  # the time-out came while the app ran
    assert _check_complete(out) >= 20_000


@pytest.mark.slow
def test_an_output_folder_with_a_quote_and_a_backslash_gets_the_whole_trace(tmp_path):
    out = tmp_path / 'it\'s "q" \\ back\\slash'
    proc = _traced(tmp_path, out, ops=2_000)
    _wait(lambda: (tmp_path / "ready").exists())
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, err
    assert "could not write" not in err, err
    assert _check_complete(out) >= 2_000  # and the Chrome trace is valid JSON (_check_complete parses it)


def test_a_backend_may_hand_over_rows_without_a_chrome_trace(tmp_path, monkeypatch):
    """The writer's interface for a backend: trace() may return convert.Events (rows made straight from records)."""
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_OUT", str(tmp_path))
    events = convert.Events(cpu=False)
    events.op_start, events.op_dur, events.op_name = [5000, 1000], [10, 20], ["k2", "k1"]
    events.op_tid, events.op_corr = [0, 0], [2, 1]
    events.op_extra = [(0, 7, 32, 0, (64, 1, 1), (2, 1, 1)), (0, 7, 16, 0, (32, 1, 1), (1, 1, 1))]
    events.launcher = {1: 99}

    class Backend:
        name = "rows"

        def stop(self) -> None:
            pass

        def trace(self, _path, *, demangle_names):
            return events, {"backend": self.name, "dropped_records": 0}

    tracer = runtime._Tracer()
    tracer.prof = Backend()
    tracer.finish()
    host = tmp_path / socket.gethostname()
    pid = os.getpid()
    assert sorted(p.name for p in host.iterdir()) == [f"{pid}_kernel_stats.csv", f"{pid}_kernel_trace.csv",
                                                       f"{pid}_tracer_summary.json"]
    rows = read_csv(host / f"{pid}_kernel_trace.csv")
    assert [(r["Kernel_Name"], r["Dispatch_Id"], r["Thread_Id"], r["Start_Timestamp"]) for r in rows] == [
        ("k1", "1", "99", "1000"), ("k2", "2", "0", "5000")]
    assert json.loads((host / f"{pid}_tracer_summary.json").read_text())["kernel_rows"] == 2


def test_an_export_that_cannot_be_read_is_kept_and_the_error_said(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_OUT", str(tmp_path))

    class Exporter:  # like TorchBackend: writes its JSON to the path it is given and returns the path
        name = "torch"

        def stop(self) -> None:
            pass

        def trace(self, path, *, demangle_names):
            Path(path).write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1.0, "dur": ')  # cut short
            return path, {"backend": self.name, "dropped_records": None}

    tracer = runtime._Tracer()
    tracer.prof = Exporter()
    tracer.finish()
    assert "could not write the trace" in capsys.readouterr().err
    host = tmp_path / socket.gethostname()
    assert [p.name for p in host.iterdir()] == [f"{os.getpid()}_perfetto_trace.json"]  # what was recorded stays
