"""Issue 25 item 3 for the tracer's native Kineto converter (tracer/native/kineto_rows.c): a torch.profiler-layout
trace mutated at the text level (truncation, inserted NUL, quote, backslash and other bytes, odd numbers, swapped
fields, dropped and duplicated lines) gives the same files, byte for byte, or the same error, with the native
converter as with the Python reader and writer (which the native one hands every file it is not sure of).

Same hypothesis profile as test_reliability_fuzz.py (`madengine-fuzz-ci`: derandomized, 120 cases; about 10 s here).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from madengine_rocprof.tracer import convert, native_rows
from tests.wrapper import kineto_files as kf

from .test_reliability_fuzz import FUZZ, mutated_text

pytestmark = pytest.mark.skipif(native_rows.library() is None, reason=f"no native converter: {native_rows.why_not}")


def _seed() -> str:
    events = [kf.span(0)]
    for i in range(1, 9):
        events.append(kf.cpu_op(["aten::mm", 'a "b", c', "\u00e9\\x"][i % 3], 1 + i % 2, 900 * (9 - i), 40 + i, i,
                                external_first=bool(i % 2)))
        events.append(kf.runtime_call("cudaLaunchKernel", 5, 1000 * i, 300, i))
        events.append(kf.kernel(f"void k<{i % 3}>(int)", 1000 * i + 50, 700 + i, i, grid=(i, 1, 1)))
    events.append('  {\n    "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,'
                  ' "tid": 7,\n    "ts": 20.000, "dur": 1.500,\n    "args": {\n      "device": 0, "stream": 7,'
                  ' "correlation": 3\n    }\n  },\n')
    return kf.document(1_790_857_026_000_000_000, events, end_ns=99_000)


SEED = _seed()


def _run(path: str, folder: str, native: bool, options: dict):
    os.environ[native_rows.ENV_SWITCH] = "1" if native else "0"
    os.makedirs(folder)
    try:
        written, count = convert.write_trace_file(path, folder, "3_", **options)
        return {os.path.basename(p): Path(p).read_bytes() for p in written}, count, sorted(os.listdir(folder))
    except Exception as exc:  # noqa: BLE001 - both paths must fail alike
        return type(exc), str(exc), sorted(os.listdir(folder))
    finally:
        os.environ.pop(native_rows.ENV_SWITCH, None)


@FUZZ
@given(text=mutated_text(SEED), cpu=st.booleans(), truncate=st.booleans())
def test_mutated_kineto_traces_give_the_same_files_natively(text, cpu, truncate):
    options = {"cpu": cpu, "truncate": truncate, "api": True, "memcpy": True, "stats": True}
    with tempfile.TemporaryDirectory(prefix="native_rows_fuzz_") as tmp:
        path = os.path.join(tmp, "t.json")
        with open(path, "wb") as fh:
            fh.write(text.encode("utf-8", "surrogatepass"))
        native = _run(path, os.path.join(tmp, "native"), True, options)
        python = _run(path, os.path.join(tmp, "python"), False, options)
    assert native == python


def test_the_seed_itself_is_read_natively():
    with tempfile.TemporaryDirectory(prefix="native_rows_fuzz_") as tmp:
        path = os.path.join(tmp, "t.json")
        Path(path).write_text(SEED, encoding="utf-8")
        files, count, _left = _run(path, os.path.join(tmp, "out"), True, {"cpu": False, "api": True, "memcpy": True})
        assert native_rows.why_not == "" and count == 8
        assert sorted(files) == ["3_hip_api_trace.csv", "3_kernel_stats.csv", "3_kernel_trace.csv",
                                 "3_memory_copy_trace.csv"]
