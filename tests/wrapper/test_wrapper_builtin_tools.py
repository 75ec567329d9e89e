"""Every built-in tool's command, through the wrapper, on both vendors (fake rocprofv3 7.0 / 6.4, fake ncu)."""
from __future__ import annotations

import shlex
import sys

import pytest

pytest.importorskip("pydantic")

from madengine_rocprof import wrapper  # noqa: E402
from madengine_rocprof.errors import UserError  # noqa: E402
from madengine_rocprof.registry import BUILTIN_COUNTERS_DIR, list_tools  # noqa: E402
from madengine_rocprof.wrapper import planner  # noqa: E402

from .wrapper_testlib import REPO  # noqa: E402

TOOLS = [t for t in list_tools() if t.profiler == "rocprofv3"]
APP = [sys.executable, "-c", "print('workload')"]


def tool_args(tool, out):
    """The wrapper options of the tool's tools.json cmd (its --profile included) and its MADENGINE_ROCPROF env."""
    args = shlex.split(tool.madengine_entry(wrapper="W", counters_dir=str(BUILTIN_COUNTERS_DIR))["cmd"])[1:-1]
    assert args[:2] == ["--profile", tool.profile]
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
    profile = tool.profile
    if profile in planner.AMD_ONLY_PROFILES or tool.vendors == ["AMD"] and profile not in planner.PROFILE_ALIASES \
            and profile not in planner.PROFILE_KINDS:
        with pytest.raises(UserError, match="no meaning on|unknown profile"):
            wrapper.plan(args, APP, str(tmp_path / "o"), env=env, cwd=str(tmp_path))
        return
    plan = wrapper.plan(args, APP, str(tmp_path / "o"), env=env, cwd=str(tmp_path), drop_unsupported=True)
    kind = planner.PROFILE_KINDS[plan.core_profile]
    assert plan.profiler.name == ("embedded" if kind == "trace" else "ncu")
    result = wrapper.run(args, APP, str(tmp_path / "o"), env=env, cwd=str(tmp_path), drop_unsupported=True)
    if kind == "trace":
        assert result.outcome == "no_output"  # the app never imports torch: nothing to trace, nothing written
    else:
        assert result.outcome == "ok", result.manifest["messages"]
        assert {o["kind"] for o in result.manifest["outputs"]} == {"counter_collection", "ncu_report"}


# ---------------------------------------------------------------- shipped configs, composed like real madengine

def madengine_compose(config: str, model_cmd: list[str]) -> tuple[list[str], dict]:
    """What madengine does with a context file: every tool's env_vars merged into ONE environment (later tools
    win), every non-empty cmd prepended to the model command (so the last listed tool is the outermost)."""
    from madengine_rocprof.models import load_context
    from madengine_rocprof.registry import resolve_tools

    ctx, _ = load_context(REPO / "profiling-configs" / config, None)
    command = shlex.join(model_cmd)
    env: dict[str, str] = {}
    for tool in resolve_tools(ctx, wrapper=f"bash {WRAPPER_SH}", counters_dir=str(BUILTIN_COUNTERS_DIR)):
        env.update(tool.env_vars)
        if tool.cmd:
            command = f"{tool.cmd} {command}"
    env.update(ctx.env_vars)
    env.update(ctx.docker_env_vars)
    return shlex.split(command), env


def plan_chain(argv: list[str], env: dict, cwd) -> list:
    """Plan each `bash rocprof_wrapper.sh OPTIONS -- APP` level; an outer wrapper's app is the next wrapper."""
    plans = []
    while argv[:2] == ["bash", str(WRAPPER_SH)]:
        before, app = argv[2:argv.index("--")], argv[argv.index("--") + 1:]
        plans.append(wrapper.plan(before, app, env=env, cwd=str(cwd)))
        assert plans[-1].app_argv == app  # the app (maybe the next wrapper) is passed on untouched
        argv = app
    return plans


WRAPPER_SH = REPO / "scripts" / "rocprof_wrapper.sh"
MODEL_CMD = ["bash", "run.sh", "--version", "v1"]


@pytest.mark.parametrize("config, profile, nvidia_profiler", [
    ("rocprofv3_compute_bound.json", "compute_bound", "ncu"),   # + gpu_info_power_profiler
    ("rocprofv3_multi_gpu.json", "multi_gpu", "embedded"),      # + power and VRAM samplers
])
def test_shipped_configs_choose_the_right_profile_under_madengine(config, profile, nvidia_profiler, tmp_path,
                                                                   make_env):
    argv, tool_env = madengine_compose(config, MODEL_CMD)
    assert "MADENGINE_ROCPROF_PROFILE" not in tool_env  # nothing a sampler could overwrite
    assert argv[-len(MODEL_CMD):] == MODEL_CMD and argv[:2] == ["bash", str(WRAPPER_SH)]
    [nv] = plan_chain(argv, make_env("ncu", **tool_env), tmp_path)
    assert (nv.profile, nv.profiler.name) == (profile, nvidia_profiler)
    assert not any("is not a profile" in m or "inferred from the options" in m for m in nv.messages)
    [amd] = plan_chain(argv, make_env("rocprofv3", **tool_env), tmp_path)
    assert amd.profiler.name == "rocprofv3" and amd.app_argv == MODEL_CMD
    assert not any(a == "--profile" or a.startswith("--profile=") for a in amd.argv)  # rocprofv3 has no --profile
    # An environment left over from an older tools.json (profile set by every tool, the sampler last) still works.
    [old] = plan_chain(argv, make_env("ncu", **tool_env, MADENGINE_ROCPROF_PROFILE="gpu_info_power_profiler"),
                       tmp_path)
    assert old.profile == profile


def test_chained_profiling_tools_compose_as_plain_argv(tmp_path, make_env):
    from madengine_rocprof.models import validate_context
    from madengine_rocprof.registry import resolve_tools

    ctx, _ = validate_context({"tools": [{"name": "rocprofv3_memory"}, {"name": "rocprofv3_lightweight"},
                                         {"name": "gpu_info_vram_profiler"}]})
    tools = resolve_tools(ctx, wrapper=f"bash {WRAPPER_SH}", counters_dir=str(BUILTIN_COUNTERS_DIR))
    command = shlex.join(MODEL_CMD)
    for tool in tools:
        command = f"{tool.cmd} {command}" if tool.cmd else command
    argv = shlex.split(command)
    # bash W --profile lightweight ... -- bash W --profile memory_bound ... -- bash run.sh
    outer_end = argv.index("--")
    inner = argv[outer_end + 1:]
    assert argv[:4] == ["bash", str(WRAPPER_SH), "--profile", "lightweight"]
    assert inner[:4] == ["bash", str(WRAPPER_SH), "--profile", "memory_bound"]
    assert inner[inner.index("--") + 1:] == MODEL_CMD
    outer, inner_plan = plan_chain(argv, make_env("ncu"), tmp_path)
    assert (outer.profile, outer.profiler.name) == ("lightweight", "embedded")
    assert outer.argv[:len(inner)] == inner  # the embedded tracer runs the inner wrapper as the app
    assert (inner_plan.profile, inner_plan.profiler.name) == ("memory_bound", "ncu")
