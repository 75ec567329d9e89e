"""The idle split and launch figures in the report (`report --json`: `idle_causes`, `launch`), on the Kineto
fixtures and on the embedded tracer's rocprofv3-format CSVs (kernel_trace + hip_api_trace with Correlation_Id):
the parts add up to the report's own idle time, to the nanosecond, per device and per iteration."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.reports import build_report, load_runs
from madengine_rocprof.tracer import convert

from .trace_frames import FIXTURES

GPU_FOLDERS = ["ours_h100_tt_v1_eager", "ours_h100_tt_v4_graph", "ours_h100_ddp_v1_2rank", "hta_mi250_minitoy",
               "hta_two_ranks", "kineto_after_fix", "kineto_gpu_metrics", "kineto_tb_resnet50",
               "ours_h200_tt_v1", "ours_h200_tt_v4", "tracelens_h100_bert", "tracelens_h100_falconsai",
               "tracelens_mi210_gpu_only", "tracelens_mi300_bert", "tracelens_mi300_falconsai",
               "tracelens_torch_compile_triton"]
PARTS = ("launch_ns", "sync_ns", "other_ranks_ns", "other_ns")


def unpacked_run(tmp_path: Path, fixture: str) -> Path:
    """A gpu_runs fixture's CSVs (stored gzip-compressed) unpacked as the tracer wrote them, under tmp_path/run/vm."""
    run_dir = tmp_path / "run"
    (run_dir / "vm").mkdir(parents=True)
    for path in (FIXTURES / "gpu_runs" / fixture / "vm").iterdir():
        if path.name.endswith(".csv.gz"):
            with gzip.open(path, "rb") as src, open(run_dir / "vm" / path.name.removesuffix(".gz"), "wb") as dst:
                shutil.copyfileobj(src, dst)
    return run_dir


def report_of(path: Path) -> dict:
    return dict(build_report(load_runs([path]))["runs"][0])


@pytest.mark.parametrize("folder", GPU_FOLDERS)
def test_parts_add_up_to_the_reports_idle_time(folder):
    run = report_of(FIXTURES / "kineto" / folder)
    causes = run["idle_causes"]
    timeline = {(t["origin"], t["device"]): t for t in run["timeline"]}
    assert causes is not None and not [n for n in causes["notes"] if "reader bug" in n]
    assert {(r["origin"], r["device"]) for r in causes["devices"]} == set(timeline)
    for row in causes["devices"]:
        t = timeline[(row["origin"], row["device"])]
        assert row["rank"] == t["rank"]
        assert row["idle_ns"] == t["idle_ns"] == sum(row[p] for p in PARTS)
        assert row["other_ns"] == sum(row["other"].values())
        assert [it["iteration"] for it in row["iterations"]] == [it["iteration"] for it in t["iterations"]]
        for mine, theirs in zip(row["iterations"], t["iterations"], strict=True):
            assert mine["idle_ns"] == theirs["idle_ns"] == sum(mine[p] for p in PARTS)
    json.dumps(run["idle_causes"], allow_nan=False)
    json.dumps(run["launch"], allow_nan=False)


def test_report_json_says_v1_is_launch_bound_and_v4_is_not(tmp_path, capsys):
    """TinyTransformer B8 S128, recorded by us: v1 eager and v4 with the whole step in one CUDA graph, on an H100
    (ours_h100_*) and an H200 (ours_h200_*)."""
    for folder, bound in (("ours_h100_tt_v1_eager", "launch"), ("ours_h100_tt_v4_graph", "device"),
                          ("ours_h200_tt_v1", "launch"), ("ours_h200_tt_v4", "device")):
        out = tmp_path / f"{folder}.json"
        assert main(["report", str(FIXTURES / "kineto" / folder), "--json", str(out)]) == 0
        [run] = json.loads(out.read_text())["runs"]
        assert run["idle_causes"]["bound"]["bound"] == bound
        [row] = run["idle_causes"]["devices"]
        if bound == "launch":
            share = row["launch_ns"] / row["span_ns"]
            assert run["idle_causes"]["bound"]["line"].startswith(f"launch-bound: {100 * share:.1f}%")
    text = capsys.readouterr().out
    assert "### Where idle time comes from" in text and "### Kernel launches" in text


def tracer_csvs(tmp_path: Path, api: bool) -> Path:
    """The embedded tracer's CSVs for TinyTransformer v1 (H200), made from its Chrome trace by the tracer's own
    converter, as the CUPTI backend makes them."""
    (path,) = (FIXTURES / "kineto" / "ours_h200_tt_v1").glob("*.json.gz")
    raw = tmp_path / "v1.json"
    with gzip.open(path, "rb") as src, open(raw, "wb") as dst:
        shutil.copyfileobj(src, dst)
    host = tmp_path / "run" / "host"
    host.mkdir(parents=True)
    convert.write_files(str(raw), str(host), "123_", cpu=False, api=api, memcpy=True)
    return tmp_path / "run"


def test_our_tracers_csvs_with_api_calls(tmp_path):
    run = report_of(tracer_csvs(tmp_path, api=True))
    [source] = run["sources"]
    assert source["format"] == "rocprofv3-csv"
    [row] = run["idle_causes"]["devices"]
    [t] = run["timeline"]
    assert row["idle_ns"] == t["idle_ns"] == sum(row[p] for p in PARTS)
    assert row["linked_share"] == 1.0 and row["other"]["unlinked_ns"] == 0
    assert run["idle_causes"]["bound"]["bound"] == "launch"
    # the same launches as the Kineto trace they came from: the CSV keeps each call's correlation id and times
    kineto = report_of(FIXTURES / "kineto" / "ours_h200_tt_v1")["launch"]["processes"][0]
    ours = run["launch"]["processes"][0]
    assert ours["delay"]["max_ns"] == kineto["delay"]["max_ns"]
    assert ours["cpu_duration"]["p50_ns"] == pytest.approx(kineto["cpu_duration"]["p50_ns"], abs=20)
    assert any("no CPU operator records" in n for n in run["idle_causes"]["notes"])


def test_lightweight_kernel_trace_only_says_what_it_cannot_tell(tmp_path, capsys):
    run_dir = tracer_csvs(tmp_path, api=False)
    run = report_of(run_dir)
    causes = run["idle_causes"]
    assert causes["bound"]["bound"] == "unknown"
    [row] = causes["devices"]
    assert row["other"]["unlinked_ns"] == row["idle_ns"] == run["timeline"][0]["idle_ns"]
    assert run["launch"] is None
    assert main(["report", str(run_dir)]) == 0
    text = capsys.readouterr().out
    assert "cannot be split into launch-bound, synchronization and waiting for other ranks" in text
    assert "--hip-trace" in text and "`lightweight` core profile traces kernels only" in text


def test_our_tracers_h100_run_with_api_calls(tmp_path):
    """The embedded tracer's CUPTI backend with --hip-trace on an H100 (TinyTransformer v1 eager): kernel_trace and
    hip_api_trace CSVs linked by Correlation_Id; stored gzip-compressed, unpacked here as the run wrote them."""
    run_dir = unpacked_run(tmp_path, "ours_h100_v1_1gpu_api")
    run = report_of(run_dir)
    [row] = run["idle_causes"]["devices"]
    [t] = run["timeline"]
    assert row["idle_ns"] == t["idle_ns"] == sum(row[p] for p in PARTS)
    assert row["linked_share"] == 1.0  # every kernel's Correlation_Id has its API row
    assert run["idle_causes"]["bound"]["bound"] == "launch"
    assert row["launch_ns"] / row["span_ns"] > 0.5
    [process] = run["launch"]["processes"]
    assert process["launches"] == t["dispatches"]  # every kernel came from a launch call
    assert process["by_call"] == {"cuLaunchKernel": 365, "cuLaunchKernelEx": 1380, "cudaLaunchKernel": 4613}


def test_copies_to_the_host_count_on_their_gpu_in_the_tables(tmp_path):
    """Our tracer's 2-rank H100 run (kernels and copies, no API calls): a device-to-host copy names the CPU as its
    destination; the tables count it on its GPU, as the timeline does, so every device gets its (unlinked) idle row
    and no 'reader bug' note."""
    run_dir = unpacked_run(tmp_path, "ours_h100_2rank")
    run = report_of(run_dir)
    causes = run["idle_causes"]
    assert len(causes["devices"]) == 2 and not any("reader bug" in n for n in causes["notes"])
    for row, timeline in zip(causes["devices"], run["timeline"], strict=True):
        assert row["other"]["unlinked_ns"] == row["idle_ns"] == timeline["idle_ns"]
