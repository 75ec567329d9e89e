"""The CUPTI backend's opt-in native API recorder (tracer/api_recorder.py + native/api_recorder.c), on CPU.

The C recorder is built with the machine's compiler and driven through the fake CUPTI's callback API
(fakes/fake_cupti.py), which calls it at each API call's entry and exit exactly as libcupti does. What the tests
check: every call comes back once with CUPTI's correlation id, callback id and OS thread; its times fall inside the
call; nothing is recorded between windows; threads and full chunks lose nothing; and every way the recorder can be
unavailable falls back to CUPTI's activity records and says why.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from madengine_rocprof.cli import doctor
from madengine_rocprof.tracer import api_recorder, convert, cupti_backend

from .fakes import fake_cupti
from .test_wrapper_cupti import _traced, kernel

pytestmark = pytest.mark.skipif(api_recorder.compiler() is None, reason="needs a C compiler (scripts/setup.sh)")
RUNTIME, DRIVER = fake_cupti.CallbackDomain.RUNTIME_API, fake_cupti.CallbackDomain.DRIVER_API
LAUNCH = 211  # cudaLaunchKernel in the fake's callback names


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    return api_recorder.build(folder=tmp_path_factory.mktemp("native"))


def backends(native: Path, choice: str):
    """Body of a `backend` fixture: make(**options) -> a CuptiBackend on the fake CUPTI with this native recorder
    and API recorder choice; afterwards an open window is closed (an interposer puts the GOT back) and every backend
    gives up its CUPTI subscription."""
    made = []

    def make(**options):
        fake_cupti.reset()
        options.setdefault("api_recorder_choice", choice)
        b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), native_recorder=str(native),
                                       **options)
        made.append(b)
        return b
    yield make
    for b in made:
        if b.recorder is not None and b.recorder.first is not None:  # a test failed inside a window
            b.stop()
        b.close()


@pytest.fixture
def backend(native):
    yield from backends(native, "callbacks")


def launch_kernel(corr: int) -> None:
    fake_cupti.record(10, **kernel(corr, time.monotonic_ns()))


def api_rows(trace: dict, cat: str = "cuda_runtime") -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("cat") == cat]


def test_calls_come_back_with_cuptis_ids_and_no_api_activity_records(backend):
    b = backend()
    b.start()
    assert b.api_mechanism.startswith("native CUPTI callbacks")
    assert fake_cupti.STATE.enabled == {10, 1, 2} and fake_cupti.STATE.domains == {int(RUNTIME)}
    spans = []
    for cbid in (LAUNCH, 17, LAUNCH):
        before = time.monotonic_ns()
        corr = fake_cupti.api_call(RUNTIME, cbid, launch_kernel if cbid == LAUNCH else None)
        spans.append((corr, cbid, before, time.monotonic_ns()))
    b.stop()
    assert fake_cupti.STATE.domains == set()
    trace, counts = b.trace(demangle_names=False)
    calls = api_rows(trace)
    assert [(e["args"]["correlation"], e["args"]["cbid"]) for e in calls] == [(c, cbid) for c, cbid, _b, _a in spans]
    assert [e["name"] for e in calls] == ["cudaLaunchKernel", "cudaGetDevice", "cudaLaunchKernel"]
    assert {e["tid"] for e in calls} == {threading.get_native_id()}
    base = trace["baseTimeNanoseconds"]
    for e, (_c, _cbid, before, after) in zip(calls, spans, strict=True):
        start, end = base + e["ts"] * 1000, base + (e["ts"] + e["dur"]) * 1000
        assert before - 20_000 <= start <= end <= after + 20_000  # inside the call, to the calibration's precision
    rows = convert.kernel_rows(trace)
    assert [r[8] for r in rows] == [spans[0][0], spans[2][0]]  # each kernel keeps its launch's correlation id
    assert counts["records"]["RUNTIME"] == 3 and counts["dropped_records"] == 0 and counts["api_records_lost"] == 0
    assert counts["activity_kinds"] == ["CONCURRENT_KERNEL", "MEMCPY", "MEMSET"]


def test_driver_domain_records_driver_calls(backend):
    b = backend(api_domain="driver")
    b.start()
    assert fake_cupti.STATE.domains == {int(DRIVER)}
    fake_cupti.api_call(RUNTIME, LAUNCH)  # not subscribed: the runtime domain is off
    corr = fake_cupti.api_call(DRIVER, 307, launch_kernel)
    b.stop()
    trace, _ = b.trace(demangle_names=False)
    assert api_rows(trace) == []
    assert [(e["name"], e["args"]["correlation"]) for e in api_rows(trace, "cuda_driver")] == [("cuLaunchKernel", corr)]


def test_nothing_is_recorded_between_windows_and_every_window_is_kept(backend):
    b = backend()
    kept = []
    for _window in range(3):
        b.start()
        kept.append(fake_cupti.api_call(RUNTIME, LAUNCH, launch_kernel))
        b.stop()
        fake_cupti.api_call(RUNTIME, 17)  # between windows: the domain is off
    trace, counts = b.trace(demangle_names=False)
    assert [e["args"]["correlation"] for e in api_rows(trace)] == kept
    assert counts["records"]["RUNTIME"] == 3


def test_threads_lose_nothing_and_keep_their_own_ids(backend):
    b = backend()
    b.start()
    ids: dict[int, list[int]] = {}

    def worker():
        mine = ids.setdefault(threading.get_native_id(), [])
        for _ in range(500):
            mine.append(fake_cupti.api_call(RUNTIME, 17))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    b.stop()
    trace, _ = b.trace(demangle_names=False)
    got: dict[int, list[int]] = {}
    for e in api_rows(trace):
        got.setdefault(e["tid"], []).append(e["args"]["correlation"])
    assert {tid: sorted(c) for tid, c in got.items()} == {tid: sorted(c) for tid, c in ids.items()}


def test_full_chunks_come_back_whole_and_are_freed(backend):
    b = backend()
    b.start()
    n = 65536 + 100  # one full chunk of one thread, and the start of its next
    first = fake_cupti.api_call(RUNTIME, 17)
    for _ in range(n - 1):
        fake_cupti.api_call(RUNTIME, 17)
    assert b.recorder is not None
    chunks = b.recorder.native.api_recorder_chunks()
    b.stop()
    assert b.recorder.native.api_recorder_chunks() < chunks  # the copied full chunk was freed
    assert b.recorder.native.api_recorder_pending() == 0
    trace, counts = b.trace(demangle_names=False)
    assert sorted(e["args"]["correlation"] for e in api_rows(trace)) == list(range(first, first + n))
    assert counts["api_records_lost"] == 0


def test_a_second_subscriber_falls_back_to_activity_records(backend, native):
    b = backend()
    fake_cupti.STATE.subscriber = object()  # e.g. the application's own profiler holds CUPTI's callbacks
    b.start()
    assert b.recorder is None and "another CUPTI subscriber is active" in b.api_mechanism
    assert fake_cupti.STATE.enabled == {10, 1, 2, 5}
    assert "callbacks, but cuptiSubscribe failed with CUPTI status 39" in b.warnings[0]
    fake_cupti.STATE.subscriber = None
    corr = fake_cupti.api_call(RUNTIME, LAUNCH, launch_kernel)
    b.stop()
    trace, counts = b.trace(demangle_names=False)
    assert [e["args"]["correlation"] for e in api_rows(trace)] == [corr]
    assert counts["api_recorder"].startswith("CUPTI activity records")


def test_activity_records_are_the_default(native):
    fake_cupti.reset()
    b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), native_recorder=str(native))
    b.start()
    assert b.recorder is None and fake_cupti.STATE.subscriber is None and fake_cupti.STATE.enabled == {10, 1, 2, 5}
    assert b.api_mechanism == "CUPTI activity records"
    b.stop()
    with pytest.raises(ValueError, match="activity, callbacks"):
        cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), api_recorder_choice="native")


def test_no_compiler_falls_back_and_doctor_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(api_recorder.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    monkeypatch.setattr(api_recorder, "compiler", lambda env=None: None)
    fake_cupti.reset()
    b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), api_recorder_choice="callbacks")
    b.start()
    assert b.recorder is None and fake_cupti.STATE.enabled == {10, 1, 2, 5}
    assert "no C compiler" in b.api_mechanism and "no C compiler" in b.warnings[0]
    assert "but no C compiler" in api_recorder.describe({api_recorder.ENV_RECORDER: "callbacks"})
    assert api_recorder.describe({}).startswith("API trace recorder: CUPTI activity records (the default")


def test_doctor_names_the_api_recorder(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc is not None
    (bin_dir / "cc").symlink_to(cc)
    env = {"PATH": str(bin_dir), api_recorder.ENV_RECORDER: "callbacks"}
    assert doctor.tracer_probes(env)[1] == ("API trace recorder: native CUPTI callbacks"
                                            f" ({api_recorder.ENV_RECORDER}=callbacks; built with {bin_dir / 'cc'}"
                                            " on first use)")
    env["PATH"] = str(tmp_path / "nothing")
    assert "no C compiler" in doctor.tracer_probes(env)[1]
    assert "CUPTI activity records (the default" in doctor.tracer_probes({"PATH": str(bin_dir)})[1]


def test_build_is_cached_and_reused_without_a_compiler(monkeypatch, tmp_path):
    first = api_recorder.build(folder=tmp_path)
    assert first.parent == tmp_path and first.name.startswith("api_recorder-")
    monkeypatch.setattr(api_recorder, "compiler", lambda env=None: None)
    assert api_recorder.build(folder=tmp_path) == first  # a build already there needs no compiler
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temporary file left behind


def test_a_broken_source_says_what_the_compiler_said(tmp_path):
    bad = tmp_path / "api_recorder.c"
    bad.write_text("int broken( {\n")
    with pytest.raises(api_recorder.Unavailable, match="could not build api_recorder.c: .*error"):
        api_recorder.build(bad, folder=tmp_path / "out")
    assert not any((tmp_path / "out").iterdir())


def test_an_unwritable_cache_falls_back_to_a_temporary_folder(monkeypatch, tmp_path):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(blocked / "cache"))
    monkeypatch.setattr(api_recorder.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    built = api_recorder.build()
    assert built.parent == tmp_path / "tmp" / f"madengine-rocprof-{os.getuid()}"


@pytest.mark.parametrize("flags,expected", [("fpu constant_tsc nonstop_tsc rdtscp", True),
                                             ("fpu constant_tsc rdtscp", False), ("fpu", False)])
def test_the_tsc_is_used_only_where_it_is_invariant(tmp_path, monkeypatch, flags, expected):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    monkeypatch.setattr(api_recorder.os, "uname", lambda: os.uname_result(("Linux", "h", "6", "1", "x86_64")))
    assert api_recorder.invariant_tsc(str(info)) is expected


def test_monotonic_clock_maps_one_to_one(backend, native):
    fake_cupti.reset()
    rec = api_recorder.Recorder(fake_cupti.FakeLib(), "runtime", native, tsc=False)
    try:
        assert rec.clock == "CLOCK_MONOTONIC"
        rec.start()
        tick, ns = rec.pair()
        assert abs(tick - ns) < 1_000_000  # the fake's timestamps are CLOCK_MONOTONIC too
        rec.stop()
        assert abs(rec.windows[0].rate - 1.0) < 1e-3
    finally:
        rec.close()


def test_window_maps_ticks_on_the_calibration_line():
    w = api_recorder.Window(b"", (1_000, 50_000), (3_000, 51_000))  # 2,000 ticks = 1,000 ns
    assert (w.ns(1_000), w.ns(2_000), w.ns(5_000)) == (50_000, 50_500, 52_000)


def trace_rows(out: Path) -> tuple[list[dict], list[dict]]:
    """(API rows, kernel rows) of the rocprofv3 CSV files the runtime wrote for this process under `out`."""
    tables = []
    for name in ("hip_api_trace", "kernel_trace"):
        with open(out / socket.gethostname() / f"{os.getpid()}_{name}.csv", newline="") as fh:
            tables.append(list(csv.DictReader(fh)))
    return tables[0], tables[1]


def test_runtime_writes_the_api_trace_from_the_native_recorder(monkeypatch, tmp_path, native):
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(native.parent))  # the module's build, no compile here
    t, _torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_API="1", MADENGINE_ROCPROF_TRACER_STATS="1",
                        MADENGINE_ROCPROF_TRACER_API_RECORDER="callbacks")
    try:
        corrs = [fake_cupti.api_call(RUNTIME, LAUNCH, launch_kernel) for _ in range(3)]
        t.finish()
    finally:
        t.prof.close()
    api, kernels = trace_rows(tmp_path)
    host, pid = tmp_path / socket.gethostname(), os.getpid()
    assert [(r["Function"], int(r["Correlation_Id"])) for r in api] == [("cudaLaunchKernel", c) for c in corrs]
    assert [int(r["Correlation_Id"]) for r in kernels] == corrs
    assert {r["Thread_Id"] for r in kernels} == {str(threading.get_native_id())}  # joined through the API rows
    summary = json.loads((host / f"{pid}_tracer_summary.json").read_text())
    assert summary["api_recorder"].startswith("native CUPTI callbacks") and summary["dropped_records"] == 0


def test_runtime_rejects_an_unknown_recorder_choice(monkeypatch, tmp_path, capsys, native):
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(native.parent))
    t, _torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_API="1",
                        MADENGINE_ROCPROF_TRACER_API_RECORDER="fast")
    try:
        assert "MADENGINE_ROCPROF_TRACER_API_RECORDER='fast' is not one of activity, callbacks" in \
            capsys.readouterr().err
        assert t.prof.api_mechanism == "CUPTI activity records"
    finally:
        t.finish()
        t.prof.close()


def test_a_missing_source_is_unavailable_not_a_crash(tmp_path):
    with pytest.raises(api_recorder.Unavailable, match="source is not a file here"):
        api_recorder.build(tmp_path / "archive.pyz" / "api_recorder.c", folder=tmp_path / "out")
