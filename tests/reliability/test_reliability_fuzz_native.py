"""Issue 33's red-team pass over the native readers (reports/native/csv_columns.c, kineto_scan.c), kept as tests.

Cases are generated from real rocprofv3 kernel traces and real Kineto traces by a seeded generator
(native_fuzz_cases.py: case i is the same every run) and read by `report --json` with the native readers on and off:
the same exit code and report (or the same error), exit 0 or 2 only, never a traceback or the bug handler, and a
valid-but-unusual file (escapes, `}, {` in names, CRLF, any key order, 0-3 decimals, int64 limits, many distinct
names, a multi-MiB line) is never refused. The Kineto scanner is also fed in pieces of 1-64 bytes, so every token
is cut at every place. The pass measured 2,000 cases a reader plus the ASan/UBSan build
(`python -m tests.reliability.native_fuzz_cases --count 2000`; docs/architecture.md); this keeps a sample that runs
in well under a minute on 2 cores.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from madengine_rocprof.reports import csv_native, kineto_native

from .native_fuzz_cases import pieces_case, run_case

CASES = 120  # per reader
PIECES = (1, 3, 7, 64)


@pytest.mark.skipif(csv_native.library() is None, reason=f"no native CSV reader: {csv_native.why_not}")
def test_generated_kernel_traces_read_the_same_natively(tmp_path: Path) -> None:
    outcomes = [run_case("csv", i, tmp_path) for i in range(CASES)]
    # the sample reaches both paths and both outcomes (else it tests less than it claims)
    assert {o["native"] for o in outcomes} == {True, False} and {o["code"] for o in outcomes} == {0, 2}


@pytest.mark.skipif(kineto_native.library() is None, reason=f"no native Kineto scanner: {kineto_native.why_not}")
def test_generated_kineto_traces_read_the_same_natively(tmp_path: Path) -> None:
    outcomes = [run_case("kineto", i, tmp_path) for i in range(CASES)]
    assert {o["native"] for o in outcomes} == {True, False} and {o["code"] for o in outcomes} == {0, 2}


@pytest.mark.skipif(kineto_native.library() is None, reason=f"no native Kineto scanner: {kineto_native.why_not}")
@pytest.mark.parametrize("piece", PIECES)
def test_the_kineto_scanner_fed_in_pieces_reads_the_same(piece: int, tmp_path: Path) -> None:
    outcomes = [pieces_case(i, tmp_path, piece) for i in range(4)]
    assert all(o["code"] == 0 for o in outcomes) and any(o["native"] for o in outcomes)
