"""The benchmark's generators at unit-test sizes: the report's sums equal what the generators wrote.

benchmarks/reports/bench_report.py makes the same check at 1M and 10M dispatches and on 8 ranks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .reports_builders import report_one

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "reports"))
import make_kernel_trace  # noqa: E402
import make_rocpd  # noqa: E402


@pytest.mark.parametrize("count", [1, 5_000])
def test_kernel_trace_sums(tmp_path, count):
    _, total = make_kernel_trace.write(tmp_path / "run" / "n" / "4242_kernel_trace.csv", count, 120, seed=count)
    summary = report_one(tmp_path / "run")["summary"]
    assert (summary["dispatches"], summary["gpu_time_ns"]) == (count, total)
    assert summary["busy_ns"] == total  # the generator writes back-to-back kernels with gaps: nothing overlaps


@pytest.mark.parametrize("agents", [1, 3])
def test_rocpd_sums_and_devices(tmp_path, agents):
    _, total = make_rocpd.write(tmp_path / "run" / "n" / "4242_results.db", 3_000, 50, agents, seed=agents)
    run = report_one(tmp_path / "run")
    assert (run["summary"]["dispatches"], run["summary"]["gpu_time_ns"]) == (3_000, total)
    assert [t["device"] for t in run["timeline"]] == [f"agent {a + 2}" for a in range(agents)]
    assert sum(t["dispatches"] for t in run["timeline"]) == 3_000


def test_eight_ranks_merge(tmp_path):
    totals = [
        make_kernel_trace.write(
            tmp_path / "run" / "n" / f"rank{r}_{4300 + r}_kernel_trace.csv", 500, 40, r, pid=4300 + r
        )[1]
        for r in range(8)
    ]
    run = report_one(tmp_path / "run")
    assert (run["summary"]["dispatches"], run["summary"]["gpu_time_ns"]) == (4_000, sum(totals))
    assert [t["rank"] for t in run["timeline"]] == list(range(8))
    assert [t["kernel_time_sum_ns"] for t in run["timeline"]] == totals
