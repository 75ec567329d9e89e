"""rocprofv3 backend end to end against the fake rocprofv3 (7.x and 6.x front ends)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from madengine_rocprof import wrapper
from madengine_rocprof.errors import UserError

from .wrapper_testlib import FAKES, manifest, wrapper_cli

APP = "import os, sys; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n'); print('app out'); sys.exit(int(sys.argv[2]))"


def app(tmp_path, code=0):
    return [sys.executable, "-c", APP, str(tmp_path / "pids.txt"), str(code)]


def pids(tmp_path):
    return [int(x) for x in (tmp_path / "pids.txt").read_text().split()]


def test_ok_run_writes_per_process_files_and_a_true_manifest(tmp_path, make_env, recorded, capfd):
    env = make_env("rocprofv3", FAKE_DISPATCHES="4")
    out = tmp_path / "out"
    result = wrapper.run(["--kernel-trace", "--stats", "-f", "pftrace", "rocpd"], app(tmp_path), str(out), env=env,
                         cwd=str(tmp_path))
    assert result.exit_code == 0 and result.outcome == "ok"
    pid = pids(tmp_path)[0]
    host = socket.gethostname()
    m = manifest(out)
    assert m == result.manifest
    # What the fake rocprofv3 received is exactly the planned command.
    assert recorded()[-1]["argv"] == m["argv"][1:]
    assert m["argv"][m["argv"].index("--") + 1:] == app(tmp_path)
    assert m["argv"][1:5] == ["--output-directory", str(out), "--output-file", "%hostname%/%pid%"]
    fmt = m["argv"].index("--output-format")
    assert m["argv"][fmt + 1:fmt + 4] == ["csv", "pftrace", "rocpd"]
    files = {o["path"]: o for o in m["outputs"]}
    for name in ("kernel_trace.csv", "kernel_stats.csv", "agent_info.csv", "results.pftrace", "results.db"):
        rel = f"{host}/{pid}_{name}"
        assert rel in files, rel
        assert files[rel]["size_bytes"] == (out / rel).stat().st_size
    assert files[f"{host}/{pid}_kernel_trace.csv"]["rows"] == 4
    assert m["dispatch_count"] == 4
    err = capfd.readouterr()
    assert "app out" in err.out
    assert "sql text value" not in err.err  # rocpd noise filtered ...
    assert (out / "wrapper_filtered.log").read_text().count("sql text value") == 3  # ... but kept


def test_exit_code_is_the_apps_and_outputs_are_kept(tmp_path, make_env):
    result = wrapper.run(["--kernel-trace"], app(tmp_path, 5), str(tmp_path / "o"), env=make_env("rocprofv3"),
                         cwd=str(tmp_path))
    assert result.exit_code == 5
    assert result.outcome == "app_failed"
    assert result.manifest["dispatch_count"] == 3


def test_nothing_captured_is_its_own_outcome(tmp_path, make_env):
    env = make_env("rocprofv3", FAKE_DISPATCHES="0")
    result = wrapper.run(["--kernel-trace"], app(tmp_path), str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    assert (result.exit_code, result.outcome, result.manifest["outputs"]) == (0, "no_output", [])
    assert sorted(os.listdir(tmp_path / "o")) == ["manifest.json"]
    strict = wrapper.run(["--kernel-trace", "--fail-on-no-output"], app(tmp_path), str(tmp_path / "o2"), env=env,
                         cwd=str(tmp_path))
    assert (strict.exit_code, strict.outcome) == (3, "no_output")


def test_profiler_failure_is_reported_as_such(tmp_path, make_env):
    counters = [f"SQ_C{i}" for i in range(9)]  # 9 SQ events: more than one pass holds, rocprofv3 fails
    result = wrapper.run(["--pmc", *counters], app(tmp_path), str(tmp_path / "o"), env=make_env("rocprofv3"),
                         cwd=str(tmp_path))
    assert (result.exit_code, result.outcome) == (1, "profiler_failed")
    assert any("Request exceeds" in msg for msg in result.manifest["messages"])


def test_profiler_crash_is_not_blamed_on_the_app(tmp_path, make_env):
    env = make_env("rocprofv3", FAKE_PROFILER_CRASH="1")
    result = wrapper.run(["--kernel-trace"], app(tmp_path), str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    assert result.exit_code == 128 + 6  # SIGABRT, reported like a shell
    assert result.outcome == "profiler_failed"


def test_multi_pass_input_writes_one_directory_per_pass(tmp_path, make_env):
    (tmp_path / "c.txt").write_text("# two passes\npmc: SQ_WAVES GRBM_GUI_ACTIVE\npmc: SQ_INSTS_VALU\n")
    result = wrapper.run(["-i", "c.txt"], app(tmp_path), str(tmp_path / "o"), env=make_env("rocprofv3"),
                         cwd=str(tmp_path))
    assert result.outcome == "ok"
    host = socket.gethostname()
    p1, p2 = pids(tmp_path)
    paths = {o["path"]: o for o in result.manifest["outputs"] if o["kind"] == "counter_collection"}
    assert set(paths) == {f"pmc_1/{host}/{p1}_counter_collection.csv", f"pmc_2/{host}/{p2}_counter_collection.csv"}
    assert paths[f"pmc_1/{host}/{p1}_counter_collection.csv"]["rows"] == 3 * 2  # dispatches x counters
    assert result.manifest["dispatch_count"] == 3 + 3
    # -i is made absolute: run.sh may change directory
    assert str(tmp_path / "c.txt") in result.manifest["argv"]


def test_relative_output_dir_and_a_fixed_o_are_made_safe(tmp_path, make_env):
    p = wrapper.plan(["-d", "./rocprof_output", "-o", "trace"], ["x"], env=make_env("rocprofv3"), cwd=str(tmp_path))
    assert p.output_dir == str(tmp_path / "rocprof_output")
    assert p.argv[p.argv.index("--output-file") + 1] == "%hostname%/%pid%_trace"
    assert any("shared by every process" in m for m in p.messages)


def test_rocprofv3_6x_probes_help_and_drops_rocpd(tmp_path, make_env):
    env = make_env("rocprofv3", FAKE_ROCPROF_VERSION="6.3.0")
    p = wrapper.plan(["--kernel-trace", "--output-format", "csv", "rocpd", "-L"], ["x"], "/o", env=env)
    assert p.profiler.release == (6, 3)
    assert "--pmc/--runtime-trace" in p.profiler.why
    fmt = p.argv.index("--output-format")
    assert p.argv[fmt + 1:fmt + 3] == ["csv", "--kernel-trace"]
    assert "--list-metrics" in p.argv and "--list-avail" not in p.argv
    with pytest.raises(UserError, match="no equivalent for: --pc-sampling-beta-enabled"):
        wrapper.plan(["--pc-sampling-beta-enabled", "--kernel-trace"], ["x"], "/o", env=env)
    dropped = wrapper.plan(["--pc-sampling-beta-enabled", "--kernel-trace", "--drop-unsupported"], ["x"], "/o", env=env)
    assert "--pc-sampling-beta-enabled" not in dropped.argv


def test_6x_command_runs_on_the_6x_fake(tmp_path, make_env):
    env = make_env("rocprofv3", FAKE_ROCPROF_VERSION="6.2.0")
    result = wrapper.run(
        ["--kernel-trace", "-f", "csv"], app(tmp_path), str(tmp_path / "o"), env=env, cwd=str(tmp_path)
    )
    assert result.outcome == "ok", result.manifest
    assert "-f" not in result.manifest["argv"]  # 7.0-only short form


@pytest.mark.parametrize("args, match", [
    (["--stats"], "need a tracing option"),
    (["--kernel-trace", "--pc-sampling-beta-enabled", "--pc-sampling-method", "stochastic",
      "--pc-sampling-unit", "time", "--pc-sampling-interval", "1000"], "stochastic needs --pc-sampling-unit cycles"),
    (["--kernel-trace", "--pc-sampling-beta-enabled", "--pc-sampling-method", "stochastic",
      "--pc-sampling-unit", "cycles", "--pc-sampling-interval", "1000"], "power of 2"),
])
def test_mistakes_rocprofv3_reports_late_fail_before_running(tmp_path, make_env, recorded, args, match):
    with pytest.raises(UserError, match=match):
        wrapper.run(args, ["x"], str(tmp_path / "o"), env=make_env("rocprofv3"))
    assert not (tmp_path / "o").exists()
    assert [r for r in recorded() if r["argv"] != ["--version"]] == []


def test_the_fake_swallows_the_app_like_the_real_rocprofv3(tmp_path, make_env):
    done = subprocess.run([str(FAKES / "rocprofv3"), "--hip-trace", "python3"], env=make_env(),
                          capture_output=True, text=True)
    assert done.returncode == 1 and "ValueError: invalid truth value python3" in done.stderr
    done = subprocess.run([str(FAKES / "rocprofv3"), "--kernel-trace=true", "./app"], env=make_env(),
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unrecognized arguments: ./app" in done.stderr


def test_cli_missing_double_dash_exit_2_runs_nothing(tmp_path, make_env, recorded):
    done = wrapper_cli(["--hip-trace", "--kernel-trace", "python3", "train.py"], make_env("rocprofv3"), tmp_path)
    assert done.returncode == 2
    assert "missing `--`" in done.stderr and "--kernel-trace -- python3 train.py" in done.stderr
    assert recorded() == [] and not (tmp_path / "rocprof_output").exists()


def test_cli_requested_profiler_missing_gives_no_profiler(tmp_path, make_env):
    done = wrapper_cli(["--profiler", "ncu", "--kernel-trace", "-d", "o", "--", "python3", "-c", "1"],
                       make_env("rocprofv3"), tmp_path)
    assert done.returncode == 127
    m = manifest(tmp_path / "o")
    assert m["outcome"] == "no_profiler" and "not installed" in m["messages"][0]


@pytest.mark.parametrize("args", [
    ["--pmc", "SQ_WAVES", "--stats"],  # rocprofv3 counts --pmc, PC sampling and --att as "tracing" for --stats
    ["--att", "--summary"],
    ["-i", "job.yaml", "--stats"],     # the input file's job enables the trace: only rocprofv3 can tell
])
def test_stats_check_does_not_refuse_what_rocprofv3_accepts(tmp_path, make_env, args):
    (tmp_path / "job.yaml").write_text("jobs:\n  - kernel_trace: true\n")
    p = wrapper.plan(args, ["x"], str(tmp_path / "o"), env=make_env("rocprofv3"), cwd=str(tmp_path))
    assert ("--stats" in p.argv) or ("--summary" in p.argv)


def test_api_missing_profiler_manifest_goes_to_the_d_directory(tmp_path, make_env):
    result = wrapper.run(["--kernel-trace", "-d", "mine"], ["python3", "-c", "1"], env=make_env("rocprofv3"),
                         profiler="ncu", cwd=str(tmp_path))
    assert result.outcome == "no_profiler"
    assert manifest(tmp_path / "mine")["outcome"] == "no_profiler"
    assert not (tmp_path / "rocprof_output").exists()


def test_cli_missing_profiler_with_an_app_argument_named_dry_run_still_writes_the_manifest(tmp_path, make_env):
    done = wrapper_cli(["--profiler", "ncu", "--kernel-trace", "-d", "o", "--", "python3", "x.py", "--dry-run"],
                       make_env("rocprofv3"), tmp_path)
    assert done.returncode == 127
    assert manifest(tmp_path / "o")["outcome"] == "no_profiler"  # --dry-run after `--` is the app's, not ours
