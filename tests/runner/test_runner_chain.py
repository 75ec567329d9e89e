import json
import shlex

import pytest

from madengine_rocprof.errors import UserError
from madengine_rocprof.models import validate_context
from madengine_rocprof.runner.chain import build_chain, distributed_env, model_command

WS, PLUGIN = "/ws", "/opt/plugin"
MODEL = "bash model_scripts/run.sh --version v1"


def chain_for(ctx_dict, **kw):
    ctx, _ = validate_context(ctx_dict)
    return build_chain(ctx, MODEL, workspace=WS, plugin_home=PLUGIN, **kw)


def wrapper_calls(command):
    """The tool names' output dirs in the order they appear (outermost first)."""
    words = shlex.split(command)
    return [words[i + 1] for i, w in enumerate(words) if w == "-d"]


def test_last_listed_tool_is_outermost_like_madengine():
    chain = chain_for({"tools": [{"name": "rocprofv3_compute"}, {"name": "rocprofv3_lightweight"}]})
    assert wrapper_calls(chain.command) == [f"{WS}/profiler/rocprofv3_lightweight", f"{WS}/profiler/rocprofv3_compute"]
    assert chain.command.endswith("-- " + MODEL)
    assert chain.command.count(f"bash {PLUGIN}/scripts/rocprof_wrapper.sh") == 2
    assert chain.label == "rocprofv3_compute+rocprofv3_lightweight"


def test_first_outermost_reverses():
    chain = chain_for(
        {"tools": [{"name": "rocprofv3_compute"}, {"name": "rocprofv3_lightweight"}]}, first_outermost=True
    )
    assert wrapper_calls(chain.command) == [f"{WS}/profiler/rocprofv3_compute", f"{WS}/profiler/rocprofv3_lightweight"]


def test_single_profiler_writes_to_profiler_dir_with_fixed_counter_path():
    chain = chain_for({"tools": [{"name": "rocprofv3_compute"}, {"name": "gpu_info_power_profiler"}]})
    assert wrapper_calls(chain.command) == [f"{WS}/profiler"]
    words = shlex.split(chain.command)
    assert words[words.index("-i") + 1] == f"{PLUGIN}/counters/compute_bound.txt"
    assert words[-4:] == ["bash", "model_scripts/run.sh", "--version", "v1"]
    assert words[words.index("--") - 1] != "--"  # one separator per wrapper


def test_sampler_adds_no_command_and_becomes_a_sampler():
    chain = chain_for({"tools": [{"name": "gpu_info_power_profiler"}, {"name": "gpu_info_vram_profiler",
                                  "env_vars": {"VRAM_SAMPLING_RATE": "0.5"}}]})
    assert chain.command == MODEL
    assert [(s.tool, s.mode, s.output_name) for s in chain.samplers] == [
        ("gpu_info_power_profiler", "power", "gpu_info_power_profiler_output.csv"),
        ("gpu_info_vram_profiler", "vram", "gpu_info_vram_profiler_output.csv")]
    assert chain.samplers[1].env["VRAM_SAMPLING_RATE"] == "0.5"
    assert chain.profiler_tools == []
    assert chain.pre_scripts == [] and chain.post_scripts == []  # madengine's own sampler scripts are replaced


def test_env_precedence_tool_then_env_vars_then_docker_env_vars():
    chain = chain_for({"tools": [{"name": "rocprofv3_communication", "env_vars": {"RCCL_DEBUG": "WARN", "X": "tool"}}],
                       "env_vars": {"X": "env_vars", "Y": "env_vars"}, "docker_env_vars": {"Y": "docker"}})
    assert chain.env["RCCL_DEBUG"] == "WARN"
    assert chain.env["X"] == "env_vars"
    assert chain.env["Y"] == "docker"


def test_sampler_settings_follow_the_same_precedence():
    """The sampler's own <MODE>_* env is passed on its exec, so it must already hold the context's overrides."""
    chain = chain_for({"tools": [{"name": "gpu_info_power_profiler", "env_vars": {"POWER_DEVICE": "1"}}],
                       "env_vars": {"POWER_SAMPLING_RATE": "0.5", "POWER_DEVICE": "2"},
                       "docker_env_vars": {"POWER_DEVICE": "3"}})
    (sampler,) = chain.samplers
    assert sampler.env["POWER_SAMPLING_RATE"] == chain.env["POWER_SAMPLING_RATE"] == "0.5"
    assert sampler.env["POWER_DEVICE"] == chain.env["POWER_DEVICE"] == "3"


def test_same_cmd_string_added_once():
    chain = chain_for({"tools": [{"name": "rocprofv3", "cmd": "echo A --"}, {"name": "rocprof", "cmd": "echo A --"}]})
    assert chain.command == f"echo A -- {MODEL}"
    assert chain.profiler_tools == []  # overridden cmds: outputs are wherever that cmd writes
    assert len(chain.notes) == 2


def test_each_wrapper_gets_its_own_profile_and_samplers_cannot_override_it():
    chain = chain_for({"tools": [{"name": "rocprofv3_communication"}, {"name": "rocprofv3_lightweight"},
                                 {"name": "gpu_info_vram_profiler"}]})
    words = shlex.split(chain.command)
    # Plain argv: each wrapper starts with `bash`, its own --profile first, and ends where the next one begins.
    wrappers = [i for i, w in enumerate(words) if w.endswith("/scripts/rocprof_wrapper.sh")]
    assert [words[i - 1] for i in wrappers] == ["bash", "bash"]
    assert [words[i + 1:i + 3] for i in wrappers] == [["--profile", "lightweight"], ["--profile", "multi_gpu"]]
    assert words[wrappers[1] - 2] == "--" and words[0] == "bash"  # the inner wrapper is the outer one's app
    assert not any(w.startswith("MADENGINE_ROCPROF_PROFILE") for w in words)
    assert "MADENGINE_ROCPROF_PROFILE" not in chain.env


def test_pre_and_post_scripts_order_matches_madengine():
    ctx = {
        "pre_scripts": [{"path": "ctx_pre.sh"}],
        "post_scripts": [{"path": "ctx_post.sh"}],
        "tools": [
            {
                "name": "rocprofv3_lightweight",
                "pre_scripts": [{"path": "A_pre.sh"}],
                "post_scripts": [{"path": "A_post.sh"}],
            },
            {
                "name": "rocprofv3_compute",
                "pre_scripts": [{"path": "B_pre.sh"}],
                "post_scripts": [{"path": "B_post.sh"}],
            },
        ],
    }
    chain = chain_for(ctx)
    assert [s.path for s in chain.pre_scripts] == ["B_pre.sh", "A_pre.sh", "ctx_pre.sh"]
    assert [s.path for s in chain.post_scripts] == ["ctx_post.sh", "A_post.sh", "B_post.sh"]


def test_unknown_tool_is_a_user_error_with_suggestion():
    with pytest.raises(UserError) as err:
        chain_for({"tools": [{"name": "rocprofv3_lightweigth"}]})
    assert err.value.where == "tools[0].name" and "rocprofv3_lightweight" in str(err.value)


def test_user_registered_tool_and_counter_profile(tmp_path, monkeypatch):
    from madengine_rocprof.registry import register_tool

    home = tmp_path / "home"
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(home))
    (home / "counters").mkdir(parents=True)
    (home / "counters" / "my_counters.txt").write_text("pmc: SQ_WAVES GRBM_COUNT\n")
    tool = tmp_path / "my_tool.json"
    tool.write_text(json.dumps({"name": "my_tool", "trace": ["kernel"], "counters": "my_counters",
                                "core_profile": "compute_bound"}))
    register_tool(tool)
    chain = chain_for({"tools": [{"name": "my_tool"}]})
    words = shlex.split(chain.command)
    assert words[words.index("-i") + 1] == f"{PLUGIN}/user_counters/my_counters.txt"
    assert chain.counter_dirs == {"user_counters": home / "counters"}
    assert chain.profiler_tools == ["my_tool"]


def test_model_command_quotes_args():
    assert (
        model_command("model_scripts", "run.sh", "--msg 'a b' --n 1") == "bash model_scripts/run.sh --msg 'a b' --n 1"
    )
    assert model_command("d", "run.sh", "", "numactl -N0") == "numactl -N0 bash d/run.sh"


def test_distributed_torchrun_env():
    ctx, _ = validate_context({"distributed": {"launcher": "torchrun", "nproc_per_node": 2}})
    env = distributed_env(ctx)
    assert env == {
        "MAD_MULTI_NODE_RUNNER": "torchrun --standalone --nnodes=1 --nproc_per_node=2",
        "MAD_RUNTIME_NGPUS": "2",
    }
    assert distributed_env(validate_context({})[0]) == {}


@pytest.mark.parametrize("dist, where", [({"launcher": "deepspeed"}, "distributed.launcher"),
                                          ({"launcher": "torchrun", "nnodes": 2}, "distributed.nnodes")])
def test_distributed_unsupported(dist, where):
    ctx, _ = validate_context({"distributed": dist})
    with pytest.raises(UserError) as err:
        distributed_env(ctx)
    assert err.value.where == where
