"""The CPU operator report (the embedded tracer on a machine without a GPU), from model objects as the readers fill
them: hotspots by self time with inclusive time beside it, no device timeline, no GPU wording, host memory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import pytest

from madengine_rocprof.reports import build_report, html_page, markdown
from madengine_rocprof.reports.model import DeviceTime, KernelStats, RunData, TimingSource
from madengine_rocprof.wrapper.contracts import WorkloadResult

# a nested training step: linear -> addmm; matmul -> mm; backward wrapper -> MmBackward0 -> mm (ns)
OPERATORS = {  # name: (calls, inclusive, self)
    "aten::linear": (40, 9_000_000, 500_000),
    "aten::addmm": (40, 8_500_000, 8_500_000),
    "aten::matmul": (20, 4_000_000, 200_000),
    "aten::mm": (60, 7_600_000, 7_600_000),
    "autograd::engine::evaluate_function: MmBackward0": (20, 4_100_000, 100_000),
    "MmBackward0": (20, 4_000_000, 400_000),
    "aten::softmax": (10, 1_200_000, 900_000),
    "aten::_softmax": (10, 300_000, 300_000),
    "aten::empty": (300, 600_000, 600_000),
    "aten::add_": (120, 2_400_000, 2_400_000),
    "aten::mul": (90, 1_800_000, 1_800_000),
    "aten::rsqrt": (30, 700_000, 700_000),
}
SELF_TOTAL = sum(s for _, _, s in OPERATORS.values())


def cpu_run(label: str = "cpu", scale: float = 1.0, rss: int | None = 3 * 2**30) -> RunData:
    src = TimingSource(path=Path("a/1_kernel_trace.csv"), rel="a/1_kernel_trace.csv", fmt="rocprofv3-csv",
                       process="a/1", pass_id=None, cpu_operators=True, has_timeline=True)
    src.kernels = {name: KernelStats(calls, total * scale, self_ns=own * scale)
                   for name, (calls, total, own) in OPERATORS.items()}
    src.dispatches = sum(c for c, _, _ in OPERATORS.values())
    # the CSV reader aggregates CPU rows like kernels: a "device" that must not become a device timeline
    src.devices = [DeviceTime(device="CPU", dispatches=src.dispatches, span_ns=30_000_000, busy_ns=29_000_000)]
    workload = {"model": "tiny_llama_v1", "status": "ok", "device": "cpu",
                "metrics": {"tokens_per_second": 1000.0 / scale, "peak_memory_allocated_bytes": None,
                            "peak_host_rss_bytes": rss}}
    return RunData(label=label, path=Path(label), timing=[src], workload=cast(WorkloadResult, workload))


def test_hotspots_by_self_time_with_inclusive_beside_it():
    run = build_report([cpu_run()])["runs"][0]
    by_self = sorted(OPERATORS, key=lambda n: -OPERATORS[n][2])
    assert [k["name"] for k in run["kernels"]] == by_self
    assert run["kernels"][0]["name"] == "aten::addmm" and run["kernels"][0]["total_ns"] == 8_500_000
    for k in run["kernels"]:
        calls, total, own = OPERATORS[k["name"]]
        assert (k["calls"], k["total_ns"], k["self_ns"]) == (calls, total, own)
        assert k["share"] == pytest.approx(own / SELF_TOTAL)
    summary = run["summary"]
    assert summary["time_basis"] == "self" and summary["gpu_time_ns"] == SELF_TOTAL
    # categories add self times: they sum to the host time once, not once per nesting level
    assert sum(c["total_ns"] for c in run["categories"]) == SELF_TOTAL
    assert sum(r["total_ns"] for r in run["roles"]) == SELF_TOTAL


def test_no_device_timeline_and_no_gpu_wording():
    report = build_report([cpu_run()])
    run = report["runs"][0]
    assert run["timeline"] == [] and run["summary"]["busy_ns"] is None
    text = markdown.render(report, top=5)
    for wording in ("GPU time", "GPU busy", "GPU-time", "kernel dispatches", "Kernel categories", "by total time"):
        assert wording not in text
    assert "### Top 5 CPU operators by self time" in text
    assert "no device timeline: CPU operators give no device busy, idle or overlap" in text
    assert "| self (ms) | self share | inclusive (ms) |" in text
    assert "peak host memory 3.00 GiB (RSS)" in text
    assert "| 3.00 (host RSS) |" in text


def test_same_top_n_in_markdown_and_html():
    report = build_report([cpu_run()])
    for top in (3, 10):
        text = markdown.render(report, top=top)
        page = html_page.render(report, top=top)
        assert f"Top {top} CPU operators by self time" in text and f"Top {top} CPU operators by self time" in page
        rows_md = [line for line in text.splitlines() if re.match(r"^\| \d+ \| ", line)]
        rows_html = re.findall(r"<tr><td class=\"l\">\d+</td>", page)
        assert len(rows_md) == len(rows_html) == top


def test_without_self_times_the_report_says_inclusive_times_overlap():
    data = cpu_run()
    for stats in data.timing[0].kernels.values():
        stats.self_ns = None
    report = build_report([data])
    run = report["runs"][0]
    assert run["summary"]["time_basis"] == "total"
    assert run["kernels"][0]["name"] == "aten::linear"  # inclusive: the outermost operator first
    text = markdown.render(report)
    assert "Top 10 CPU operators by inclusive time" in text and "inclusive times overlap and over-count" in text
    assert "so categories over-count" in text


def test_two_cpu_runs_ratios_read_one_way():
    """A run twice as slow with twice the memory: every ratio is 0.5x (above 1x is better, everywhere)."""
    base, slow = cpu_run("base"), cpu_run("slow", scale=2.0, rss=6 * 2**30)
    report = build_report([base, slow])
    row = report["comparison"][1]
    assert row["gpu_time_speedup"] == pytest.approx(0.5)
    assert row["throughput_speedup"] == pytest.approx(0.5)
    assert row["memory_saving"] == pytest.approx(0.5) and row["peak_memory_kind"] == "host"
    text = markdown.render(report)
    assert "| CPU operator self time (ms) | time speedup |" in text
    roles = text[text.index("### Time by role (ms)"):].split("\n\n")[1]  # the table: heading, blank, table
    slow_cells = [line.split(" | ")[-1].strip(" |") for line in roles.splitlines()[2:]]
    assert slow_cells and all(cell == "0.50x" for cell in slow_cells)


def test_cpu_and_gpu_runs_get_no_time_ratio():
    gpu = cpu_run("gpu")
    gpu.timing[0].cpu_operators = False
    report = build_report([cpu_run(), gpu])
    assert report["comparison"][1]["gpu_time_speedup"] is None


@pytest.mark.parametrize("fmt, recorder, other", [
    ("kineto", "a PyTorch profiler (Kineto) trace without GPU activity", "embedded tracer"),
    ("rocprofv3-csv", "the embedded tracer without a GPU", "PyTorch profiler"),
])
def test_the_note_names_what_recorded_the_operators(fmt, recorder, other):
    """A torch.profiler trace of the CPU is described as such, not as the embedded tracer's rows."""
    run = cpu_run()
    run.timing[0].fmt = fmt
    report = build_report([run])
    (note,) = [n for n in report["runs"][0]["notes"] if "CPU operators on the host only" in n]
    assert recorder in note and other not in note
    assert other not in markdown.render(report)


def test_host_memory_of_a_trace_is_said_for_what_it_is_and_never_compared():
    """torch.profiler counts host allocations from its own start (288 KiB in the README's example): shown in a unit
    that does not round it to 0.00 GiB, with what it leaves out, and no peak-memory figure in the comparison."""
    runs = []
    for label, peak in (("base", 294_920), ("new", 3 * 2**20)):
        run = cpu_run(label, rss=None)
        run.timing[0].fmt = "kineto"
        run.timing[0].peak_memory_bytes = {"CPU": peak}
        runs.append(run)
    report = build_report(runs)
    text = markdown.render(report)
    assert "host memory allocated while the profiler recorded, at most" in text and "is not counted" in text
    assert "288.01 KiB" in text and "3.00 MiB" in text and "0.00 GiB" not in text
    assert "peak allocated memory in the trace" not in text
    assert [(r["peak_memory_bytes"], r["peak_memory_kind"], r["memory_saving"]) for r in report["comparison"]] == [
        (None, None, None), (None, None, None)]


def test_the_readme_torch_profiler_example_on_a_cpu_reads_true(tmp_path, repo):
    """The README's snippet recorded here (no GPU): the report names the PyTorch profiler and shows no 0.00 GiB."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    readme = (repo / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Reports on the PyTorch profiler traces"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code
    (tmp_path / "record.py").write_text(code.group(1))
    env = {"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "record.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from madengine_rocprof.reports import load_runs

    text = markdown.render(build_report(load_runs([tmp_path / "my_torch_traces"])))
    assert "a PyTorch profiler (Kineto) trace without GPU activity" in text and "embedded tracer" not in text
    assert "host memory allocated while the profiler recorded, at most" in text and " GiB" not in text
