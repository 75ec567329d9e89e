"""CUPTI activity buffers handled in C (cupti_backend.NativeBuffers, native/cupti_buffers.c), on CPU: the fake CUPTI
(fakes/fake_cupti.py) calls the registered request/complete functions exactly as libcupti does. What the tests
check: the functions CUPTI calls are the C library's own (no Python runs, so no GIL is taken on CUPTI's threads),
every record comes back once and in order across many buffers, buffers are reused, the do-nothing consumer keeps
nothing, and without a compiler the tracer falls back to the Python callbacks and says so.
"""
from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from madengine_rocprof.tracer import api_recorder, convert, cupti_backend

from .fakes import fake_cupti
from .test_wrapper_cupti import _traced, kernel, launch, written

pytestmark = pytest.mark.skipif(api_recorder.compiler() is None, reason="needs a C compiler (scripts/setup.sh)")
SIZE = 2048  # one size per process: the C library refuses to change it once buffers exist


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    return api_recorder.build(cupti_backend.BUFFERS_SOURCE, folder=tmp_path_factory.mktemp("native"))


def traced_backend(buffers, api=True):
    fake_cupti.reset()
    return cupti_backend.CuptiBackend(fake_cupti, api=api, lib=fake_cupti.FakeLib(), buffers=buffers,
                                      api_recorder_choice="activity")


def test_cupti_calls_the_c_functions_themselves(native):
    buffers = cupti_backend.NativeBuffers(SIZE, native_path=native)
    b = traced_backend(buffers)
    b.start()
    assert fake_cupti.STATE.callbacks is not None
    request, complete = fake_cupti.STATE.callbacks
    address = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731 - a one-line helper
    assert address(request) == address(buffers.native.cupti_buffers_request)
    assert address(complete) == address(buffers.native.cupti_buffers_complete)
    b.stop()
    _, counts = written(b, demangle_names=False)
    assert counts["buffer_handling"] == "native (C callbacks)"


def test_records_across_many_buffers_come_back_once_and_in_order(native):
    buffers = cupti_backend.NativeBuffers(SIZE, native_path=native)
    b = traced_backend(buffers)
    requested_before = buffers.requested
    allocated = []
    for window in range(2):
        b.start()
        for i in range(1, 41):
            corr = 100 * window + i
            fake_cupti.record(5, **launch(corr, 1000 * corr))
            fake_cupti.record(10, **kernel(corr, 1000 * corr + 100))
        b.stop()
        allocated.append(buffers._counts()[1])
    assert fake_cupti.STATE.completions >= 10  # 80 x (40 + 216) bytes in 2048-byte buffers
    assert buffers.requested - requested_before == fake_cupti.STATE.completions
    assert allocated[1] == allocated[0]  # the second window reuses the buffers the first one gave back
    trace, counts = written(b, demangle_names=False)
    corrs = [100 * w + i for w in range(2) for i in range(1, 41)]
    assert [r[8] for r in convert.kernel_rows(trace)] == corrs
    assert counts["records"] == {"RUNTIME": 80, "CONCURRENT_KERNEL": 80} and counts["dropped_records"] == 0


def test_the_do_nothing_consumer_keeps_nothing_and_reuses_its_buffers(native):
    discard = cupti_backend.NativeBuffers(SIZE, keep=False, native_path=native)
    try:
        b = traced_backend(discard, api=False)
        b.start()
        allocated = discard._counts()[1]
        for i in range(200):
            fake_cupti.record(10, **kernel(i + 1, 1000 * i))
        b.stop()
        assert fake_cupti.STATE.completions > 10 and b.raw == [] and discard.take() == []
        assert discard._counts()[1] == allocated  # every completed buffer went straight back
        assert discard.completed_bytes > 200 * 200
    finally:
        cupti_backend.NativeBuffers(SIZE, keep=True, native_path=native)  # the library is one per process


def test_a_second_size_in_one_process_is_refused(native):
    cupti_backend.NativeBuffers(SIZE, native_path=native).prefill(1)
    with pytest.raises(api_recorder.Unavailable, match="another size"):
        cupti_backend.NativeBuffers(SIZE * 2, native_path=native)


def test_runtime_uses_native_buffers_and_says_so(monkeypatch, tmp_path, native):
    monkeypatch.setattr(cupti_backend, "BUFFERS_SOURCE", native.with_suffix(".missing.c"))
    monkeypatch.setattr(cupti_backend.api_recorder, "build", lambda source, folder=None: native)
    t, _torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_BUFFER_MB=str(SIZE / (1 << 20)))
    fake_cupti.record(10, **kernel(1, 100))
    t.finish()
    summary = json.loads((tmp_path / socket.gethostname() / f"{os.getpid()}_tracer_summary.json").read_text())
    assert summary["buffer_handling"] == "native (C callbacks)" and summary["kernel_rows"] == 1


def test_without_a_compiler_the_python_callbacks_run_and_the_summary_says_why(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(api_recorder.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    monkeypatch.setattr(api_recorder, "compiler", lambda env=None: None)
    buffers, warning = cupti_backend.make_buffers(4096)
    assert isinstance(buffers, cupti_backend.Buffers) and "no C compiler" in warning
    out = tmp_path / "out"
    t, _torch = _traced(monkeypatch, out)
    assert "native CUPTI buffer handling unavailable" in capsys.readouterr().err
    fake_cupti.record(10, **kernel(1, 100))
    t.finish()
    summary = json.loads((out / socket.gethostname() / f"{os.getpid()}_tracer_summary.json").read_text())
    assert summary["buffer_handling"].startswith("Python callbacks (native buffers unavailable: no C compiler")
    assert summary["kernel_rows"] == 1


def test_the_wrapper_archive_carries_the_c_sources_and_builds_them(tmp_path):
    from madengine_rocprof.wrapper import bundle

    pyz = bundle.build_pyz(str(tmp_path / "w.pyz"))
    code = ("from madengine_rocprof.tracer import api_recorder as a, cupti_backend as c, cupti_json as j\n"
            "for s in (a.SOURCE, c.BUFFERS_SOURCE, j.SOURCE): print(a.build(s))\n"
            "print(c.NativeBuffers(4096).mechanism)\n")
    env = dict(os.environ, PYTHONPATH=pyz, MADENGINE_ROCPROF_CACHE=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False,
                          cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [Path(p).parent for p in lines[:3]] == [tmp_path / "cache"] * 3
    assert [Path(p).name.split("-")[0] for p in lines[:3]] == ["api_recorder", "cupti_buffers", "cupti_json"]
    assert lines[3] == "native (C callbacks)"
    assert sorted(p.suffix for p in (tmp_path / "cache").iterdir()) == [".so"] * 3  # no copy of a source left
