"""One file-kind vocabulary: the wrapper's manifest and the reports name rocprofv3's files the same way."""
from __future__ import annotations

from pathlib import Path

import pytest

from madengine_rocprof.reports.discover import FORMATS, classify
from madengine_rocprof.wrapper import file_kinds


@pytest.mark.parametrize("name, kind, prefix", [
    ("1234_kernel_trace.csv", "kernel_trace", "1234"),
    ("rank3_1234_kernel_trace.csv", "kernel_trace", "rank3_1234"),
    ("kernel_trace.csv", "kernel_trace", ""),
    ("1234_counter_collection.csv", "counter_collection", "1234"),
    ("1234_memory_copy_trace.csv", "memory_copy_trace", "1234"),
    ("1234_results.db", "rocpd", "1234"),
    ("1234_results.json", "results_json", "1234"),
    ("1234_results.pftrace", "perfetto", "1234"),
    ("1234_results.csv", "legacy_results", "1234"),
    ("1234_results.stats.csv", "results.stats", "1234"),
    ("1234_hip_api_trace.csv", "hip_api_trace", "1234"),
    ("1234_profile.ncu-rep", "ncu_report", "1234"),
    ("report.nsys-rep", "nsys_report", "report"),
    ("notes.txt", "other", "notes"),
])
def test_kinds_and_prefixes(name, kind, prefix):
    assert file_kinds.split_name(name) == (kind, prefix)
    assert file_kinds.kind_of(f"host/{name}") == kind


def test_reports_read_the_kinds_by_the_same_names(tmp_path: Path):
    for kind, fmt in FORMATS.items():
        suffix = next(s for s, k in file_kinds.SUFFIXES if k == kind)
        path = tmp_path / f"7_{suffix}"
        path.write_text('{"rocprofiler-sdk-tool": []}' if kind == file_kinds.RESULTS_JSON else "x\n")
        assert classify(path) == fmt
