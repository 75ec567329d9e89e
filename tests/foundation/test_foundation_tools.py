"""Tool definitions, built-in registry, resolver and user registration."""
from __future__ import annotations

import json
import shlex

import pytest

from madengine_rocprof.errors import UserError, UserErrors
from madengine_rocprof.models import PROFILE_ENV, ToolDefinition, load_context
from madengine_rocprof.registry import (
    CORE_PROFILES,
    get_counter_profile,
    get_tool,
    list_tools,
    register_tool,
    resolve_tools,
)
from madengine_rocprof.registry.store import tool_from_data

UPSTREAM = ["rocprof", "rocprof_hip_only", "rocprof_sys", "rocprofv3", "rocprofv3_compute", "rocprofv3_memory",
            "rocprofv3_communication", "rocprofv3_full", "rocprofv3_lightweight", "rocprofv3_perfetto",
            "rocprofv3_api_overhead", "rocprofv3_pc_sampling", "gpu_info_power_profiler", "gpu_info_vram_profiler"]
# rocprofv3 options not in the (older) input schema fixture, from rocprofv3.md.
EXTRA_OPTIONS = {"rccl_trace", "input", "summary", "kokkos_trace"}


def test_all_upstream_and_core_names_exist():
    names = {t.name for t in list_tools()}
    assert set(UPSTREAM) | set(CORE_PROFILES) <= names


@pytest.mark.parametrize("name", UPSTREAM + list(CORE_PROFILES))
def test_builtin_renders_valid_rocprofv3_command(name, rocprof_fixtures):
    tool = get_tool(name)
    entry = tool.madengine_entry()
    assert set(entry) == {"pre_scripts", "cmd", "env_vars", "post_scripts"}
    # The profile travels on the wrapper's command line, never in the shared environment.
    assert PROFILE_ENV not in entry["env_vars"]
    if tool.profiler == "sampler":
        assert entry["cmd"] == ""
        return
    argv = shlex.split(entry["cmd"])
    assert argv[:2] == ["bash", "../scripts/common/tools/rocprof_wrapper.sh"] and argv[-1] == "--"
    assert argv.count("--") == 1
    assert argv[2:4] == ["--profile", tool.core_profile or name] and tool.profile == argv[3]
    options = argv[4:-1]
    assert options == tool.rocprofv3_args()
    assert not any(o == "--profile" or o.startswith("--profile=") for o in options)  # rocprofv3 has no --profile
    schema = json.loads((rocprof_fixtures / "rocprofv3_input_schema.json").read_text())
    known = {k.replace("-", "_") for k in schema["properties"]["jobs"]["items"]["properties"]} | EXTRA_OPTIONS
    short = {"-i": "input", "-d": "output_directory", "-o": "output_file"}
    for opt in options:
        if opt.startswith("-"):
            dest = short.get(opt) or opt.lstrip("-").replace("-", "_")
            assert dest in known, f"{name}: {opt} is not a rocprofv3 option"
    fmt = options.index("--output-format")
    assert options[fmt + 1] == "csv"  # explicit formats, csv always first
    assert "%pid%" in options[options.index("-o") + 1]  # per-process names
    assert "--perfetto-trace-filename" not in options
    if tool.counters:
        assert options[options.index("-i") + 1] == f"../scripts/common/tools/counters/{tool.counters}.txt"
        get_counter_profile(tool.counters)  # the counter file exists


def test_pc_sampling_tools_use_a_valid_pair():
    for name in ("rocprofv3_pc_sampling", "pc_sampling"):
        pcs = get_tool(name).pc_sampling
        assert pcs is not None
        assert (pcs.method, pcs.unit) == ("host_trap", "time")


@pytest.mark.parametrize("pcs, ok", [
    ({"method": "stochastic", "unit": "time", "interval": 1000}, False),  # upstream's defect
    ({"method": "stochastic", "unit": "cycles", "interval": 1000}, False),  # not a power of two
    ({"method": "stochastic", "unit": "cycles", "interval": 128}, False),  # below 256
    ({"method": "stochastic", "unit": "cycles", "interval": 1 << 20}, True),
    ({"method": "host_trap", "unit": "cycles", "interval": 1000}, False),
    ({"method": "host_trap", "unit": "time", "interval": 0}, False),
    ({"method": "host_trap", "unit": "time", "interval": 500}, True),
])
def test_pc_sampling_pairs(pcs, ok):
    data = {"name": "t", "trace": ["kernel"], "pc_sampling": pcs}
    if ok:
        got = tool_from_data(data).pc_sampling
        assert got is not None and got.interval == pcs["interval"]
    else:
        with pytest.raises(UserErrors) as e:
            tool_from_data(data, "t.json")
        assert (e.value.errors[0].where or "").startswith("pc_sampling") and e.value.errors[0].fix


@pytest.mark.parametrize(
    "data, where",
    [
        ({"name": "t", "trace": ["kernel"], "output_file": "trace"}, "output_file"),
        ({"name": "t", "stats": True, "counters": "compute_bound"}, "(top level)"),
        ({"name": "t"}, "(top level)"),
        ({"name": "t", "trace": ["kernels"]}, "trace[0]"),
        ({"name": "t", "trace": ["kernel"], "extra_args": ["--"]}, "extra_args"),
        ({"name": "t", "trace": ["kernel"], "extra_args": ["--profile=memory_bound"]}, "extra_args"),
        ({"name": "t", "profiler": "sampler", "trace": ["kernel"]}, "(top level)"),
        ({"name": "t", "trace": ["kernel"], "env_vars": {"1BAD": "x"}}, "env_vars"),
        (
            {"name": "t", "trace": ["kernel"], "pc_sampling": {"method": "host_trap"}, "output_formats": ["rocpd"]},
            "(top level)",
        ),
    ],
)
def test_bad_tool_definitions(data, where):
    with pytest.raises(UserErrors) as e:
        tool_from_data(data, "t.json")
    assert e.value.errors[0].where == where


def test_unknown_tool_suggests_closest():
    with pytest.raises(UserError) as e:
        get_tool("rocprofv3_comput")
    assert "rocprofv3_compute" in (e.value.fix or "")


def test_resolver_merges_like_madengine():
    ctx, _ = load_context(None, json.dumps({"tools": [
        {"name": "rocprofv3_communication", "env_vars": {"RCCL_DEBUG": "WARN", "X": "1"}},
        {"name": "lightweight", "cmd": "my_profiler --"}]}))
    comm, light = resolve_tools(ctx, wrapper="W", counters_dir="C")
    assert comm.env_vars == {"RCCL_DEBUG": "WARN", "X": "1"}
    assert comm.cmd.startswith("W --profile multi_gpu --hip-trace") and not comm.cmd_overridden
    assert light.cmd == "my_profiler --" and light.cmd_overridden
    assert light.env_vars == {}


def test_resolver_unknown_tool_names_the_entry():
    ctx, _ = load_context(None, '{"tools": [{"name": "lightweight"}, {"name": "rocprof_sis"}]}')
    with pytest.raises(UserError) as e:
        resolve_tools(ctx, source="cfg.json")
    assert e.value.where == "tools[1].name" and "rocprof_sys" in (e.value.fix or "")


def test_user_registration_roundtrip(tmp_path, isolated_home):
    src = tmp_path / "mine.json"
    src.write_text(json.dumps({"name": "my_kernels", "trace": ["kernel"], "kernel_include_regex": "gemm.*",
                               "output_formats": ["json"]}))
    stored = register_tool(src)
    assert stored.parent == isolated_home / "tools"
    tool = get_tool("my_kernels")
    assert tool.rocprofv3_args()[:3] == ["--kernel-trace", "--kernel-include-regex", "gemm.*"]
    assert tool.output_formats == ["csv", "json"]
    ctx, _ = load_context(None, '{"tools": [{"name": "my_kernels"}]}')
    assert resolve_tools(ctx)[0].definition == tool


def test_registration_refuses_builtin_names_and_bad_files(tmp_path, isolated_home):
    src = tmp_path / "x.json"
    src.write_text(json.dumps({"name": "rocprofv3", "trace": ["kernel"]}))
    with pytest.raises(UserError, match="built-in"):
        register_tool(src)
    src.write_text('{"name": "ok", "trace": ["kernel"], "overhead": "tiny"}')
    with pytest.raises(UserErrors):
        register_tool(src)
    assert not (isolated_home / "tools").exists()  # nothing written


def test_tool_definition_roundtrips_through_json():
    for tool in list_tools():
        again = ToolDefinition.model_validate_json(tool.model_dump_json())
        assert again.madengine_entry() == tool.madengine_entry()


def test_registration_checks_counter_profile_exists(tmp_path, isolated_home):
    src = tmp_path / "x.json"
    src.write_text(json.dumps({"name": "mine", "trace": ["kernel"], "counters": "compute_bond"}))
    with pytest.raises(UserError) as e:
        register_tool(src)
    assert e.value.where == "counters" and "compute_bound" in (e.value.fix or "") and e.value.file == str(src)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_atomic_write_gives_new_files_normal_modes_and_keeps_existing_ones(tmp_path, umask):
    import os
    import stat

    from madengine_rocprof.atomic import atomic_write

    old = os.umask(umask)
    try:
        new = tmp_path / "sub" / "new.json"
        atomic_write(new, "one\n")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644 & ~umask
        assert new.read_text() == "one\n"
        kept = tmp_path / "kept.sh"
        kept.write_text("old")
        for mode in (0o755, 0o600):
            kept.chmod(mode)
            atomic_write(kept, "new")
            assert stat.S_IMODE(kept.stat().st_mode) == mode and kept.read_text() == "new"
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept.sh", "new.json", "sub"]  # no temp files left


def test_a_trace_tool_without_core_profile_gets_the_profile_its_content_implies(tmp_path, isolated_home):
    """Before: the tool's name went to the wrapper as `--profile NAME`, which the embedded tracer and NVIDIA refuse
    at run time (the reason only in run.log). Now it renders the profile it collects, and the wrapper plans it."""
    from madengine_rocprof.wrapper import planner

    src = tmp_path / "mine.json"
    src.write_text(json.dumps({"name": "my_kernel_trace", "trace": ["kernel"]}))
    register_tool(src)
    tool = get_tool("my_kernel_trace")
    assert tool.profile == "lightweight"
    argv = shlex.split(tool.madengine_entry(wrapper="W")["cmd"])
    assert argv[:3] == ["W", "--profile", "lightweight"] and argv[-1] == "--"
    plan = planner.build(argv[1:-1], ["python3", "-c", "pass"], profiler="embedded", env={}, cwd=str(tmp_path))
    assert plan.profile == "lightweight"
    pcs = ToolDefinition.model_validate(
        {"name": "my_pcs", "pc_sampling": {"method": "host_trap", "unit": "time", "interval": 1000}}
    )
    assert pcs.profile == "pc_sampling"


@pytest.mark.parametrize(
    "data, what, fix",
    [
        ({"name": "my_counters", "counters": "instruction_mix"}, "has no core_profile", "core_profile"),
        ({"name": "my_trace", "trace": ["kernel"], "core_profile": "lightwieght"}, "unknown core_profile",
         "did you mean 'lightweight'"),
    ],
)
def test_validate_and_register_refuse_a_tool_that_run_would_refuse(tmp_path, isolated_home, capsys, data, what,
                                                                    fix):
    from madengine_rocprof.cli import main

    src = tmp_path / "tool.json"
    src.write_text(json.dumps(data))
    for argv in (["validate", str(src)], ["tools", "register", str(src)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert what in err and fix in err and "core_profile" in err and str(src) in err
    assert not (isolated_home / "tools").exists()  # nothing registered
    # the same counter tool for AMD only (rocprofv3 reads the counter file itself) is fine
    if data.get("counters"):
        src.write_text(json.dumps({**data, "vendors": ["AMD"]}))
        assert main(["tools", "register", str(src)]) == 0
