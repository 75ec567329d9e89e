"""CUPTI backend of the embedded tracer, on CPU: record parsing, buffer accounting, backend selection, files and
manifest, through a fake of cupti-python + libcupti (fakes/fake_cupti.py) that follows the real buffer protocol."""
from __future__ import annotations

import csv
import ctypes
import json
import os
import socket
import sys
import tempfile
import types

import pytest

from madengine_rocprof.cli import doctor
from madengine_rocprof.tracer import api_recorder, convert, cupti_backend, cupti_records, demangle, runtime, select
from madengine_rocprof.wrapper import outputs, planner

from .fakes import fake_cupti
from .wrapper_testlib import manifest, wrapper_cli

GEMM = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2EEEEviT0_T1_"
GEMM_DEMANGLED = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
                  "std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)")


def kernel(corr: int, start: int, name: str | int = GEMM, **over) -> dict:
    rec = dict(name=name, start=start, end=start + 500, correlation_id=corr, device_id=0, context_id=1, stream_id=7,
               grid_x=4, grid_y=2, grid_z=1, block_x=128, block_y=1, block_z=1, registers_per_thread=32,
               static_shared_memory=1024, dynamic_shared_memory=1024, graph_id=0)
    rec.update(over)
    return rec


def launch(corr: int, start: int, cbid: int = 211, tid: int = 4242) -> dict:
    return dict(cbid=cbid, start=start, end=start + 40, process_id=99, thread_id=tid, correlation_id=corr)


def written(b, *, demangle_names: bool = False) -> tuple[dict, dict]:
    """The backend's trace as it writes it (its Chrome trace JSON, parsed) and its counts."""
    with tempfile.TemporaryDirectory(prefix="cupti_trace_") as folder:
        path, counts = b.trace(os.path.join(folder, "t.json"), demangle_names=demangle_names)
        with open(path, encoding="utf-8") as fh:
            return json.load(fh), counts


@pytest.fixture
def backend():
    def make(api=False, buffer_bytes=cupti_backend.BUFFER_BYTES, hw=False, **options):
        fake_cupti.reset(hw_trace_supported=hw)
        return cupti_backend.CuptiBackend(fake_cupti, api=api, lib=fake_cupti.FakeLib(),
                                          buffers=cupti_backend.Buffers(buffer_bytes), **options)
    return make


# ------------------------------------------------------------------ control: kinds, hw trace, thread ids
def test_enables_only_the_kinds_the_profile_needs(backend):
    b = backend(api=False)
    b.start()
    assert len(b.buffers.free) == 1 and b.buffers.requested == 0  # allocated before the first record needs it
    assert fake_cupti.STATE.enabled == {10, 1, 2}  # concurrent kernel, memcpy, memset: no runtime API records
    assert fake_cupti.STATE.thread_id_type == cupti_backend.THREAD_ID_TYPE_SYSTEM
    assert b.hw_trace.startswith("unsupported") and "NOT_SUPPORTED" in b.hw_trace
    assert not fake_cupti.record(5, **launch(1, 10))  # a runtime call leaves no record
    b.stop()
    assert fake_cupti.STATE.enabled == set()
    b = backend(api=True, hw=True)
    b.start()
    assert fake_cupti.STATE.enabled == {10, 1, 2, 5} and b.hw_trace == "on"
    b.stop()


# ------------------------------------------------------------------ buffer attributes, windows
def _started(b):
    b.start()
    return b


def test_per_thread_buffers_and_no_zeroing_asked_for_and_reported(backend):
    b = _started(backend())
    attr = fake_cupti.ActivityAttribute
    assert fake_cupti.STATE.attributes == {attr.ATTR_PER_THREAD_BUFFER: 1, attr.ATTR_ZEROED_OUT_BUFFER: 0}
    b.stop()
    _, counts = written(b, demangle_names=False)
    assert counts["per_thread_buffers"] == "on" and counts["zeroed_buffers"] == "off"
    fake_cupti.reset()
    fake_cupti.STATE.attribute_status = 1  # an older CUPTI without the attribute: tracing goes on without it
    b = cupti_backend.CuptiBackend(fake_cupti, api=False, lib=fake_cupti.FakeLib())
    b.start()
    assert fake_cupti.record(10, **kernel(1, 100))
    b.stop()
    trace, counts = written(b, demangle_names=False)
    assert counts["per_thread_buffers"] == "unsupported (CUPTI status 1)" and len(convert.kernel_rows(trace)) == 1
    assert counts["zeroed_buffers"] == "on (CUPTI cannot switch it off)"


def test_stale_bytes_past_the_valid_size_are_never_read(backend):
    b = _started(backend(buffer_bytes=4096))
    address = b.buffers.free[-1]
    ctypes.memset(address, 0x7F, 4096)  # CUPTI no longer zeroes a buffer: whatever was there stays past the records
    fake_cupti.record(10, **kernel(1, 100))
    b.stop()
    trace, counts = written(b, demangle_names=False)
    assert counts["records"] == {"CONCURRENT_KERNEL": 1} and len(convert.kernel_rows(trace)) == 1


def test_windows_of_one_backend_keep_every_record_and_register_once(backend):
    b = backend()
    for window in range(3):
        b.start()
        fake_cupti.record(10, **kernel(window + 1, 1000 * window))
        b.stop()
        assert not fake_cupti.record(10, **kernel(99, 99_999))  # between windows nothing is recorded
    first_callbacks = fake_cupti.STATE.callbacks
    assert first_callbacks is not None and b._callbacks == first_callbacks
    trace, _ = written(b, demangle_names=False)
    assert [r[8] for r in convert.kernel_rows(trace)] == [1, 2, 3]


# ------------------------------------------------------------------ buffers: every record back, none hidden
def test_records_across_many_buffers_come_back_complete_and_in_order(backend):
    b = backend(api=True, buffer_bytes=1024)  # 4 kernel records or 25 API records per buffer: many completions
    b.start()
    for i in range(1, 41):
        fake_cupti.record(5, **launch(i, 1000 * i))
        fake_cupti.record(10, **kernel(i, 1000 * i + 100))
    b.stop()
    assert fake_cupti.STATE.completions == 10  # 40 x (40 + 216) bytes in 1024-byte buffers
    assert b.buffers.requested == fake_cupti.STATE.completions
    assert len(b.buffers.owned) == 1  # each completed buffer went back to the free list and was handed out again
    trace, counts = written(b, demangle_names=False)
    assert counts["dropped_records"] == 0
    assert counts["records"] == {"RUNTIME": 40, "CONCURRENT_KERNEL": 40}
    rows = convert.kernel_rows(trace)
    assert [r[8] for r in rows] == list(range(1, 41))  # correlation ids kept, start order
    assert {r[4] for r in rows} == {4242}  # Thread_Id: the launching thread, through the correlation id


def test_dropped_records_are_counted(backend):
    b = backend(buffer_bytes=200)  # smaller than one kernel record (216 bytes): CUPTI drops them
    b.start()
    fake_cupti.record(10, **kernel(1, 100))
    fake_cupti.record(1, copy_kind=1, src_kind=2, dst_kind=3, bytes=8, start=50, end=60, device_id=0, stream_id=7,
                      correlation_id=2)
    b.stop()
    trace, counts = written(b, demangle_names=True)
    assert counts["dropped_records"] == 1
    assert counts["records"] == {"MEMCPY": 1}


def test_layout_reads_the_fields_at_the_dtype_offsets():
    table = cupti_records.layouts(fake_cupti)
    raw = fake_cupti._pack(10, {"start": 5, "end": 9, "correlation_id": 77, "grid_x": -1, "registers_per_thread": 255,
                                "name": 1234, "graph_id": 3})
    recs, seen = cupti_records.parse(raw, [0], table)
    assert seen == {10: 1}
    kind, rec = recs[0]
    assert (kind, rec["start"], rec["end"], rec["correlation_id"], rec["grid_x"]) == (10, 5, 9, 77, -1)
    assert (rec["registers_per_thread"], rec["name"], rec["graph_id"]) == (255, 1234, 3)


def test_a_missing_field_is_a_version_mismatch_error():
    dtype = fake_cupti._Dtype(40, {"kind": ("<i4", 0), "start": ("<u8", 8)})
    with pytest.raises(ValueError, match="version mismatch"):
        cupti_records.Layout(5, dtype, cupti_records.FIELDS[5])


# ------------------------------------------------------------------ conversion to rocprofv3's files
def test_rows_match_rocprofv3_columns(backend):
    b = backend(api=True)
    b.start()
    fake_cupti.record(5, **launch(11, 1_000_000_000, cbid=211))
    fake_cupti.record(10, **kernel(11, 1_000_000_100))
    fake_cupti.record(1, copy_kind=2, src_kind=3, dst_kind=1, bytes=64, start=1_000_001_000, end=1_000_001_250,
                      device_id=0, stream_id=7, correlation_id=12)
    fake_cupti.record(2, memory_kind=3, bytes=64, value=0, start=1_000_002_000, end=1_000_002_010, device_id=0,
                      stream_id=7, correlation_id=13)
    b.stop()
    trace, _counts = written(b, demangle_names=True)
    (k,) = convert.kernel_rows(trace)
    if demangle.available():
        assert k[7] == GEMM_DEMANGLED
    assert (k[1], k[2], k[4], k[8], k[9], k[10]) == ("Agent 0", 7, 4242, 11, 1_000_000_100, 1_000_000_600)
    assert (k[11], k[13], k[16], k[19], k[20]) == (2048, 32, 128, 512, 2)  # LDS, VGPR, workgroup, grid in work-items
    assert convert.api_rows(trace) == [("CUDA_RUNTIME_API", "cudaLaunchKernel", 99, 4242, 11, 1_000_000_000,
                                        1_000_000_040)]
    assert convert.memcpy_rows(trace) == [("MEMORY_COPY", "MEMORY_COPY_DEVICE_TO_HOST", 7, "Agent 0", "CPU", 12,
                                           1_000_001_000, 1_000_001_250)]
    cats = sorted(e["cat"] for e in trace["traceEvents"])
    assert cats == ["cuda_runtime", "gpu_memcpy", "gpu_memset", "kernel"]


def test_mangled_names_kept_when_asked(backend):
    b = backend()
    b.start()
    fake_cupti.record(10, **kernel(1, 100))
    b.stop()
    trace, _ = written(b, demangle_names=False)
    assert convert.kernel_rows(trace)[0][7] == GEMM


@pytest.mark.skipif(not demangle.available(), reason="no C++ runtime with __cxa_demangle")
def test_demangle_like_the_cxx_runtime():
    assert demangle.demangle(GEMM) == GEMM_DEMANGLED
    assert demangle.demangle("triton_poi_fused_add_0") == "triton_poi_fused_add_0"  # C names stay
    assert demangle.demangle("_Znot_a_name") == "_Znot_a_name"


def test_api_names_lose_the_version_suffix():
    assert cupti_records.api_name("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert cupti_records.api_name("cudaMemcpyAsync_v3020") == "cudaMemcpyAsync"
    assert cupti_records.api_name("cudaFoo") == "cudaFoo"


# ------------------------------------------------------------------ backend selection
@pytest.mark.parametrize("setting,cuda,error,expected,warns", [
    (None, True, None, "cupti", False),
    ("auto", True, "ModuleNotFoundError", "torch", False),
    ("torch", True, None, "torch", False),
    ("cupti", True, None, "cupti", False),
    ("cupti", True, "ModuleNotFoundError", "torch", True),
    ("cupti", False, None, "torch", True),
    (None, False, None, "torch", False),
    ("bogus", True, None, "cupti", True),
])
def test_backend_choice(setting, cuda, error, expected, warns):
    name, why, warning = select.choose(setting, cuda=cuda, cupti_error=error)
    assert name == expected and why
    assert bool(warning) == warns


def test_doctor_shows_the_tracer_backend(monkeypatch):
    env = {"PATH": "/nonexistent"}
    probe = doctor.tracer_probes(env)[0]
    assert probe.startswith("tracer backend: torch")  # no NVIDIA GPU here
    monkeypatch.setattr(select, "cupti_python_version", lambda: "13.0.1")
    assert select.describe(env, nvidia=True).startswith("tracer backend: cupti (CUDA GPU and cupti-python importable")
    env[select.ENV_BACKEND] = "torch"
    assert select.describe(env, nvidia=True).startswith("tracer backend: torch")


def test_doctor_adds_the_tracer_probes_the_wrapper_does_not_make(monkeypatch, capsys):
    """The wrapper's detection says only that the embedded tracer is there (it imports nothing from the tracer);
    `doctor` asks the tracer which backend and API recorder a traced process would use."""
    import argparse

    from madengine_rocprof.wrapper import detect

    monkeypatch.setenv("PATH", "/nonexistent")
    assert detect.embedded({"PATH": "/nonexistent"}).probes == []
    assert doctor.run(argparse.Namespace(profiler=None, profile=None, json=True)) == 0
    shown = json.loads(capsys.readouterr().out)
    [embedded] = [row for row in shown["found"] if row["name"] == "embedded"]
    assert embedded["probes"][0].startswith("tracer backend: torch")
    assert embedded["probes"][1].startswith("API trace recorder:")
    assert shown["chosen"]["name"] == "embedded" and "; tracer backend: torch" in shown["chosen"]["why"]


# ------------------------------------------------------------------ the runtime: files, summary, fallback
class _FakeTorch:
    """What runtime.start reads of torch on a CUDA machine."""

    def __init__(self):
        self.synced = 0
        self.version = types.SimpleNamespace(cuda="13.0")
        self.cuda = types.SimpleNamespace(is_available=lambda: True, synchronize=self._sync)

    def _sync(self):
        self.synced += 1


def _traced(monkeypatch, tmp_path, **env):
    fake_cupti.reset()
    monkeypatch.setattr(cupti_backend, "load", lambda: fake_cupti)
    monkeypatch.setattr(cupti_backend, "open_lib", lambda _c: fake_cupti.FakeLib())
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_OUT", str(tmp_path))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    t = runtime._Tracer()
    torch = _FakeTorch()
    t.start(torch)
    return t, torch


def test_runtime_writes_rocprofv3_files_and_a_summary(monkeypatch, tmp_path):
    t, torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_API="1", MADENGINE_ROCPROF_TRACER_STATS="1")
    assert t.prof.name == "cupti"
    for i in range(1, 4):
        fake_cupti.record(5, **launch(i, 1000 * i))
        fake_cupti.record(10, **kernel(i, 1000 * i + 100))
    t.finish()
    assert torch.synced == 1  # the window waits for its kernels before closing
    host = tmp_path / socket.gethostname()
    pid = os.getpid()
    names = sorted(p.name for p in host.iterdir())
    assert names == sorted(f"{pid}_{n}" for n in ("kernel_trace.csv", "kernel_stats.csv", "hip_api_trace.csv",
                                                  "hip_api_stats.csv", "perfetto_trace.json",
                                                  "tracer_summary.json"))
    with open(host / f"{pid}_kernel_trace.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["Correlation_Id"] for r in rows] == ["1", "2", "3"]
    summary = json.loads((host / f"{pid}_tracer_summary.json").read_text())
    assert (summary["backend"], summary["dropped_records"], summary["kernel_rows"]) == ("cupti", 0, 3)
    assert set(summary["write_seconds"]) == {"stop", "chrome_trace", "rows"}
    assert all(0 <= s < 60 for s in summary["write_seconds"].values())
    if api_recorder.compiler() is not None:
        assert summary["trace_writer"] == "native (C)"
    perfetto = json.loads((host / f"{pid}_perfetto_trace.json").read_text())
    assert [r[8] for r in convert.kernel_rows(perfetto)] == [1, 2, 3]  # the JSON is the same trace


def test_runtime_driver_domain_writes_driver_calls_to_the_api_trace(monkeypatch, tmp_path):
    t, _torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_API="1",
                        MADENGINE_ROCPROF_TRACER_API_DOMAIN="driver")
    assert not fake_cupti.record(5, **launch(1, 1000))  # no runtime records in the driver domain
    fake_cupti.record(4, **launch(1, 1000, cbid=307))
    fake_cupti.record(10, **kernel(1, 1100))
    t.finish()
    with open(tmp_path / socket.gethostname() / f"{os.getpid()}_hip_api_trace.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["Domain"], r["Function"], r["Correlation_Id"]) for r in rows] == [("CUDA_DRIVER_API", "cuLaunchKernel",
                                                                                  "1")]


def test_runtime_unknown_api_domain_warns_and_records_runtime_calls(monkeypatch, tmp_path, capsys):
    t, _torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_API="1",
                        MADENGINE_ROCPROF_TRACER_API_DOMAIN="hsa")
    assert "MADENGINE_ROCPROF_TRACER_API_DOMAIN='hsa' is not one of runtime, driver: using the default ('runtime')" \
        in capsys.readouterr().err
    assert fake_cupti.record(5, **launch(1, 1000))
    t.finish()


def test_runtime_without_kernels_writes_nothing(monkeypatch, tmp_path, capsys):
    t, _ = _traced(monkeypatch, tmp_path)
    t.finish()
    assert not (tmp_path / socket.gethostname()).exists() or not any((tmp_path / socket.gethostname()).iterdir())
    assert "no GPU kernels captured" in capsys.readouterr().err


def test_runtime_reports_dropped_records(monkeypatch, tmp_path, capsys):
    t, _ = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_BUFFER_MB="0.0002")  # 209 bytes: drops kernels
    fake_cupti.record(10, **kernel(1, 100))
    t.finish()
    host = tmp_path / socket.gethostname()
    summary = json.loads((host / f"{os.getpid()}_tracer_summary.json").read_text())
    assert summary["dropped_records"] == 1
    assert "dropped 1 activity record" in capsys.readouterr().err
    assert [p.name for p in host.iterdir()] == [f"{os.getpid()}_tracer_summary.json"]  # no rows: no Chrome trace


def test_runtime_falls_back_to_torch_profiler_when_cupti_is_missing(monkeypatch, tmp_path, capsys):
    def missing():
        raise ModuleNotFoundError("No module named 'cupti'")

    monkeypatch.setattr(cupti_backend, "load", missing)
    started = []
    monkeypatch.setattr(runtime.TorchBackend, "start", lambda self: started.append(self))
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_OUT", str(tmp_path))
    monkeypatch.setenv(select.ENV_BACKEND, "cupti")
    t = runtime._Tracer()
    t.start(_FakeTorch())
    assert t.prof.name == "torch" and started
    assert "cupti-python does not import" in capsys.readouterr().err


# ------------------------------------------------------------------ wrapper: options and manifest
def test_trace_options_reach_the_tracer(tmp_path):
    plan = planner.build(["--kernel-trace", "--hip-trace", "--stats", "--memory-copy-trace", "--mangled-kernels"],
                         ["python3", "x.py"], profiler="embedded", cwd=str(tmp_path), env={"PATH": "/nonexistent"})
    env = plan.env_added
    for key in ("API", "STATS", "MEMCPY", "MANGLED"):
        assert env[f"MADENGINE_ROCPROF_TRACER_{key}"] == "1"
    plain = planner.build(["--kernel-trace"], ["python3", "x.py"], profiler="embedded", cwd=str(tmp_path),
                          env={"PATH": "/nonexistent"}).env_added
    assert not any(k in plain for k in ("MADENGINE_ROCPROF_TRACER_API", "MADENGINE_ROCPROF_TRACER_MEMCPY"))


APP = """
import json, os, socket, sys
host = os.path.join(os.environ["MADENGINE_ROCPROF_TRACER_OUT"], socket.gethostname())
os.makedirs(host, exist_ok=True)
pid = os.getpid()
open(os.path.join(host, f"{pid}_kernel_trace.csv"), "w").write('"Kind","Kernel_Name"\\n"KERNEL_DISPATCH","k"\\n')
summary = os.path.join(host, f"{pid}_tracer_summary.json")
json.dump({"backend": "cupti", "dropped_records": int(sys.argv[1])}, open(summary, "w"))
"""


@pytest.mark.parametrize("dropped,outcome", [(0, "ok"), (5, "records_dropped")])
def test_manifest_counts_dropped_records(tmp_path, dropped, outcome):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MADENGINE_ROCPROF")}
    env["PATH"] = "/usr/bin:/bin"
    done = wrapper_cli(["--profiler", "embedded", "--kernel-trace", "-d", str(tmp_path / "out"), "--",
                        sys.executable, "-c", APP, str(dropped)], env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    m = manifest(tmp_path / "out")
    assert m["outcome"] == outcome
    assert m["tracer"]["dropped_records"] == dropped and m["tracer"]["backends"] == ["cupti"]
    assert m["dispatch_count"] == 1


def test_summary_with_torch_profiler_has_unknown_drops(tmp_path):
    host = tmp_path / "h"
    host.mkdir()
    (host / "1_tracer_summary.json").write_text(json.dumps({"backend": "cupti", "dropped_records": 0}))
    (host / "2_tracer_summary.json").write_text(json.dumps({"backend": "torch", "dropped_records": None}))
    files = [{"path": f"h/{n}_tracer_summary.json", "kind": outputs.kind_of(f"h/{n}_tracer_summary.json")}
             for n in (1, 2)]
    summary = outputs.tracer_summary(str(tmp_path), files)
    assert summary is not None
    assert summary["backends"] == ["cupti", "torch"] and summary["dropped_records"] is None


def test_driver_api_records_name_driver_calls(backend):
    b = _started(backend(api=True, api_domain="driver"))
    assert fake_cupti.STATE.enabled == {10, 1, 2, 4}  # driver API records instead of runtime ones
    assert not fake_cupti.record(5, **launch(1, 100, cbid=211))
    assert fake_cupti.record(4, **launch(1, 100, cbid=307))
    assert fake_cupti.record(10, **kernel(1, 200))
    b.stop()
    trace, _ = written(b, demangle_names=False)
    api = [e for e in trace["traceEvents"] if e.get("cat") == "cuda_driver"]
    assert [(e["name"], e["args"]["correlation"]) for e in api] == [("cuLaunchKernel", 1)]
    rows = convert.kernel_rows(trace)
    assert [r[8] for r in rows] == [1] and rows[0][4] == 4242  # the kernel's thread comes from the driver call
    with pytest.raises(ValueError, match="runtime or driver"):
        backend(api=True, api_domain="hip")


def test_doctor_tells_the_truth_about_a_python_without_torch(monkeypatch, capsys):
    """A wheel install without the [torch] extra: no tracer backend in this Python (before: 'tracer backend: torch',
    then a local run failed with ModuleNotFoundError)."""
    from madengine_rocprof.cli import main
    from madengine_rocprof.tracer import select as select_module

    monkeypatch.setattr(select_module, "torch_version", lambda: None)
    for name in ("ROCM_PATH", "MADENGINE_ROCPROF_PROFILER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["doctor"]) == 0
    io = capsys.readouterr()
    assert "tracer backend: none: torch is not installed in this Python" in io.out
    assert "torch: not installed" in io.out
    assert "ModuleNotFoundError" in io.err and "madengine-rocprof[torch]" in io.err
    assert main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["torch"] is None
