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
from madengine_rocprof.wrapper import nvidia, rocprof_csv


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
    # Independent check: every (kernel, metric) value of the report appears once in the long CSV.
    [report] = list((tmp_path / "o").rglob("*.ncu-rep"))
    rep = json.loads(report.read_text())
    counter_files = [o for o in result.manifest["outputs"] if o["kind"] == "counter_collection"]
    assert len(counter_files) == 1
    rows = read_csv(tmp_path / "o" / counter_files[0]["path"])
    assert list(rows[0]) == list(rocprof_csv.COUNTER_COLLECTION)
    got = {(int(r["Dispatch_Id"]), r["Counter_Name"]): float(r["Counter_Value"]) for r in rows}
    want = {(k["id"] + 1, m): float(v) for k in rep["rows"] for m, v in k["values"].items() if not m.startswith("launch__")}
    assert got == want
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
        wrapper.plan(["--pmc", "SQ_WAVES"], ["app"], "/o", env=make_env("ncu", MADENGINE_ROCPROF_PROFILE="rocprofv3_full"))
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
    kernels = [(100, 150, 0, 7, 1, gpid, 1, 4, 1, 1, 128, 1, 1, 64, 0, 1024), (160, 170, 0, 7, 2, gpid, 2, 1, 1, 1, 32, 1, 1, 16, 0, 0),
               (180, 260, 0, 7, 3, gpid, 1, 4, 1, 1, 128, 1, 1, 64, 0, 1024)]
    con.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (" + ",".join("?" * 16) + ")", kernels)
    con.commit()
    con.close()
    written = nvidia.convert_nsys(str(tmp_path), [str(db)], [])
    trace = read_csv(tmp_path / f"{pid}_kernel_trace.csv")
    assert [(r["Kernel_Name"], int(r["End_Timestamp"]) - int(r["Start_Timestamp"])) for r in trace] == \
        [("gemm", 50), ("relu", 10), ("gemm", 80)]
    stats = {r["Name"]: r for r in read_csv(tmp_path / f"{pid}_kernel_stats.csv")}
    assert stats["gemm"]["Calls"] == "2" and stats["gemm"]["TotalDurationNs"] == "130"
    assert len(written) == 2
