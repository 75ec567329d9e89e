"""`madengine-rocprof report` end to end on v1..v4 look-alike run directories: comparison, HTML, JSON, Perfetto."""
from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from madengine_rocprof.cli import main

from .reports_builders import TT_MEMORY, TT_THROUGHPUT, expected_from_dispatches, tt_dispatches, write_trace


def run_cli(args, capsys) -> tuple[int, str]:
    code = main(["report", *map(str, args)])
    return code, capsys.readouterr().out


def test_comparison_against_independent_numbers(tt_runs, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    code, text = run_cli([*tt_runs, "--baseline", tt_runs[0], "--json", out_json], capsys)
    assert code == 0
    report = json.loads(out_json.read_text())
    assert report["baseline"] == tt_runs[0].name
    gpu = {}
    for version, row in zip(("v1", "v2", "v3", "v4"), report["comparison"], strict=True):
        expected = expected_from_dispatches(tt_dispatches(version))
        gpu[version] = sum(v[1] for v in expected.values())
        assert row["dispatches"] == sum(v[0] for v in expected.values())
        assert row["unique_kernels"] == len(expected)
        assert row["gpu_time_ns"] == gpu[version]
        assert row["gpu_time_speedup"] == pytest.approx(gpu["v1"] / gpu[version])
        assert row["tokens_per_second"] == TT_THROUGHPUT[version]
        assert row["throughput_speedup"] == pytest.approx(TT_THROUGHPUT[version] / TT_THROUGHPUT["v1"])
        # every ratio reads one way, above 1x is better: memory saving = baseline / run, like the time speedup
        assert row["memory_saving"] == pytest.approx(TT_MEMORY["v1"] / TT_MEMORY[version])
        assert row["peak_memory_kind"] == "device"
        assert row["top_kernel"] == max(expected, key=lambda n: expected[n][1])
    # the printed table carries the same numbers
    assert "## Comparison (baseline: tiny_llama_v1__rocprofv3_compute)" in text
    v3 = next(line for line in text.splitlines() if line.startswith("| tiny_llama_v3"))
    assert f"{gpu['v3'] / 1e6:,.3f}" in v3 and f"{gpu['v1'] / gpu['v3']:.2f}x" in v3
    assert f"{TT_THROUGHPUT['v3'] / TT_THROUGHPUT['v1']:.2f}x" in v3


def test_categories_sum_to_gpu_time(tt_runs, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    _, text = run_cli([*tt_runs, "--json", out_json], capsys)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| run | GEMM |"))
    assert header.startswith(
        "| run | GEMM | attention | normalization | elementwise | reduction | optimizer | memory copy |"
    )
    for version in ("v1", "v2", "v3", "v4"):
        gemm_ns = sum(e - s for name, s, e in tt_dispatches(version) if name.startswith("Cijk_"))
        row = next(line for line in lines[lines.index(header):] if line.startswith(f"| tiny_llama_{version}__"))
        assert row.split(" | ")[1] == f"{gemm_ns / 1e6:,.3f}"
    for run in json.loads(out_json.read_text())["runs"]:
        assert sum(c["total_ns"] for c in run["categories"]) == run["summary"]["gpu_time_ns"]
        assert sum(c["calls"] for c in run["categories"]) == run["summary"]["dispatches"]
        by = {c["category"]: c["total_ns"] for c in run["categories"]}
        gemm = sum(k["total_ns"] for k in run["kernels"] if k["name"].startswith("Cijk_"))
        assert by["GEMM"] == gemm > 0


def test_runner_output_directory_expands_to_its_runs(tt_runs, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    code, _ = run_cli([tt_runs[0].parent, "--json", out_json, "--baseline", "tiny_llama_v2__rocprofv3_compute"], capsys)
    assert code == 0
    report = json.loads(out_json.read_text())
    assert [r["label"] for r in report["runs"]] == [p.name for p in tt_runs]
    assert report["baseline"] == "tiny_llama_v2__rocprofv3_compute"
    assert [r["baseline"] for r in report["comparison"]] == [False, True, False, False]


class PageChecker(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: dict[str, int] = {}
        self.stack: list[str] = []
        self.external: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for key, value in attrs:
            if key in ("src", "href") and value and not value.startswith("#"):
                self.external.append(value)
        if tag not in ("meta", "br", "img", "link", "input"):  # void elements never close
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def test_html_page_is_self_contained_with_charts(tt_runs, tmp_path, capsys):
    page = tmp_path / "r.html"
    assert run_cli([*tt_runs, "--html", page, "-q"], capsys)[0] == 0
    checker = PageChecker()
    checker.feed(page.read_text())
    assert checker.stack == []
    assert checker.external == [] and "<script" not in page.read_text()
    # comparison: category chart + throughput chart; per run: top kernels + category share
    assert checker.tags["svg"] == 2 + 2 * len(tt_runs)
    text = "".join(checker.text)
    for version in ("v1", "v2", "v3", "v4"):
        assert f"tiny_llama_{version}__rocprofv3_compute" in text
    assert f"{TT_THROUGHPUT['v3']:,.0f}" in text


def test_html_escapes_kernel_names(tmp_path, capsys):
    write_trace(tmp_path / "run" / "h" / "1_kernel_trace.csv", [("<script>alert(1)</script> & co", 1, 5)])
    page = tmp_path / "r.html"
    assert run_cli([tmp_path / "run", "--html", page, "-q"], capsys)[0] == 0
    assert "<script>" not in page.read_text() and "&lt;script&gt;" in page.read_text()


def test_perfetto_trace_structure(tt_runs, tmp_path, capsys):
    out = tmp_path / "pf"
    assert run_cli([tt_runs[0], tt_runs[2], "--perfetto", out, "-q"], capsys)[0] == 0
    files = sorted(out.glob("*.perfetto.json"))
    assert [f.name for f in files] == [f"{tt_runs[0].name}.perfetto.json", f"{tt_runs[2].name}.perfetto.json"]
    trace = json.loads(files[1].read_text())
    events = trace["traceEvents"]
    dispatches = tt_dispatches("v3")
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(dispatches)
    for event in events:
        assert event["ph"] in ("X", "M")
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int) and isinstance(event["name"], str)
    t0 = dispatches[0][1]
    for event, (name, start, end) in zip(complete, dispatches, strict=True):
        assert event["name"] == name
        assert event["ts"] == pytest.approx((start - t0) / 1e3) and event["dur"] == pytest.approx((end - start) / 1e3)
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in complete} <= named
    assert any(e["name"] == "process_name" for e in events)


def test_perfetto_skips_stats_only_runs(tmp_path, capsys):
    stats = tmp_path / "run" / "h" / "1_kernel_stats.csv"
    stats.parent.mkdir(parents=True)
    stats.write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n"k",2,10,5,100,4,6,1\n')
    assert main(["report", str(tmp_path / "run"), "--perfetto", str(tmp_path / "pf"), "-q"]) == 0
    assert "no per-dispatch trace" in capsys.readouterr().err
    assert not list((tmp_path / "pf").glob("*")) if (tmp_path / "pf").exists() else True


def test_duplicate_directory_names_get_distinct_labels(tmp_path, capsys):
    for side in ("a", "b"):
        write_trace(tmp_path / side / "run" / "h" / "1_kernel_trace.csv", [("k", 1, 5 if side == "a" else 9)])
    out_json = tmp_path / "r.json"
    assert run_cli([tmp_path / "a" / "run", tmp_path / "b" / "run", "--json", out_json, "-q"], capsys)[0] == 0
    report = json.loads(out_json.read_text())
    assert [r["label"] for r in report["runs"]] == ["a/run", "b/run"]
    assert report["comparison"][1]["gpu_time_speedup"] == pytest.approx(4 / 8)


def test_run_without_profiler_output_but_with_workload_result(tmp_path, capsys):
    """A plain timing run (no tool) still joins the comparison with its throughput."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "workload_result.json").write_text(json.dumps({"metrics": {"tokens_per_second": 100.0}}))
    write_trace(tmp_path / "prof" / "h" / "1_kernel_trace.csv", [("k", 1, 5)])
    (tmp_path / "prof" / "workload_result.json").write_text(json.dumps({"metrics": {"tokens_per_second": 50.0}}))
    out_json = tmp_path / "r.json"
    code, text = run_cli([tmp_path / "plain", tmp_path / "prof", "--json", out_json], capsys)
    assert code == 0
    rows = json.loads(out_json.read_text())["comparison"]
    assert rows[0]["gpu_time_ns"] is None and rows[1]["throughput_speedup"] == pytest.approx(0.5)
    assert "no kernel timing in this run" in text


def test_throughput_from_run_json_when_no_workload_result(tmp_path, capsys):
    run_dir = tmp_path / "m__rocprofv3"
    write_trace(run_dir / "profiler" / "h" / "1_kernel_trace.csv", [("k", 1, 5)])
    (run_dir / "run.json").write_text(json.dumps({"status": "FAILURE", "model": "m",
                                                  "performance": {"value": 1234.5, "metric": "tokens_per_second"}}))
    out_json = tmp_path / "r.json"
    assert run_cli([run_dir, "--json", out_json, "-q"], capsys)[0] == 0
    row = json.loads(out_json.read_text())["comparison"][0]
    assert row["tokens_per_second"] == 1234.5 and row["status"] == "FAILURE"
