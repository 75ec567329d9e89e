"""Legacy rocprof backend: option translation, no `--`, banner filtered, one results.csv per run."""
from __future__ import annotations

import shutil
import sys

import pytest

from madengine_rocprof import wrapper
from madengine_rocprof.errors import UserError

from .wrapper_testlib import FAKES


def test_translation_and_run(tmp_path, make_env, recorded, capfd):
    env = make_env("rocprof", FAKE_DISPATCHES="5")
    app = [sys.executable, "-c", "print('legacy app')"]
    result = wrapper.run(["--kernel-trace", "--hip-trace", "--marker-trace", "--stats", "-T"], app,
                         str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    argv = recorded()[-1]["argv"]
    assert "--" not in argv
    assert argv[argv.index("-o") + 1].endswith("_results.csv")
    assert argv[-3:] == app
    opts = argv[: argv.index("-d")]
    assert opts == ["--timestamp", "on", "--hip-trace", "--roctx-trace", "--stats", "--basenames", "on"]
    assert result.outcome == "ok"
    assert result.manifest["dispatch_count"] == 5
    kinds = sorted(o["kind"] for o in result.manifest["outputs"])
    assert kinds == ["legacy_results", "results.stats"]
    console = capfd.readouterr()
    assert "legacy app" in console.out
    assert "phasing out" not in console.out and "RPL: on" not in console.out
    assert "phasing out" in (tmp_path / "o" / "wrapper_filtered.log").read_text()


def test_options_without_equivalent_fail_with_the_list(tmp_path, make_env):
    env = make_env("rocprof")
    with pytest.raises(UserError) as info:
        wrapper.plan(["--kernel-trace", "--memory-allocation-trace", "--rccl-trace", "-f", "pftrace"], ["app"], "/o",
                     env=env)
    assert "legacy rocprof has no equivalent for: --memory-allocation-trace, --rccl-trace, --output-format pftrace" \
        in str(info.value)
    p = wrapper.plan(["--kernel-trace", "--rccl-trace", "--drop-unsupported"], ["app"], "/o", env=env)
    assert "--rccl-trace" not in p.argv
    assert any("dropped" in m and "--rccl-trace" in m for m in p.messages)


def test_collection_period_has_no_legacy_equivalent(make_env):
    # rpl_run.sh --trace-period wants unit-suffixed times and its third field is a period, not rocprofv3's repeat count
    env = make_env("rocprof")
    with pytest.raises(UserError, match=r"no equivalent for: -P"):
        wrapper.plan(["--kernel-trace", "-P", "1:2:3"], ["app"], "/o", env=env)
    p = wrapper.plan(["--kernel-trace", "-P", "1:2:3", "--drop-unsupported"], ["app"], "/o", env=env)
    assert "--trace-period" not in p.argv


def test_memory_copy_is_covered_by_hip_trace(tmp_path, make_env):
    env = make_env("rocprof")
    p = wrapper.plan(["--hip-trace", "--memory-copy-trace"], ["app"], "/o", env=env)
    assert p.argv[1] == "--hip-trace" and "--memory-copy-trace" not in p.argv
    with pytest.raises(UserError, match="--memory-copy-trace"):
        wrapper.plan(["--memory-copy-trace"], ["app"], "/o", env=env)


def test_rocprofv3_wins_over_legacy(make_env):
    assert (
        wrapper.plan(["--kernel-trace"], ["app"], "/o", env=make_env("rocprof", "rocprofv3")).profiler.name
        == "rocprofv3"
    )
    forced = wrapper.plan(["--kernel-trace"], ["app"], "/o", env=make_env("rocprof", "rocprofv3",
                                                                     MADENGINE_ROCPROF_PROFILER="rocprof"))
    assert forced.profiler.name == "rocprof" and "MADENGINE_ROCPROF_PROFILER=rocprof" in forced.profiler.why


def test_legacy_version_from_rocm_info(tmp_path, make_env):
    root = tmp_path / "rocm"
    (root / "bin").mkdir(parents=True)
    (root / ".info").mkdir()
    (root / ".info" / "version").write_text("6.1.2-119\n")
    for name in ("rocprof", "_fakelib.py"):  # a copy: the root is found from the executable's real path
        shutil.copy2(FAKES / name, root / "bin" / name)
    env = make_env()
    env["PATH"] = f"{root / 'bin'}:{env['PATH']}"
    assert wrapper.plan(["--kernel-trace"], ["app"], "/o", env=env).profiler.version == "6.1.2"


@pytest.mark.parametrize("app_code, expected", [(3, 3), (0, 0)])
def test_exit_code_is_the_apps_although_rpl_run_exits_0(tmp_path, make_env, app_code, expected):
    # rpl_run.sh ends with `exit $RET` (0 unless profiling failed), so the app's status must be recorded apart.
    env = make_env("rocprof", FAKE_DISPATCHES="2")
    app = [sys.executable, "-c", f"import sys; print('two  spaces'); sys.exit({app_code})"]
    result = wrapper.run(["--kernel-trace"], app, str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    assert result.exit_code == expected
    assert result.manifest["app_exit_code"] == expected
    assert result.outcome == ("app_failed" if app_code else "ok")
    assert not [o for o in result.manifest["outputs"] if "exit" in o["path"]]  # the status file is not an output


def test_exit_launcher_survives_rpl_run_eval():
    from madengine_rocprof.wrapper.planner import LEGACY_EXIT_SHIM

    # rpl_run.sh word-splits and globs the unquoted command, then evals it inside double quotes.
    assert not set(LEGACY_EXIT_SHIM) & set('$`"\\*?[\n\t')


def test_app_killed_by_a_signal_gives_128_plus_n(tmp_path, make_env):
    app = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]
    result = wrapper.run(["--kernel-trace"], app, str(tmp_path / "o"), env=make_env("rocprof"), cwd=str(tmp_path))
    assert result.exit_code == 128 + 15 and result.outcome == "app_failed"
