"""Every built-in tool's command, through the wrapper, on both vendors (fake rocprofv3 7.0 / 6.4, fake ncu)."""
from __future__ import annotations

import sys

import pytest

pytest.importorskip("pydantic")

from madengine_rocprof import wrapper  # noqa: E402
from madengine_rocprof.errors import UserError  # noqa: E402
from madengine_rocprof.registry import BUILTIN_COUNTERS_DIR, list_tools  # noqa: E402
from madengine_rocprof.wrapper import planner  # noqa: E402

TOOLS = [t for t in list_tools() if t.profiler == "rocprofv3"]
APP = [sys.executable, "-c", "print('workload')"]


def tool_args(tool, out):
    args = tool.rocprofv3_args(counters_dir=str(BUILTIN_COUNTERS_DIR))
    return args, {k: v for k, v in tool.env_vars.items() if k.startswith("MADENGINE_ROCPROF")}


@pytest.mark.parametrize("version", ["7.0.0", "6.4.0"])
@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_amd_command_is_accepted_by_rocprofv3(tool, version, tmp_path, make_env, recorded):
    args, tool_env = tool_args(tool, tmp_path / "o")
    env = make_env("rocprofv3", FAKE_ROCPROF_VERSION=version, **tool_env)
    result = wrapper.run(args, APP, str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    assert result.outcome == "ok", (result.manifest["messages"], result.manifest["argv"])
    assert result.manifest["messages"] == []  # nothing dropped or rewritten for a built-in tool
    assert recorded()[-1]["argv"] == result.manifest["argv"][1:]
    assert all(o["path"].split("/")[-1].split("_")[0].isdigit() for o in result.manifest["outputs"])  # per-pid


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_nvidia_mapping_is_defined_or_refused_clearly(tool, tmp_path, make_env):
    args, tool_env = tool_args(tool, tmp_path / "o")
    env = make_env("ncu", **tool_env)
    profile = tool_env.get("MADENGINE_ROCPROF_PROFILE")
    if profile in planner.AMD_ONLY_PROFILES or tool.vendors == ["AMD"] and profile not in planner.PROFILE_ALIASES \
            and profile not in planner.PROFILE_KINDS:
        with pytest.raises(UserError, match="no meaning on|unknown profile"):
            wrapper.plan(args, APP, str(tmp_path / "o"), env=env, cwd=str(tmp_path))
        return
    plan = wrapper.plan(args, APP, str(tmp_path / "o"), env=env, cwd=str(tmp_path), drop_unsupported=True)
    kind = planner.PROFILE_KINDS[plan.profile]
    assert plan.profiler.name == ("embedded" if kind == "trace" else "ncu")
    result = wrapper.run(args, APP, str(tmp_path / "o"), env=env, cwd=str(tmp_path), drop_unsupported=True)
    if kind == "trace":
        assert result.outcome == "no_output"  # the app never imports torch: nothing to trace, nothing written
    else:
        assert result.outcome == "ok", result.manifest["messages"]
        assert {o["kind"] for o in result.manifest["outputs"]} == {"counter_collection", "ncu_report"}
