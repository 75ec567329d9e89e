"""NVIDIA mapping: profiles -> ncu metric sets / warp sampling / embedded tracer, and the format converters."""
from __future__ import annotations

import csv
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from madengine_rocprof import wrapper
from madengine_rocprof.errors import UserError
from madengine_rocprof.wrapper import nvidia, options, rocprof_csv


def read_csv(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_compute_bound_runs_ncu_and_converts_to_long_counter_collection(tmp_path, make_env, recorded):
    env = make_env("ncu", FAKE_DISPATCHES="4", MADENGINE_ROCPROF_PROFILE="rocprofv3_compute")
    (tmp_path / "compute_bound.txt").write_text("pmc: SQ_WAVES SQ_INSTS_VALU\n")
    app = [sys.executable, "-c", "pass"]
    result = wrapper.run(["--hip-trace", "--kernel-trace", "-i", "compute_bound.txt", "--output-format", "pftrace"],
                         app, str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    assert result.outcome == "ok", result.manifest
    argv = recorded()[-1]["argv"]
    assert argv[-3:] == app and "--" not in argv
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert metrics == nvidia.NCU_METRICS["compute_bound"] + nvidia.LAUNCH_METRICS
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert any("SQ_WAVES" in m and "no meaning on NVIDIA" in m for m in result.manifest["messages"])
    # Independent check: every (kernel, requested metric) value of the report appears once in the long CSV.
    [report] = list((tmp_path / "o").rglob("*.ncu-rep"))
    rep = json.loads(report.read_text())
    counter_files = [o for o in result.manifest["outputs"] if o["kind"] == "counter_collection"]
    assert len(counter_files) == 1
    rows = read_csv(tmp_path / "o" / counter_files[0]["path"])
    assert list(rows[0]) == list(rocprof_csv.COUNTER_COLLECTION)
    got = {(int(r["Dispatch_Id"]), r["Counter_Name"]): float(r["Counter_Value"]) for r in rows}
    want = {(k["id"] + 1, m): float(k["values"][m]) for k in rep["rows"] for m in nvidia.NCU_METRICS["compute_bound"]}
    assert got == want and len(rows) == len(want)
    assert {int(r["Process_Id"]) for r in rows} == {k["pid"] for k in rep["rows"]}
    assert Path(counter_files[0]["path"]).name == f"{rep['rows'][0]['pid']}_counter_collection.csv"
    assert rows[0]["Grid_Size"] == str(128 * 64) and rows[0]["Workgroup_Size"] == "128"
    assert result.manifest["dispatch_count"] == 4


def test_memory_bound_inferred_from_counter_names(make_env):
    p = wrapper.plan(["--pmc", "FETCH_SIZE", "WRITE_SIZE"], ["app"], "/o", env=make_env("ncu"))
    assert p.profile == "memory_bound" and p.profiler.name == "ncu"
    assert "dram__bytes_read.sum" in p.argv[p.argv.index("--metrics") + 1]


def test_pc_sampling_uses_warp_state_sections(make_env):
    p = wrapper.plan(["--kernel-trace"], ["app"], "/o", env=make_env("ncu", MADENGINE_ROCPROF_PROFILE="pc_sampling"))
    sections = [p.argv[i + 1] for i, a in enumerate(p.argv) if a == "--section"]
    assert sections == ["WarpStateStats", "SourceCounters"]


def test_trace_profiles_on_nvidia_use_the_embedded_tracer(make_env):
    for profile in ("lightweight", "multi_gpu", "rocprofv3_communication"):
        p = wrapper.plan(["--kernel-trace", "--hsa-trace", "--rccl-trace"], ["python3", "x.py"], "/o",
                         env=make_env("ncu", MADENGINE_ROCPROF_PROFILE=profile))
        assert p.profiler.name == "embedded" and p.argv == ["python3", "x.py"]
        assert p.env_added["MADENGINE_ROCPROF_TRACER_OUT"] == "/o"
        assert any("AMD-only API traces ignored" in m and "--hsa-trace" in m for m in p.messages)


@pytest.mark.parametrize("profile, match", [
    ("rocprofv3_full", "no meaning on NVIDIA"),
    ("my_custom_tool", "unknown profile `my_custom_tool`"),
])
def test_meaningless_or_unknown_profiles_fail_clearly(make_env, profile, match):
    with pytest.raises(UserError, match=match) as info:
        wrapper.plan(["--profile", profile, "--kernel-trace", "--pmc", "SQ_WAVES"], ["app"], "/o", env=make_env("ncu"))
    assert info.value.where == "--profile"
    with pytest.raises(UserError, match=match):  # anywhere before `--`, not only first
        wrapper.plan(["--kernel-trace", "--pmc", "SQ_WAVES", "--profile", profile], ["app"], "/o", env=make_env("ncu"))


def test_amd_only_profile_in_the_environment_still_fails_clearly(make_env):
    with pytest.raises(UserError, match="no meaning on NVIDIA") as info:
        wrapper.plan(
            ["--pmc", "SQ_WAVES"], ["app"], "/o", env=make_env("ncu", MADENGINE_ROCPROF_PROFILE="rocprofv3_full")
        )
    assert info.value.where == "MADENGINE_ROCPROF_PROFILE"


@pytest.mark.parametrize("args, inferred, profiler", [
    (["--pmc", "SQ_WAVES"], "compute_bound", "ncu"),
    (["--pmc", "FETCH_SIZE"], "memory_bound", "ncu"),
    (["--kernel-trace"], "lightweight", "embedded"),
])
def test_unknown_profile_in_the_environment_is_ignored_with_a_warning(make_env, args, inferred, profiler):
    # e.g. a sampler's name left in a merged environment: the run goes on, profile inferred from the options.
    env = make_env("ncu", MADENGINE_ROCPROF_PROFILE="gpu_info_power_profiler")
    p = wrapper.plan(args, ["python3", "x.py"], "/o", env=env)
    assert (p.profile, p.profiler.name) == (inferred, profiler)
    assert any("MADENGINE_ROCPROF_PROFILE=gpu_info_power_profiler" in m and "ignored" in m for m in p.messages)
    assert f"profile inferred from the options: {inferred}" in p.messages
    # The flag beats the environment, known or not.
    p = wrapper.plan(["--profile", "memory_bound", *args], ["python3", "x.py"], "/o", env=env)
    assert p.profile == "memory_bound" and not any("ignored" in m for m in p.messages)


def test_ncu_refuses_traces_and_missing_ncu_is_no_profiler(make_env):
    with pytest.raises(UserError, match="ncu replays kernels"):
        wrapper.plan(["--kernel-trace"], ["app"], "/o", env=make_env("ncu", MADENGINE_ROCPROF_PROFILER="ncu"))
    with pytest.raises(UserError) as info:
        wrapper.plan(["--pmc", "SQ_WAVES"], ["app"], "/o", env=make_env())
    assert info.value.exit_code == 127


def test_kernel_filters_become_one_ncu_regex(make_env):
    p = wrapper.plan(["--pmc", "SQ_WAVES", "--kernel-include-regex", "gemm", "--kernel-exclude-regex", "elementwise"],
                     ["app"], "/o", env=make_env("ncu"))
    assert p.argv[p.argv.index("--kernel-name") + 1] == "regex:^(?=.*(?:gemm))(?!.*(?:elementwise))"


def test_ncu_raw_csv_parser_handles_units_commas_and_na():
    text = "\n".join([
        "==PROF== Disconnected from process 99",
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","dram__bytes_read.sum","lts__t_sector_hit_rate.pct","launch__registers_per_thread"',
        '"","","","","","","","","","","","byte","%","register/thread"',
        '"0","99","python","h","k1(float*)","1","7","(256, 1, 1)","(10, 2, 1)","0","9.0","1,048,576","97.5","32"',
        '"1","99","python","h","k2","1","7","(32, 1, 1)","(1, 1, 1)","1","9.0","n/a","50","16"',
    ])
    rows = nvidia.ncu_raw_to_rows(text)[99]
    assert [(r[1], r[15], r[16]) for r in rows] == [(1, "dram__bytes_read.sum", 1048576.0),
                                                   (1, "lts__t_sector_hit_rate.pct", 97.5),
                                                   (2, "lts__t_sector_hit_rate.pct", 50.0)]
    assert rows[0][6] == 256 * 10 * 2 and rows[0][12] == 32 and rows[2][2] == "Agent 1"


def test_nsys_sqlite_converter(tmp_path):
    db = tmp_path / "nsys_1.sqlite"
    con = sqlite3.connect(db)
    con.execute("create table StringIds(id integer, value text)")
    con.execute("create table CUPTI_ACTIVITY_KIND_KERNEL(start int, end int, deviceId int, streamId int,"
                " correlationId int, globalPid int, demangledName int, gridX int, gridY int, gridZ int, blockX int,"
                " blockY int, blockZ int, registersPerThread int, staticSharedMemory int, dynamicSharedMemory int)")
    con.executemany("insert into StringIds values (?, ?)", [(1, "gemm"), (2, "relu")])
    pid = 4242
    gpid = pid << 24
    kernels = [
        (100, 150, 0, 7, 1, gpid, 1, 4, 1, 1, 128, 1, 1, 64, 0, 1024),
        (160, 170, 0, 7, 2, gpid, 2, 1, 1, 1, 32, 1, 1, 16, 0, 0),
        (180, 260, 0, 7, 3, gpid, 1, 4, 1, 1, 128, 1, 1, 64, 0, 1024),
    ]
    con.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (" + ",".join("?" * 16) + ")", kernels)
    con.commit()
    con.close()
    written = nvidia.convert_nsys([str(db)], [])
    trace = read_csv(tmp_path / f"{pid}_kernel_trace.csv")
    assert [(r["Kernel_Name"], int(r["End_Timestamp"]) - int(r["Start_Timestamp"])) for r in trace] == \
        [("gemm", 50), ("relu", 10), ("gemm", 80)]
    stats = {r["Name"]: r for r in read_csv(tmp_path / f"{pid}_kernel_stats.csv")}
    assert stats["gemm"]["Calls"] == "2" and stats["gemm"]["TotalDurationNs"] == "130"
    assert len(written) == 2


# ---------------------------------------------------------------- which ncu raw-page columns become counters

def _ncu_run(tmp_path, make_env, dispatches: int, **env_extra):
    env = make_env("ncu", FAKE_DISPATCHES=str(dispatches), **env_extra)
    result = wrapper.run(["--pmc", "SQ_WAVES"], [sys.executable, "-c", "pass"], str(tmp_path / "o"), env=env,
                         cwd=str(tmp_path))
    assert result.outcome == "ok", result.manifest
    [report] = list((tmp_path / "o").rglob("*.ncu-rep"))
    [counters] = [o["path"] for o in result.manifest["outputs"] if o["kind"] == "counter_collection"]
    return result, json.loads(report.read_text()), read_csv(tmp_path / "o" / counters)


def test_ncu_conversion_keeps_exactly_the_requested_metrics_per_dispatch(tmp_path, make_env):
    # The real raw page (H100, ncu 2025.3) had 242 columns per kernel for 10 requested metrics: device__attribute_*,
    # nvlink__*, numa__*, profiler__*, and the .min/.max/.avg/.sum siblings of each requested metric.
    result, rep, rows = _ncu_run(tmp_path, make_env, 5)
    requested = nvidia.NCU_METRICS["compute_bound"]
    assert len(rep["columns"]) > 3 * len(requested)  # the fake really prints the extra columns
    assert any(c.startswith("device__attribute_") for c in rep["columns"])
    assert {"sm__cycles_elapsed.sum", "sm__throughput.max.pct_of_peak_sustained_elapsed"} <= set(rep["columns"])
    by_dispatch: dict[int, list[dict]] = {}
    for r in rows:
        by_dispatch.setdefault(int(r["Dispatch_Id"]), []).append(r)
    assert sorted(by_dispatch) == [k["id"] + 1 for k in rep["rows"]] == [1, 2, 3, 4, 5]
    clock = 0
    for kernel in rep["rows"]:
        got = by_dispatch[kernel["id"] + 1]
        assert [r["Counter_Name"] for r in got] == requested  # one row each, in the order asked
        for r in got:
            assert float(r["Counter_Value"]) == pytest.approx(float(kernel["values"][r["Counter_Name"]]))
        # Per-dispatch columns: the same on every row of the dispatch, taken from the report.
        duration = kernel["values"]["gpu__time_duration.sum"]
        assert {(r["Kernel_Name"], int(r["Start_Timestamp"]), int(r["End_Timestamp"]), int(r["Correlation_Id"]),
                 int(r["VGPR_Count"]), int(r["LDS_Block_Size"])) for r in got} == {
            (kernel["name"], clock, clock + duration, kernel["id"] + 1,
             kernel["values"]["launch__registers_per_thread"],
             kernel["values"]["launch__shared_mem_per_block_static"]
             + kernel["values"]["launch__shared_mem_per_block_dynamic"])}
        clock += duration  # ncu replays kernels one at a time: back-to-back on a replay clock
    kernel_ids = {r["Kernel_Name"]: r["Kernel_Id"] for r in rows}
    assert len(set(kernel_ids.values())) == len(kernel_ids) == len({k["name"] for k in rep["rows"]})
    assert result.manifest["dispatch_count"] == 5
    assert not any("roll-up" in m or "no value" in m for m in result.manifest["messages"])


def test_user_metrics_fall_back_to_the_closest_rollup_and_keep_asked_launch_attributes(tmp_path, make_env):
    asked = "gpu__time_duration.sum,dram__bytes_read,launch__grid_size,launch__registers_per_thread"
    result, rep, rows = _ncu_run(tmp_path, make_env, 2, MADENGINE_ROCPROF_NCU_METRICS=asked)
    assert "dram__bytes_read" not in rep["columns"]  # a bare counter name comes back only as roll-ups
    for kernel in rep["rows"]:
        got = {r["Counter_Name"]: float(r["Counter_Value"]) for r in rows if int(r["Dispatch_Id"]) == kernel["id"] + 1}
        v = kernel["values"]
        # launch__registers_per_thread is the wrapper's VGPR_Count column, not a counter row.
        assert got == {"gpu__time_duration.sum": v["gpu__time_duration.sum"],
                       "dram__bytes_read": v["dram__bytes_read.sum"], "launch__grid_size": v["launch__grid_size"]}
    assert any("dram__bytes_read" in m and "dram__bytes_read.sum" in m for m in result.manifest["messages"])


def test_section_profiles_keep_section_metrics_without_ncu_attributes(tmp_path, make_env):
    _, rep, rows = _ncu_run(tmp_path, make_env, 2, MADENGINE_ROCPROF_PROFILE="pc_sampling")
    # ncu picks a section's metric names, so all columns stay except ncu's attributes and the launch columns.
    names = [r["Counter_Name"] for r in rows if r["Dispatch_Id"] == "1"]
    attributes = [c for c in rep["columns"] if c.startswith(("device__", "nvlink__", "numa__", "c2clink__",
                                                             "profiler__", "launch__"))]
    assert attributes and names == [c for c in rep["columns"] if c not in attributes]
    assert "smsp__average_warp_latency_issue_stalled_barrier.ratio" in names
    assert "smsp__pcsamp_sample_count.sum" in names


def test_pick_columns_prefers_the_exact_name_then_sum_avg_max_min():
    header = ["sm__cycles_elapsed.avg", "sm__cycles_elapsed.max", "sm__cycles_elapsed.sum",
              "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__throughput.max.pct_of_peak_sustained_elapsed",
              "lts__t_sector_hit_rate.pct", "dram__bytes_read.max", "dram__bytes_read.avg"]
    chosen, missing = nvidia.pick_columns(header, [
        "sm__cycles_elapsed.avg", "sm__cycles_elapsed.min", "sm__cycles_elapsed",
        "sm__throughput.sum.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct", "lts__t_sector_hit_rate",
        "dram__bytes_read", "dram__bytes_write.sum"])
    assert chosen == {"sm__cycles_elapsed.avg": "sm__cycles_elapsed.avg",
                      "sm__cycles_elapsed.min": "sm__cycles_elapsed.sum",
                      "sm__cycles_elapsed": "sm__cycles_elapsed.sum",
                      "sm__throughput.sum.pct_of_peak_sustained_elapsed":
                          "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                      "lts__t_sector_hit_rate.pct": "lts__t_sector_hit_rate.pct",
                      "dram__bytes_read": "dram__bytes_read.avg"}
    assert missing == ["lts__t_sector_hit_rate", "dram__bytes_write.sum"]


def test_ncu_raw_parser_without_units_row_keeps_dispatch_zero_and_notes_missing_metrics():
    text = "\n".join([
        '"ID","Process ID","Kernel Name","Block Size","Grid Size","device__attribute_clock_rate",'
        '"gpu__time_duration.sum","sm__cycles_elapsed.avg","sm__cycles_elapsed.sum"',
        '"0","7","k0","(64, 1, 1)","(2, 1, 1)","1755000","100","5.5","44"',
        '"1","7","k1","(64, 1, 1)","(2, 1, 1)","1755000","30","6.5","52"',
    ])
    notes: list[str] = []
    rows = nvidia.ncu_raw_to_rows(text, ["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "dram__bytes_read.sum"],
                                  notes)[7]
    assert [(r[1], r[8], r[15], r[16], r[17], r[18]) for r in rows] == [
        (1, "k0", "gpu__time_duration.sum", 100.0, 0, 100), (1, "k0", "sm__cycles_elapsed.avg", 5.5, 0, 100),
        (2, "k1", "gpu__time_duration.sum", 30.0, 100, 130), (2, "k1", "sm__cycles_elapsed.avg", 6.5, 100, 130)]
    assert notes == ["ncu report has no value for requested metric(s): dram__bytes_read.sum"]

def test_requested_metrics_reads_only_ncu_options():
    argv = nvidia.ncu_argv("ncu", "memory_bound", "/o", options.Parsed(), {})
    assert nvidia.requested_metrics(argv) == nvidia.NCU_METRICS["memory_bound"]
    assert nvidia.requested_metrics(["ncu", "--metrics", "a.sum,b.avg", "--metrics", "a.sum,launch__grid_size"]) == \
        ["a.sum", "b.avg", "launch__grid_size"]


def test_manifest_duration_is_the_runs_not_the_conversions(tmp_path, make_env, monkeypatch):
    import time

    from madengine_rocprof.wrapper import nvidia

    convert = nvidia.convert_ncu

    def slow_convert(*args, **kwargs):
        time.sleep(2.0)
        return convert(*args, **kwargs)

    monkeypatch.setattr(nvidia, "convert_ncu", slow_convert)
    env = make_env("ncu", FAKE_DISPATCHES="1", MADENGINE_ROCPROF_PROFILE="compute_bound")
    started = time.monotonic()
    result = wrapper.run([], [sys.executable, "-c", "pass"], str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    total = time.monotonic() - started
    assert result.outcome == "ok", result.manifest
    assert result.manifest["duration_s"] <= total - 2.0
