"""The tool chain for one run: the profiled command, its environment, the samplers, the pre/post scripts.

Order (madengine's): for each tool in the context's list, its command is PREPENDED to the model command, so the LAST
listed tool is the OUTERMOST (`tools: [A, B]` runs `B ... -- A ... -- bash run.sh`). `first_outermost=True` reverses
it. Tool pre-scripts are prepended and post-scripts appended the same way (pre B, pre A, ..., post A, post B).

Environment, lowest to highest precedence: tool env_vars (later tools win), the context's env_vars, the context's
docker_env_vars. No tool names its profile in the environment (it would be merged, last tool wins): each wrapper
command carries its own `--profile NAME`, so chained tools compose as plain argv
(`bash W --profile b ... -- bash W --profile a ... -- bash run.sh`). All of it reaches the workload, in a container
and locally (madengine passes env_vars only to SLURM/K8s jobs; we pass both so one config means the same everywhere).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.models import AdditionalContext, ScriptRef
from madengine_rocprof.registry import counter_profile_path, resolve_tools
from madengine_rocprof.registry.store import BUILTIN_COUNTERS_DIR

SAMPLER_MODES = ("power", "vram")


@dataclass
class Sampler:
    tool: str
    mode: str                # power | vram
    env: dict[str, str]      # the <MODE>_* settings, the context's overriding the tool's
    output_name: str         # CSV file name under samplers/


@dataclass
class Chain:
    tools: list[str]
    command: str                              # shell command, run with cwd = workspace
    env: dict[str, str]
    samplers: list[Sampler] = field(default_factory=list)
    pre_scripts: list[ScriptRef] = field(default_factory=list)
    post_scripts: list[ScriptRef] = field(default_factory=list)
    profiler_tools: list[str] = field(default_factory=list)   # tools whose wrapper OUT the runner checks
    counter_dirs: dict[str, Path] = field(default_factory=dict)  # mount name -> host folder
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return "+".join(self.tools) if self.tools else "none"


def sampler_mode(tool: str, env: dict[str, str]) -> str:
    for mode in SAMPLER_MODES:
        if env.get(f"{mode.upper()}_MODE") == mode or f"_{mode}_" in f"_{tool}_":
            return mode
    raise UserError(f"sampler tool '{tool}' says neither power nor vram", where=f"tools.{tool}",
                    fix="set POWER_MODE=power or VRAM_MODE=vram in its env_vars")


def profiler_output_dir(workspace: str, tool: str, n_profilers: int) -> str:
    """The wrapper's OUT: <workspace>/profiler, or profiler/<tool> when several profilers are chained."""
    return f"{workspace}/profiler" if n_profilers <= 1 else f"{workspace}/profiler/{tool}"


def build_chain(ctx: AdditionalContext, model_command: str, *, workspace: str, plugin_home: str,
                first_outermost: bool = False, source: str | None = None) -> Chain:
    """Resolve the context's tools (built-in and user-registered) and compose the command as madengine does."""
    wrapper = f"bash {plugin_home}/scripts/rocprof_wrapper.sh"
    resolved = resolve_tools(ctx, wrapper=wrapper, counters_dir=f"{plugin_home}/counters", source=source)
    profilers = [t for t in resolved if t.definition.profiler != "sampler"]
    chain = Chain(tools=[t.name for t in resolved], command=model_command, env={})
    order = list(reversed(resolved)) if first_outermost else resolved
    added: list[str] = []
    pre: list[ScriptRef] = list(ctx.pre_scripts)
    post: list[ScriptRef] = list(ctx.post_scripts)
    for tool in order:
        definition = tool.definition
        # The wrapper's profile is in the tool's cmd (`--profile NAME`), so env vars merge exactly as madengine does.
        chain.env.update(tool.env_vars)
        if definition.profiler == "sampler":
            mode = sampler_mode(tool.name, tool.env_vars)
            # checked here, before anything runs: the sampler would fail alone in the background (NaN, Infinity)
            try:
                inputs.env_number(tool.env_vars, f"{mode.upper()}_SAMPLING_RATE", 0.1, low=0.001, high=3600)
            except UserError as err:
                err.where = f"tools.{tool.name}.env_vars.{err.where}"
                raise
            name = Path(tool.env_vars.get(f"{mode.upper()}_OUTPUT_FILE") or f"{tool.name}_output.csv").name
            chain.samplers.append(Sampler(tool.name, mode, {k: v for k, v in tool.env_vars.items()
                                                            if k.startswith(mode.upper() + "_")}, name))
            # The built-in samplers name madengine's own start/stop scripts; we run our sampler instead.
            continue
        cmd = tool.cmd
        if not tool.cmd_overridden:
            chain.profiler_tools.append(tool.name)
            counters_dir = f"{plugin_home}/counters"
            if definition.counters:
                found = counter_profile_path(definition.counters)
                if found.parent.resolve() != BUILTIN_COUNTERS_DIR.resolve():
                    chain.counter_dirs["user_counters"] = found.parent
                    counters_dir = f"{plugin_home}/user_counters"
            out = profiler_output_dir(workspace, tool.name, sum(not p.cmd_overridden for p in profilers))
            cmd = definition.model_copy(update={"output_directory": out}).madengine_entry(
                wrapper=wrapper, counters_dir=counters_dir)["cmd"]
        else:
            chain.notes.append(f"{tool.name}: cmd replaced by the context; its outputs land where that cmd says")
        if cmd and cmd not in added:  # madengine skips a cmd string already in the chain
            chain.command = f"{cmd} {chain.command}"
            added.append(cmd)
        pre[:0] = tool.pre_scripts
        post.extend(tool.post_scripts)
    chain.env.update(ctx.env_vars)
    chain.env.update(ctx.docker_env_vars)
    for sampler in chain.samplers:  # its env is passed on its own exec, so it must carry the overrides too
        sampler.env = {k: chain.env[k] for k in chain.env if k.startswith(sampler.mode.upper() + "_")}
    chain.pre_scripts, chain.post_scripts = pre, post
    return chain


def model_command(script_dir_in_workspace: str, script_name: str, args: str, encapsulate: str | None = None) -> str:
    """`bash model_scripts/run.sh ARGS` (args are the card's string, split like a shell would)."""
    parts = ["bash", f"{script_dir_in_workspace}/{script_name}", *shlex.split(args)]
    command = " ".join(shlex.quote(p) for p in parts)
    return f"{encapsulate} {command}" if encapsulate else command


def distributed_env(ctx: AdditionalContext) -> dict[str, str]:
    """torchrun on one node, the madengine way: run.sh starts `$MAD_MULTI_NODE_RUNNER script.py`."""
    dist = ctx.distributed
    if dist is None or not dist.launcher:
        return {}
    if dist.launcher != "torchrun":
        raise UserError(
            f"launcher '{dist.launcher}' is not supported by madengine-rocprof run",
            where="distributed.launcher",
            fix='use "torchrun" (one node)',
        )
    if (dist.nnodes or 1) != 1:
        raise UserError(f"nnodes {dist.nnodes}: madengine-rocprof run drives one node", where="distributed.nnodes",
                        fix="use --runner slurm (with a slurm block) for several nodes, or set nnodes to 1")
    check_rank_count(ctx)
    n = dist.nproc_per_node or ctx.gpus_per_node or 1
    runner = f"torchrun --standalone --nnodes=1 --nproc_per_node={n}"
    if dist.port:
        runner = f"torchrun --nnodes=1 --nproc_per_node={n} --master_port={dist.port}"
    return {"MAD_MULTI_NODE_RUNNER": runner, "MAD_RUNTIME_NGPUS": str(n)}


def check_rank_count(ctx: AdditionalContext, source: str | None = None) -> None:
    """gpus_per_node and distributed.nproc_per_node name one rank count (for a torchrun launch): `run` and `validate`
    both refuse two different numbers."""
    dist = ctx.distributed
    if dist is None or not dist.launcher:
        return
    if dist.nproc_per_node and ctx.gpus_per_node and dist.nproc_per_node != ctx.gpus_per_node:
        raise UserError(f"gpus_per_node {ctx.gpus_per_node} and distributed.nproc_per_node {dist.nproc_per_node} "
                        "differ: madengine would start gpus_per_node ranks, madengine-rocprof nproc_per_node",
                        file=source, where="gpus_per_node", fix="set both to the same number of ranks")
