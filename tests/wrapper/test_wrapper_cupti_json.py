"""The CUPTI backend's Chrome trace written by C (tracer/cupti_json.py, native/cupti_json.c), on CPU with the fake
CUPTI (fakes/fake_cupti.py; its cuptiActivityGetNextRecord is a C-callable function, as libcupti's).

The reference is the Python path (cupti_records.chrome_trace: the dict the backend made before, and still makes
without a C compiler): on synthetic buffers of every record kind the backend reads, kinds it skips, odd names,
zero-length buffers and interposer windows, the rocprofv3 CSVs made from the C writer's file equal, byte for
byte, those made from the dict, the file parses with json and holds the same events (times exact), and the counts
for the summary are the same. The file is read by convert's fast reader (Kineto's layout), never the fallback.
"""
from __future__ import annotations

import ctypes
import decimal
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from madengine_rocprof.tracer import api_recorder, convert, cupti_backend, cupti_json, demangle
from madengine_rocprof.tracer import cupti_records as cr

from .fakes import fake_cupti
from .test_wrapper_cupti import GEMM, kernel, launch

pytestmark = pytest.mark.skipif(api_recorder.compiler() is None, reason="needs a C compiler (scripts/setup.sh)")
BASE = 1_790_857_026_123_456_789  # CUPTI's clock: ns since the epoch, far above 2**53
DRIVER_DOMAIN, INTERPOSED = api_recorder.DOMAINS["driver"], 3
ODD_NAMES = [b'void f<"quoted">(char const*)', b"back\\slash", b"tab\there\nnewline\x01\x1f", b"\xff\xfe bad utf-8",
             "ключ 核".encode(), b"{lambda(int)#1}::operator()", b"", b'"ph": "X"', GEMM.encode()]
_KEEP: list = []  # C strings the fake library owns while a test runs


def c_name(text: bytes) -> int:
    buf = ctypes.create_string_buffer(text)
    _KEEP.append(buf)
    return ctypes.addressof(buf)


class StubRecorder:
    """What the backend reads of api_recorder.Interposer at write time: windows, function names, lost records."""

    lost = 0
    records = api_recorder.Interposer.records
    NAMES = {1: "cudaLaunchKernel", 2: "cudaGetDevice", 3: 'cuda"Odd\\', 4: ""}

    def __init__(self, windows: list) -> None:
        self.windows = windows

    def function(self, index: int) -> str:
        return self.NAMES.get(index, f"cuda_function_{index}")


def window(records: list[tuple], first: tuple[int, int], last: tuple[int, int]) -> api_recorder.Window:
    return api_recorder.Window(b"".join(api_recorder.RECORD.pack(*r) for r in records), first, last)


def other_kind(kind: int) -> bytes:
    raw = bytearray(fake_cupti.OTHER_KINDS[kind])
    raw[:4] = kind.to_bytes(4, "little")
    return bytes(raw)


def synthetic(seed: int = 7, n: int = 400) -> tuple[list[bytes], list]:
    """Activity buffers (every kind read, two skipped kinds, odd names, ties, negative durations, an empty buffer)
    and two interposer windows (runtime and driver records, calls without GPU work, half-nanosecond ticks)."""
    rng = random.Random(seed)
    names = [c_name(t) for t in ODD_NAMES] + [0]  # 0: a kernel without a name
    records: list[bytes] = []
    t = BASE
    for i in range(1, n + 1):
        t += rng.choice([0, 1, 7, 999, 1000, 123_457])  # 0: the same start as the record before
        choice = rng.random()
        if choice < 0.3:
            rec = kernel(i, t, name=rng.choice(names), grid_x=rng.randint(-3, 70000), registers_per_thread=65535,
                         static_shared_memory=rng.randint(-5, 1 << 30), dynamic_shared_memory=2**31 - 1,
                         graph_id=2**32 - 1, device_id=rng.randint(0, 7), stream_id=rng.randint(0, 2**32 - 1))
            rec["end"] = t + rng.choice([-5, 0, 1, 999, 1001, 10**9])  # an end before the start: duration 0
            records.append(fake_cupti._pack(10, rec))
        elif choice < 0.4:
            records.append(fake_cupti._pack(1, dict(copy_kind=rng.randint(0, 12), src_kind=rng.randint(0, 9),
                                                     dst_kind=rng.randint(0, 9), bytes=rng.randint(0, 2**64 - 1),
                                                     start=t, end=t + 250, device_id=0, stream_id=7,
                                                     correlation_id=i)))
        elif choice < 0.5:
            records.append(fake_cupti._pack(2, dict(memory_kind=rng.randint(0, 9), bytes=64, value=2**32 - 1,
                                                     start=t, end=t + 10, device_id=1, stream_id=3,
                                                     correlation_id=i)))
        elif choice < 0.7:
            call = launch(i, t, cbid=rng.choice([211, 41, 17, 9999]), tid=rng.randint(1, 2**32 - 1))
            records.append(fake_cupti._pack(5, call | {"process_id": rng.choice([0, 99])}))
        elif choice < 0.8:
            records.append(fake_cupti._pack(4, launch(i, t, cbid=rng.choice([307, 279, 5]))))
        else:
            records.append(other_kind(rng.choice(list(fake_cupti.OTHER_KINDS))))
    buffers, pos = [], 0
    while pos < len(records):
        step = rng.randint(1, 40)
        buffers.append(b"".join(records[pos:pos + step]))
        pos += step
    buffers.insert(2, b"")
    tick0 = 5_000_000

    def calls(count: int) -> list[tuple]:
        out, tick = [], tick0
        for i in range(count):
            tick += rng.randint(1, 3001)
            driver = rng.random() < 0.2
            out.append((tick, tick + rng.randint(0, 5000), rng.choice([0, 0, i + 1]),
                        rng.choice([307, 279]) if driver else rng.randint(1, 5), rng.choice([11, 12]),
                        DRIVER_DOMAIN if driver else INTERPOSED))
        return out

    windows = [window(calls(150), (tick0, BASE - 4000), (tick0 + 2_000_000, BASE - 4000 + 1_000_000)),  # rate 1/2
               window([], (tick0, BASE), (tick0 + 10, BASE + 3)),
               window(calls(150), (tick0, BASE + 10**9), (tick0 + 3_000_001, BASE + 10**9 + 1_234_567))]
    return buffers, windows


def make_backend(buffers, windows, *, native: bool, c_walk: bool = False):
    """A backend holding these records; c_walk: its libcupti walks buffers in C (else the fake's Python thunk)."""
    fake_cupti.reset()
    lib = fake_cupti.FakeLib()
    if c_walk:
        lib.cuptiActivityGetNextRecord = fake_cupti.c_next_record()
    b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=lib, api_recorder_choice="activity")
    b.raw = list(buffers)
    b.recorder = StubRecorder(windows)  # type: ignore[assignment]
    if native:
        b._choose_writer()
        assert b.trace_writer == "native (C)", b.trace_writer
    else:
        b.trace_writer = "Python"
    return b


def exact(trace: dict) -> set[str]:
    """The events with times as exact integer nanoseconds, each as canonical JSON text."""
    out = set()
    for e in trace["traceEvents"]:
        e = dict(e, ts=convert.us_to_ns(e["ts"]), dur=convert.us_to_ns(e["dur"]))
        out.add(json.dumps(e, sort_keys=True, default=int))
    return out


def csv_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def fast_reader_only(monkeypatch):
    """Fails a test whose file the fast reader turns down (another layout than Kineto's)."""
    def refuse(path, cpu):
        raise AssertionError(f"{path} is not in Kineto's layout: the fast reader fell back to json")
    monkeypatch.setattr(convert, "_read_generic", refuse)


@pytest.mark.parametrize("seed,demangle_names,c_walk", [(7, False, False), (8, True, False), (9, True, True)])
def test_c_writer_gives_the_same_files_as_the_python_path(tmp_path, fast_reader_only, seed, demangle_names, c_walk):
    buffers, windows = synthetic(seed, n=2000 if c_walk else 400)
    old = make_backend(buffers, windows, native=False, c_walk=c_walk)
    trace, seen = old.kineto(cupti_backend.Names(fake_cupti, old.recorder, demangle_names))
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    options = dict(cpu=False, api=True, memcpy=True, stats=True)
    old_files = convert.write_files(convert.from_dict(trace), str(tmp_path / "old"), "p_", **options)

    new = make_backend(buffers, windows, native=True, c_walk=c_walk)
    path, counts = new.trace(str(tmp_path / "t.json"), demangle_names=demangle_names)
    new_files = convert.write_files(path, str(tmp_path / "new"), "p_", **options)

    assert [Path(p).name for p in new_files] == [Path(p).name for p in old_files] and len(old_files) == 5
    assert csv_files(tmp_path / "new") == csv_files(tmp_path / "old")
    with open(path, encoding="utf-8") as fh:
        written = json.load(fh, parse_float=decimal.Decimal)
    assert written["baseTimeNanoseconds"] == trace["baseTimeNanoseconds"]
    assert {k: v for k, v in written.items() if k != "traceEvents"} == {
        k: v for k, v in trace.items() if k != "traceEvents"}
    assert exact(written) == exact(trace) and len(written["traceEvents"]) == len(trace["traceEvents"])
    assert counts == old.counts(seen) | {"trace_writer": "native (C)"}
    assert counts["records"]["3"] > 0 and counts["records"]["6"] > 0  # skipped kinds are counted, by number
    if demangle_names and demangle.available():
        assert any(e["name"] == demangle.demangle(GEMM) for e in written["traceEvents"])
    names = {e["name"] for e in written["traceEvents"] if e["cat"] == "kernel"}
    odd = {"<unknown>", "\ufffd\ufffd bad utf-8", "tab\there\nnewline\x01\x1f", 'void f<"quoted">(char const*)'}
    assert odd <= names


def test_times_are_exact_microseconds_with_three_decimals(tmp_path):
    start = BASE + 2**53 + 1  # a float would lose the last nanosecond
    buffers = [fake_cupti._pack(10, kernel(1, BASE, name=c_name(b"k"))),
               fake_cupti._pack(10, kernel(2, start, name=c_name(b"k")) | {"end": start + 1_000_001})]
    b = make_backend(buffers, [], native=True)
    path, _counts = b.trace(str(tmp_path / "t.json"), demangle_names=False)
    text = Path(path).read_text()
    assert '"ts": 0.000, "dur": 0.500' in text
    assert f'"ts": {(2**53 + 1) // 1000}.{(2**53 + 1) % 1000:03d}, "dur": 1000.001' in text
    rows = convert.kernel_rows(convert.read_kineto(path, cpu=False))
    assert [(r[9], r[10]) for r in rows] == [(BASE, BASE + 500), (start, start + 1_000_001)]


def test_a_record_without_a_start_is_written_exactly(tmp_path):
    """CUPTI's start 0 (no timestamp): before the base, at -base exactly (the dict path's float was not exact)."""
    buffers = [fake_cupti._pack(10, kernel(1, BASE, name=c_name(b"k"))),
               fake_cupti._pack(10, kernel(2, 0, name=c_name(b"k")) | {"end": 0})]
    b = make_backend(buffers, [], native=True)
    path, _ = b.trace(str(tmp_path / "t.json"), demangle_names=False)
    starts = sorted(r[9] for r in convert.kernel_rows(convert.read_kineto(path, cpu=False)))
    assert starts == [0, BASE]


def test_interposer_calls_without_gpu_work_get_ids_above_32_bits_in_order(tmp_path):
    recs = [(100 * i, 100 * i + 50, 0 if i % 2 else 77, 2, 5, INTERPOSED) for i in range(1, 7)]
    windows = [window(recs[:3], (0, BASE), (1000, BASE + 1000)), window(recs[3:], (0, BASE), (1000, BASE + 1000))]
    b = make_backend([], windows, native=True)
    path, counts = b.trace(str(tmp_path / "t.json"), demangle_names=False)
    with open(path) as fh:
        events = json.load(fh)["traceEvents"]
    assert [e["args"]["correlation"] for e in events] == [2**32, 77, 2**32 + 1, 77, 2**32 + 2, 77]
    assert {e["name"] for e in events} == {"cudaGetDevice"} and counts["records"] == {"RUNTIME": 6}


def test_nothing_recorded_gives_a_valid_empty_trace_and_no_files(tmp_path):
    b = make_backend([b"", b""], [window([], (0, 1), (10, 11))], native=True)
    path, counts = b.trace(str(tmp_path / "t.json"), demangle_names=False)
    with open(path) as fh:
        trace = json.load(fh)
    assert trace["traceEvents"] == [] and trace["baseTimeNanoseconds"] == 0 and counts["records"] == {}
    assert convert.write_files(path, str(tmp_path), "p_", cpu=False, api=True) == []


def test_a_cupti_error_while_walking_a_buffer_writes_no_file(tmp_path, monkeypatch):
    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p))
    def broken(_base, _valid, _record):
        return 1  # CUPTI_ERROR_INVALID_PARAMETER

    b = make_backend([fake_cupti._pack(10, kernel(1, BASE, name=c_name(b"k")))], [], native=True)
    monkeypatch.setattr(b.lib, "cuptiActivityGetNextRecord", broken)
    with pytest.raises(RuntimeError, match="CUPTI status 1"):
        b.trace(str(tmp_path / "t.json"), demangle_names=False)
    assert list(tmp_path.iterdir()) == []


def test_a_record_past_its_buffer_is_an_error_not_a_read_beyond(tmp_path):
    cut = fake_cupti._pack(10, kernel(1, BASE, name=c_name(b"k")))[:100]  # kind says kernel: 216 bytes
    b = make_backend([cut], [], native=True)
    with pytest.raises(struct.error):  # the C writer refused it, then the Python path did
        b.trace(str(tmp_path / "t.json"), demangle_names=False)
    assert "a record of kind 10 ends past its buffer (0 + 160 > 100 bytes)" in b.trace_writer
    assert list(tmp_path.iterdir()) == []


def test_when_the_c_writer_fails_the_python_path_writes_and_the_summary_says_why(tmp_path, monkeypatch):
    b = make_backend([fake_cupti._pack(10, kernel(1, BASE, name=c_name(b"k")))], [], native=True)

    def fails(*_a, **_k):
        raise RuntimeError("the native trace writer refused the CUPTI record layouts")

    assert b.writer is not None
    monkeypatch.setattr(b.writer, "write", fails)
    path, counts = b.trace(str(tmp_path / "t.json"), demangle_names=False)
    assert counts["trace_writer"] == "Python (native trace writer failed: the native trace writer refused the CUPTI" \
                                     " record layouts)"
    assert [r[8] for r in convert.kernel_rows(convert.read_kineto(path, cpu=False))] == [1]


def test_a_write_error_part_way_leaves_no_file(tmp_path):
    """A file size limit (EFBIG, like a full disk) hit inside the C writer: an OSError, and neither the trace nor its
    temporary file stays."""
    code = f"""
import resource, signal, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from tests.wrapper import test_wrapper_cupti_json as t
buffers, windows = t.synthetic(3, n=3000)
b = t.make_backend(buffers, windows, native=True)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))
try:
    b.trace({str(tmp_path / "t.json")!r}, demangle_names=False)
except OSError as exc:
    print("OSError", exc)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OSError cannot write the trace: File too large"), done.stdout
    assert list(tmp_path.iterdir()) == []


def test_without_the_c_writer_the_python_path_writes_the_same_trace(tmp_path, monkeypatch):
    def unavailable(*_a, **_k):
        raise api_recorder.Unavailable("no C compiler (cc, gcc or clang) to build the native cupti_json")

    buffers, windows = synthetic(9, n=120)
    native = make_backend(buffers, windows, native=True)
    path_c, _ = native.trace(str(tmp_path / "c.json"), demangle_names=False)
    monkeypatch.setattr(cupti_json, "Writer", unavailable)
    fake_cupti.reset()
    b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), api_recorder_choice="activity")
    b._choose_writer()
    b.raw, b.recorder = list(buffers), StubRecorder(windows)  # type: ignore[assignment]
    path, counts = b.trace(str(tmp_path / "py.json"), demangle_names=False)
    assert counts["trace_writer"].startswith("Python (native trace writer unavailable: no C compiler")
    with open(path) as fh, open(path_c) as fc:
        assert exact(json.load(fh)) == exact(json.load(fc))


def test_spec_matches_the_fields_the_python_layouts_read():
    table = cupti_json.spec(cr.layouts(fake_cupti))
    assert table[:5] == [cr.KERNEL, len(cr.FIELDS[cr.KERNEL]), 16, 8, 0]  # start: u8 at 16
    grid_x = 2 + 3 * cr.FIELDS[cr.KERNEL].index("grid_x")
    assert table[grid_x:grid_x + 3] == [52, 4, 1]  # i4, signed


def test_a_name_longer_than_the_write_buffer_is_written_whole(tmp_path):
    long_name = b"k" * (3 << 19) + b'"\\'  # 1.5 MiB: more than the C writer's 1 MiB buffer holds
    buffers = [fake_cupti._pack(10, kernel(1, BASE, name=c_name(long_name))),
               fake_cupti._pack(10, kernel(2, BASE + 5, name=c_name(b"short")))]
    b = make_backend(buffers, [], native=True)
    path, _ = b.trace(str(tmp_path / "t.json"), demangle_names=False)
    with open(path) as fh:
        events = json.load(fh)["traceEvents"]
    assert [e["name"] for e in events] == [long_name.decode(), "short"]
