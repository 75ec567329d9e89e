"""Issue 25 item 3 for the trace readers added by issue 24: PyTorch profiler (Kineto) JSON and rocprofv3 .pftrace.

Same profile and contract as test_reliability_fuzz.py (exit 0, 1 or 2, never a traceback, never the internal-error
handler). Where the input is unchanged or still parses as the same trace, exit 0 must give the seed's exact numbers,
which come from the records the seed was built from, not from the readers.
"""
from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.reports.pftrace_writer import Record, write_pftrace

from .contract_helpers import assert_contract, cli, strict_json
from .test_reliability_fuzz import FUZZ, mutated_json

KERNELS = [("Cijk_Alik_Bljk_SB_MT128x128x16", 1_000, 4_500), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2_000, 9_000),
           ("void at::native::vectorized_elementwise_kernel<4, float>(int, float*)", 10_000, 10_750)]
# the kernels as Kineto writes them: microseconds with three decimals, relative to baseTimeNanoseconds
KINETO = {
    "schemaVersion": 1,
    "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
    "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 0.5, "dur": 3.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 0.9, "dur": 0.2,
         "args": {"correlation": 1}},
        *[{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": start / 1000,
           "dur": (end - start) / 1000, "args": {"device": 0, "stream": 7, "correlation": i + 1}}
          for i, (name, start, end) in enumerate(KERNELS)],
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 11.0,
         "dur": 1.5, "args": {"device": 0, "stream": 7}},
    ],
}
EXPECTED = {name: (1, end - start) for name, start, end in KERNELS}
# one queue each: rocprofv3's writer moves overlapping dispatches of one queue to the overlap's midpoint
RECORDS = [Record("kernel_dispatch", name, start, end, queue=i) for i, (name, start, end) in enumerate(KERNELS)]


def _report(run: Path) -> tuple[int, dict | None, str]:
    out = run.parent / "report.json"
    code, _, err = cli("report", run, "--json", out, "-q", "--top", "1000")
    assert_contract(code, err)
    return code, (strict_json(out.read_text()) if code == 0 else None), err


def _kernels(report: dict) -> dict[str, tuple[int, int]]:
    return {k["name"]: (k["calls"], k["total_ns"]) for k in report["runs"][0]["kernels"]}


def test_the_seeds_read_exactly(tmp_path):
    run = tmp_path / "kineto"
    run.mkdir()
    (run / "rank0.pt.trace.json").write_text(json.dumps(KINETO))
    code, report, err = _report(run)
    assert code == 0 and report is not None and _kernels(report) == EXPECTED, err
    pf = tmp_path / "pf"
    write_pftrace(pf / "1_results.pftrace", RECORDS)
    code, report, err = _report(pf)
    assert code == 0 and report is not None and _kernels(report) == EXPECTED, err


@FUZZ
@given(text=mutated_json(KINETO), gz=st.booleans())
def test_fuzz_kineto_trace(text, gz):
    with tempfile.TemporaryDirectory(prefix="fuzz_") as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        data = text.encode("utf-8", "surrogatepass")
        name = "rank0.pt.trace.json"
        if gz:
            data, name = gzip.compress(data), name + ".gz"
        (run / name).write_bytes(data)
        code, report, _ = _report(run)
        if code == 0 and report is not None and text == json.dumps(json.loads(json.dumps(KINETO)), indent=1):
            assert _kernels(report) == EXPECTED


def _pftrace_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_pftrace(Path(tmp) / "1_results.pftrace", RECORDS)
        return path.read_bytes()


PFTRACE = _pftrace_bytes()


@FUZZ
@given(cut=st.integers(0, len(PFTRACE)), flips=st.lists(st.tuples(st.integers(0, len(PFTRACE) - 1),
                                                                    st.integers(0, 255)), max_size=4),
       tail=st.binary(max_size=16))
def test_fuzz_pftrace(cut, flips, tail):
    data = bytearray(PFTRACE[:cut] + tail)
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    with tempfile.TemporaryDirectory(prefix="fuzz_") as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        (run / "1_results.pftrace").write_bytes(bytes(data))
        code, report, _ = _report(run)
        if code == 0 and report is not None and bytes(data) == PFTRACE:
            assert _kernels(report) == EXPECTED
