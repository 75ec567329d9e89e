"""Building the tracer's native code (tracer/api_recorder.py: build, cache, clock) and choosing the API recorder of
the CUPTI backend, on CPU with the fake CUPTI (fakes/fake_cupti.py): the libcudart interposer is the default, and
every way it can be unavailable falls back to CUPTI's activity records and says why. The interposer itself is tested
in test_wrapper_interposer.py.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from madengine_rocprof.cli import doctor
from madengine_rocprof.tracer import api_recorder, cupti_backend

from .fakes import fake_cupti
from .test_wrapper_cupti import _traced

pytestmark = pytest.mark.skipif(api_recorder.compiler() is None, reason="needs a C compiler (scripts/setup.sh)")


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    return api_recorder.build(folder=tmp_path_factory.mktemp("native"))


def test_the_interposer_is_the_default_and_without_libcudart_falls_back_to_activity_records(monkeypatch, native):
    monkeypatch.setattr(api_recorder, "CUDART", "libcudart-not-loaded.so")  # a statically linked CUDA runtime
    fake_cupti.reset()
    b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), native_recorder=str(native))
    assert b.api_recorder_choice == "interpose" == api_recorder.DEFAULT
    try:
        b.start()
        assert b.recorder is None and fake_cupti.STATE.enabled == {10, 1, 2, 5}  # + runtime API records
        assert b.api_mechanism.startswith("CUPTI activity records (interpose recorder unavailable: no"
                                          " libcudart-not-loaded.so* is loaded")
        assert "=interpose, but no libcudart-not-loaded.so" in b.warnings[0]
        b.stop()
    finally:
        b.close()
    with pytest.raises(ValueError, match="interpose, activity"):
        cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), api_recorder_choice="callbacks")


def test_activity_records_when_asked_for(native):
    fake_cupti.reset()
    b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), native_recorder=str(native),
                                   api_recorder_choice="activity")
    b.start()
    assert b.recorder is None and fake_cupti.STATE.subscriber is None and fake_cupti.STATE.enabled == {10, 1, 2, 5}
    assert b.api_mechanism == "CUPTI activity records" and not b.warnings
    b.stop()


def test_no_compiler_falls_back_and_doctor_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(api_recorder.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    monkeypatch.setattr(api_recorder, "compiler", lambda env=None: None)
    fake_cupti.reset()
    b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib())
    b.start()
    assert b.recorder is None and fake_cupti.STATE.enabled == {10, 1, 2, 5}
    assert "no C compiler" in b.api_mechanism and "no C compiler" in b.warnings[0]
    b.stop()
    assert api_recorder.describe({}) == ("API trace recorder: CUPTI activity records (the libcudart interposer is"
                                         " the default, but no C compiler builds it)")


def test_doctor_names_the_api_recorder(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc is not None
    (bin_dir / "cc").symlink_to(cc)
    env = {"PATH": str(bin_dir)}
    assert doctor.tracer_probes(env)[1].startswith("API trace recorder: libcudart interposer (the default; built"
                                                     f" with {bin_dir / 'cc'} on first use")
    env["PATH"] = str(tmp_path / "nothing")
    assert "no C compiler" in doctor.tracer_probes(env)[1]
    env[api_recorder.ENV_RECORDER] = "activity"
    assert doctor.tracer_probes(env)[1].startswith("API trace recorder: CUPTI activity records"
                                                     f" ({api_recorder.ENV_RECORDER}=activity;")


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


def test_window_maps_ticks_on_the_calibration_line():
    w = api_recorder.Window(b"", (1_000, 50_000), (3_000, 51_000))  # 2,000 ticks = 1,000 ns
    assert (w.ns(1_000), w.ns(2_000), w.ns(5_000)) == (50_000, 50_500, 52_000)


def test_runtime_rejects_an_unknown_recorder_choice(monkeypatch, tmp_path, capsys, native):
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(native.parent))
    t, _torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_API="1",
                        MADENGINE_ROCPROF_TRACER_API_RECORDER="fast")
    try:
        assert "MADENGINE_ROCPROF_TRACER_API_RECORDER='fast' is not one of interpose, activity: using the default" \
            in capsys.readouterr().err
        assert t.prof.api_recorder_choice == "interpose"
    finally:
        t.finish()
        t.prof.close()


def test_a_missing_source_is_unavailable_not_a_crash(tmp_path):
    with pytest.raises(api_recorder.Unavailable, match="source is not a file here"):
        api_recorder.build(tmp_path / "archive.pyz" / "api_recorder.c", folder=tmp_path / "out")
