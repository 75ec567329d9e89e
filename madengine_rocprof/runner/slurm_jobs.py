"""SLURM job settings from the context (madengine's `slurm` and `distributed` keys) and the two scripts of a job:
the batch script (`sbatch` header, rendezvous address, environment, one `srun` task per node) and the task script
each node runs (its own workspace, samplers, pre-scripts, the profiled workload under torchrun, post-scripts).

Every value that reaches a script is quoted (shlex), so the context can never inject shell code."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from madengine_rocprof.errors import UserError
from madengine_rocprof.models import AdditionalContext, ScriptRef
from madengine_rocprof.runner.chain import Chain

DEFAULT_PORT = 29500                 # madengine's default master port
# sbatch --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or no limit
TIME_FORMAT = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2}|"
                         r"UNLIMITED|INFINITE)$", re.IGNORECASE)
# madengine's optional sbatch keys that pass through as `#SBATCH --<key>=<value>`
PASS_THROUGH = ("nodelist", "exclude", "constraint", "qos", "account", "reservation")


@dataclass
class JobSettings:
    nodes: int
    ranks_per_node: int
    partition: str | None
    gpus_per_node: int | None        # None: no GPU request (a partition without GPUs)
    time: str                         # sbatch --time
    exclusive: bool
    port: int
    modules: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)   # PASS_THROUGH keys that are set
    network_interface: str | None = None
    notes: list[str] = field(default_factory=list)


def minutes_for(timeout_s: float) -> str:
    """An sbatch --time a little above our own limit, so our timeout (scancel) acts first."""
    return str(int(timeout_s // 60) + 2)


def job_settings(ctx: AdditionalContext, timeout_s: float, partition_has_gpus: bool | None) -> JobSettings:
    """Validated settings; `partition_has_gpus` None means unknown (then GPU requests are passed on as given)."""
    slurm = ctx.slurm.model_dump(exclude_none=True) if ctx.slurm else {}
    dist = ctx.distributed
    nodes = slurm.get("nodes", 1)
    if dist is not None and dist.launcher not in (None, "torchrun"):
        raise UserError(
            f"launcher '{dist.launcher}' is not supported by the SLURM runner",
            where="distributed.launcher",
            fix='use "torchrun"',
        )
    if dist is not None and dist.nnodes is not None and dist.nnodes != nodes:
        raise UserError(f"distributed.nnodes is {dist.nnodes} but slurm.nodes is {nodes}", where="distributed.nnodes",
                        fix="make them equal, or drop distributed.nnodes (slurm.nodes decides)")
    time = str(slurm.get("time") or minutes_for(timeout_s))
    if not TIME_FORMAT.match(time):
        raise UserError(f"'{time}' is not a SLURM time limit", where="slurm.time",
                        fix='write minutes, "HH:MM:SS" or "D-HH:MM:SS", e.g. "01:00:00"')
    gpus = slurm.get("gpus_per_node")
    ranks = (dist.nproc_per_node if dist and dist.nproc_per_node else None) or gpus or 1
    notes = []
    if partition_has_gpus is False and (gpus or ranks > 1):
        notes.append(f"partition {slurm.get('partition') or '(default)'} has no GPUs: GPU counts ignored "
                     f"(gpus_per_node {gpus}, nproc_per_node {ranks}), one rank per node")
        gpus, ranks = None, 1
    extra = {}
    for key in PASS_THROUGH:
        value = (ctx.slurm.model_extra or {}).get(key) if ctx.slurm else None
        if value is None:
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if not isinstance(value, (str, int)) or not str(value).strip():
            raise UserError(f"expected a string, got {value!r}", where=f"slurm.{key}")
        _sbatch(key, value, f"slurm.{key}")  # checked here, before anything runs
        extra[key] = str(value)
    network = (ctx.slurm.model_extra or {}).get("network_interface") if ctx.slurm else None
    if network is not None and not (isinstance(network, str) and re.match(r"^[\w.-]+$", network)):
        raise UserError(f"'{network}' is not a network interface name", where="slurm.network_interface")
    if slurm.get("partition"):
        _sbatch("partition", slurm["partition"], "slurm.partition")
    return JobSettings(
        nodes=nodes,
        ranks_per_node=ranks,
        partition=slurm.get("partition"),
        gpus_per_node=gpus,
        time=time,
        exclusive=bool(slurm.get("exclusive", True)),  # madengine: exclusive unless told
        port=(dist.port if dist and dist.port else DEFAULT_PORT),
        modules=list(slurm.get("modules") or []),
        extra=extra,
        network_interface=network,
        notes=notes,
    )


def _q(value: object) -> str:
    return shlex.quote(str(value))


def _sbatch(option: str, value: object, where: str) -> str:
    """One `#SBATCH --option=value` header line. A line break in the value would end the header there and make the
    rest of the value a shell line of the script (the `#` comments out only the first line, so quoting cannot help):
    refused."""
    text = str(value)
    if any(ch in text for ch in "\n\r\x0b\x0c\x85\u2028\u2029") or any(ord(ch) < 32 for ch in text):
        raise UserError(f"{text[:60]!r} contains a line break or control character: it cannot be an sbatch option",
                        where=where, fix="write it on one line, without control characters")
    return f"#SBATCH --{option}={_q(text)}"


def batch_script(job: JobSettings, *, name: str, workspace: str, plugin: str, env: dict[str, str],
                 title: str) -> str:
    """The sbatch script: resources, the rendezvous address (first node), the environment, one task per node."""
    lines = ["#!/bin/bash", _sbatch("job-name", name, "model name")]
    if job.partition:
        lines.append(_sbatch("partition", job.partition, "slurm.partition"))
    lines += [f"#SBATCH --nodes={job.nodes}", "#SBATCH --ntasks-per-node=1"]
    if job.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    lines.append(f"#SBATCH --time={job.time}")
    if job.exclusive:
        lines.append("#SBATCH --exclusive")
    lines += [_sbatch(key, value, f"slurm.{key}") for key, value in job.extra.items()]
    lines += [_sbatch("chdir", workspace, "--output-dir"),
              _sbatch("output", workspace + "/logs/slurm-%j.out", "--output-dir"), "",
              "# " + " ".join(title.split()),
              "# Written by `madengine-rocprof run --runner slurm`; each node runs task.sh (srun).",
              "set -uo pipefail"]
    lines += [f"module load {_q(m)}" for m in job.modules]
    lines += [
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"export MASTER_ADDR MASTER_PORT={job.port} NNODES={job.nodes} NPROC_PER_NODE={job.ranks_per_node}",
        f"export MAD_DEPLOYMENT_TYPE=slurm MAD_SLURM_JOB_ID=\"$SLURM_JOB_ID\" MAD_TOTAL_NODES={job.nodes} "
        f"MAD_RUNTIME_NGPUS={job.ranks_per_node}",
    ]
    if job.network_interface:
        lines.append(
            f"export NCCL_SOCKET_IFNAME={_q(job.network_interface)} GLOO_SOCKET_IFNAME={_q(job.network_interface)}"
        )
    lines += [f"export {k}={_q(v)}" for k, v in env.items() if k != "PYTHONPATH"]
    # our plugin first, then what the context asks for (as in the container runner)
    lines.append(f"export PYTHONPATH={_q(':'.join(p for p in (plugin, env.get('PYTHONPATH')) if p))}")
    lines.append(f"export MADENGINE_ROCPROF_PLUGIN={_q(plugin)}")
    lines += [
        'echo "[job] $SLURM_JOB_ID: $SLURM_JOB_NUM_NODES node(s) $SLURM_JOB_NODELIST, rendezvous '
        '$MASTER_ADDR:$MASTER_PORT"',
        # a rank that dies would leave the others waiting in a collective: the step ends for all (SIGTERM first)
        f"srun --kill-on-bad-exit=1 --label --ntasks-per-node=1 bash {_q(workspace + '/task.sh')}",
        "code=$?",
        'echo "[job] srun exit code $code"',
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def task_script(job: JobSettings, chain: Chain, *, workspace: str, plugin: str, command: str,
                hooks: list[tuple[str, ScriptRef, str]], hook_timeout: float, python: str = "python3") -> str:
    """What each node runs: `workspace/nodes/<hostname>/` is its own folder (profiler OUT with its manifest,
    samplers, logs, exit code); the workload runs there (model_scripts is linked in)."""
    ws = _q(workspace)
    runner = (f"torchrun --nnodes={job.nodes} --nproc_per_node={job.ranks_per_node} --node_rank=$SLURM_NODEID "
              f"--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT")
    lines = [
        "#!/bin/bash",
        "# One per node (srun). Written by `madengine-rocprof run --runner slurm`.",
        "set -uo pipefail",
        # scancel/time limit: SIGTERM reaches every process of the step; this script outlives the workload to record
        # its exit code and stop the samplers (SIGKILL comes KillWait seconds later)
        "trap 'echo \"[task] $(hostname): SIGTERM: the job is being ended\"' TERM",
        f"NODE_WS={ws}/nodes/$(hostname)",
        'mkdir -p "$NODE_WS/logs" "$NODE_WS/samplers" "$NODE_WS/.runner"',
        'ln -sfn ../../model_scripts "$NODE_WS/model_scripts"',
        'cd "$NODE_WS" || exit 1',
        "export NODE_RANK=$SLURM_NODEID MAD_NODE_RANK=$SLURM_NODEID",
        f'export MAD_MULTI_NODE_RUNNER="{runner}"',
        'echo "[task] $(hostname): node rank $NODE_RANK, workspace $NODE_WS"',
    ]
    for s in chain.samplers:
        env = " ".join(f"{k}={_q(v)}" for k, v in s.env.items())
        lines += [
            f"env {env} {python} -m madengine_rocprof.samplers {s.mode} --output \"$NODE_WS/samplers/{s.output_name}\" "
            f"--stop-file \"$NODE_WS/.runner/stop_{s.tool}\" > \"$NODE_WS/logs/sampler_{s.tool}.log\" 2>&1 &",
            f"sampler_{_ident(s.tool)}=$!",
        ]
    lines.append("code=0")
    pre = [(ref, path) for phase, ref, path in hooks if phase == "pre"]
    post = [(ref, path) for phase, ref, path in hooks if phase == "post"]
    for i, (ref, name) in enumerate(pre):
        lines.append(_hook_line(f"pre_{i}_{name.rsplit('.', 1)[0]}", ref, name, hook_timeout, guard="pre_failed"))
    lines += [
        'if [ -z "${pre_failed:-}" ]; then',
        # tee ignores SIGTERM so the workload can still write (no SIGPIPE) while it shuts down
        f"  {command} 2>&1 | (trap '' TERM; exec tee \"$NODE_WS/logs/run.log\")",
        "  code=${PIPESTATUS[0]}",
        "else",
        '  echo "[task] a pre-script failed: workload not started" | tee "$NODE_WS/logs/run.log"; code=1',
        "fi",
        'echo "$code" > "$NODE_WS/exit_code"',
    ]
    for s in chain.samplers:
        var = f"sampler_{_ident(s.tool)}"
        lines += [
            f'touch "$NODE_WS/.runner/stop_{s.tool}"',
            f'for _ in $(seq 50); do kill -0 "${var}" 2>/dev/null || break; sleep 0.1; done',
            f'kill "${var}" 2>/dev/null; wait "${var}"; echo $? > "$NODE_WS/.runner/sampler_{s.tool}.exit"',
        ]
    for i, (ref, name) in enumerate(post):
        lines.append(_hook_line(f"post_{i}_{name.rsplit('.', 1)[0]}", ref, name, hook_timeout, guard=None))
    lines += ['echo "[task] $(hostname): workload exit code $code"', 'exit "$code"']
    return "\n".join(lines) + "\n"


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _hook_line(step: str, ref: ScriptRef, name: str, timeout: float, guard: str | None) -> str:
    """`bash <script> <args>` in model_scripts, its words quoted (never shell code), under a time limit."""
    argv = " ".join(_q(a) for a in ["bash", name, *shlex.split(ref.args)])
    log = f'"$NODE_WS/logs/{_ident(step)}.log"'
    failed = f'echo {_q(step)} >> "$NODE_WS/hook_failures"' + (f"; {guard}=1" if guard else "")
    return f'(cd "$NODE_WS/model_scripts" && timeout {timeout:g} {argv}) > {log} 2>&1 || {{ {failed}; }}'
