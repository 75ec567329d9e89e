"""`madengine-rocprof run --runner slurm`: one SLURM job per model x tool chain, on as many nodes as the context asks.

For each run the runner checks the cluster (client commands on PATH, partition, node count) before writing anything,
then writes `job.sbatch` + `task.sh` into the run directory (which must be on storage every node sees, as on any
cluster), submits with `sbatch`, follows the job (state changes and the job's output on screen), and collects what
every node wrote under `nodes/<hostname>/`. On our timeout or Ctrl-C the job is cancelled (`scancel`: SIGTERM, then
SIGKILL after the cluster's KillWait) and everything written so far is kept and evaluated. See docs/runner.md."""
from __future__ import annotations

import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from madengine_rocprof import inputs
from madengine_rocprof.atomic import write_json
from madengine_rocprof.errors import UserError
from madengine_rocprof.models import AdditionalContext
from madengine_rocprof.registry.store import BUILTIN_COUNTERS_DIR
from madengine_rocprof.runner import slurm_cluster as cluster
from madengine_rocprof.runner import stopping
from madengine_rocprof.runner.planning import (
    PACKAGE_DIR,
    SCRIPTS_DIR,
    Planned,
    RunOptions,
    check_run_dir,
    plan_runs,
    run_dir_name,
    set_aside,
    settle_previous,
)
from madengine_rocprof.runner.record import chain_summary, git_commit, now, precision_of, profiler_outcomes, say
from madengine_rocprof.runner.results import append_perf_row, parse_performance
from madengine_rocprof.runner.slurm_jobs import JobSettings, batch_script, job_settings, task_script
from madengine_rocprof.wrapper.contracts import RunJson, RunStatus, WorkloadResult

POLL_S = 2.0
CANCEL_WAIT_S = 90.0           # after scancel: KillWait (SIGTERM -> SIGKILL) plus the time to clean up
SAFE_PATH = re.compile(r"^[\w./+@%,:=-]+$")  # the run directory appears in scripts: no spaces or shell characters
PLUGIN_DIR = ".plugin"          # the wrapper package, its script and counter files, staged on the shared storage
SCHEMA_VERSION = 1


def run_slurm(opts: RunOptions) -> int:
    """Every selected model as a SLURM job; 0 when all succeeded, 1 when any failed; Ctrl-C re-raised after results."""
    ctx, warnings, planned = plan_runs(opts)
    cluster.require_client()
    nodes = ctx.slurm.nodes if ctx.slurm and ctx.slurm.nodes else 1
    partition = cluster.pick_partition(ctx.slurm.partition if ctx.slurm else None, nodes)
    jobs = [job_settings(ctx, item.timeout, partition.gpus) for item in planned]
    out_dir = opts.output_dir.resolve()
    for item in planned:  # the run directory appears unquoted in profiler commands: no spaces or shell characters
        if not SAFE_PATH.match(str(out_dir / run_dir_name(item))):
            raise UserError(f"the run directory {out_dir / run_dir_name(item)} has characters that job scripts cannot "
                            "carry safely", where="--output-dir",
                            fix="use paths and model names of letters, digits and ./_+-@%,:=")
    if ctx.slurm and ctx.slurm.output_dir:
        warnings.append(f"slurm.output_dir {ctx.slurm.output_dir!r} ignored: results go to --output-dir ({out_dir})")
    for w in warnings + jobs[0].notes:
        say(f"warning: {w}")
    for item in planned:  # a rerun replaces its run directory: it must be a plain folder inside out_dir
        check_run_dir(out_dir, run_dir_name(item))
    out_dir.mkdir(parents=True, exist_ok=True)
    say(f"[run] {len(planned)} model(s), tools: {planned[0].chain.label}, runner: slurm, partition {partition.name}, "
        f"{nodes} node(s) x {jobs[0].ranks_per_node} rank(s), results: {out_dir}")
    statuses = [run_job(item, job, ctx, opts, out_dir, warnings + job.notes)
                for item, job in zip(planned, jobs, strict=True)]
    failed = sum(s != "SUCCESS" for s in statuses)
    say(f"[run] done: {len(statuses) - failed} succeeded, {failed} failed; perf.csv: {out_dir / 'perf.csv'}")
    return 0 if failed == 0 else 1


def _stage(item: Planned, opts: RunOptions, ws: Path) -> Path:
    """The run directory as the nodes need it: model scripts and our plugin (wrapper, counters), nothing else."""
    set_aside(ws)  # a rerun keeps the previous run in <out>/.previous until it succeeds itself
    (ws / "logs").mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree((opts.model_root / item.card.scripts).parent, ws / SCRIPTS_DIR, ignore=ignore)
    for _, _, path in item.hooks:
        shutil.copy2(path, ws / SCRIPTS_DIR / path.name)
    plugin = ws / PLUGIN_DIR
    shutil.copytree(PACKAGE_DIR, plugin / "madengine_rocprof", ignore=ignore)
    wrapper = opts.repo / "scripts" / "rocprof_wrapper.sh"
    if wrapper.is_file():
        (plugin / "scripts").mkdir()
        shutil.copy2(wrapper, plugin / "scripts" / wrapper.name)
    shutil.copytree(BUILTIN_COUNTERS_DIR, plugin / "counters")
    for name, folder in item.chain.counter_dirs.items():
        shutil.copytree(folder, plugin / name)
    return plugin


def run_job(item: Planned, job: JobSettings, ctx: AdditionalContext, opts: RunOptions, out_dir: Path,
            warnings: list[str]) -> str:
    card, chain = item.card, item.chain
    ws = out_dir / run_dir_name(item)
    plugin = _stage(item, opts, ws)
    # {workspace} is each node's own folder, the task's working directory: the wrapper makes `./profiler` absolute
    command = chain.command.replace("{workspace}", ".").replace("{plugin}", str(plugin))
    env = dict(chain.env)
    commit = git_commit(opts.model_root, short=False)
    if commit:
        env.setdefault("GIT_SHA", commit)
    hooks = [(phase, ref, path.name) for phase, ref, path in item.hooks]
    title = f"{card.name} under [{chain.label}]"
    (ws / "task.sh").write_text(task_script(job, chain, workspace=str(ws), plugin=str(plugin), command=command,
                                            hooks=hooks, hook_timeout=opts.hook_timeout), encoding="utf-8")
    script = ws / "job.sbatch"
    script.write_text(batch_script(job, name=f"mrp-{card.name}", workspace=str(ws), plugin=str(plugin), env=env,
                                   title=title), encoding="utf-8")

    say(f"[run] === {title} -> {ws}")
    started_at, t0 = now(), time.monotonic()
    failures: list[str] = []
    job_id, final, cancelled_for = "", cluster.JobState("NOT_SUBMITTED"), None
    interrupted = False
    try:
        job_id = cluster.submit(str(script))
        say(f"[slurm] submitted job {job_id}: {job.nodes} node(s), partition {job.partition or '(default)'}, "
            f"time limit {job.time}; our timeout {item.timeout:g}s; script {script}")
        final, cancelled_for, interrupted = follow(job_id, item.timeout, ws / "logs" / f"slurm-{job_id}.out", opts.echo)
    except cluster.SlurmError as err:
        failures.append(str(err))
        say(f"[slurm] {err}")
    except KeyboardInterrupt:  # Ctrl-C before the job id was known
        interrupted = True
    status = _finish(item, job, ctx, opts, ws, job_id, final, cancelled_for, interrupted, failures, started_at,
                     time.monotonic() - t0, warnings, out_dir)
    note = settle_previous(ws, status)
    if note:
        say(note)
    if interrupted:
        raise stopping.Interrupted(stopping.received() or signal.SIGINT)
    return status


def follow(job_id: str, timeout: float, log: Path, echo: bool) -> tuple[cluster.JobState, str | None, bool]:
    """Poll until the job has ended; cancel it on our timeout or Ctrl-C (a second Ctrl-C stops the waiting).
    Returns (final state, why we cancelled it or None, interrupted)."""
    start = time.monotonic()
    shown, offset = None, 0
    cancelled_for, cancelled_at, interrupted = None, 0.0, False
    state = cluster.JobState("UNKNOWN")
    errors = 0
    while True:
        try:
            if interrupted and stopping.hurry():  # a second signal (runner/stopping.py): stop waiting
                say(f"[slurm] not waiting for job {job_id} to end")
                return state, cancelled_for, interrupted
            try:
                state = cluster.job_state(job_id)
                errors = 0
            except cluster.SlurmError as err:
                errors += 1
                if errors >= 5:  # SLURM stopped answering: do not leave a job behind that nobody follows
                    say(f"[slurm] giving up following job {job_id}: {err}; scancel")
                    _cancel(job_id)
                    return state, cancelled_for or "unreachable", interrupted
            now = (state.state, state.reason, state.nodes)
            if now != shown:
                shown = now
                extra = f" on {state.nodes}" if state.nodes and state.state == "RUNNING" else ""
                extra += f" ({state.reason})" if state.reason else ""
                extra += f", exit code {state.exit_code}" if not state.active and state.exit_code else ""
                say(f"[slurm] job {job_id}: {state.state}{extra}  [{time.monotonic() - start:.0f}s]")
            offset = _echo_new(log, offset, echo)
            if not state.active:
                return state, cancelled_for, interrupted
            if cancelled_for is None and time.monotonic() - start > timeout:
                cancelled_for = "timeout"
                cancelled_at = time.monotonic()
                say(f"[slurm] job {job_id}: our timeout of {timeout:g}s passed: scancel (outputs are kept)")
                _cancel(job_id)
            if cancelled_for and time.monotonic() - cancelled_at > CANCEL_WAIT_S:
                say(f"[slurm] job {job_id} still {state.state} {CANCEL_WAIT_S:g}s after scancel: not waiting longer")
                return state, cancelled_for, interrupted
            time.sleep(POLL_S)
        except KeyboardInterrupt:
            if interrupted:  # a second Ctrl-C: stop waiting, still write the results
                say(f"[slurm] not waiting for job {job_id} to end")
                return state, cancelled_for, interrupted
            interrupted = True
            cancelled_for, cancelled_at = "interrupted", time.monotonic()
            say(f"[slurm] interrupted: cancelling job {job_id} (outputs are kept; Ctrl-C again to stop waiting)")
            _cancel(job_id)


def _cancel(job_id: str) -> None:
    problem = cluster.cancel(job_id)
    if problem:
        say(f"[slurm] scancel {job_id}: {problem}")


def _echo_new(log: Path, offset: int, echo: bool) -> int:
    """Show what the job wrote since the last poll (its output file grows on the shared storage)."""
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return offset
    if echo and data:
        text = data.decode("utf-8", errors="replace")
        complete = text[: text.rfind("\n") + 1]  # whole lines only; the rest comes with the next poll
        if complete:
            print("".join(f"    | {line}\n" for line in complete.splitlines()), end="", flush=True)
        return offset + len(complete.encode("utf-8"))
    return offset + len(data)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _node_results(item: Planned, ws: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """What each node left in nodes/<hostname>/: exit code, profiler outcome (its own manifest), samplers, hooks."""
    nodes, failures = [], []
    for node_ws in sorted(p for p in (ws / "nodes").glob("*") if p.is_dir()):
        host = node_ws.name
        code_text = _read(node_ws / "exit_code").strip()
        code = int(code_text) if code_text.lstrip("-").isdigit() else None
        profilers, profiler_failures = profiler_outcomes(item.chain, node_ws)
        failures += [f"{host}: {f}" for f in profiler_failures]
        if code is None:
            failures.append(f"{host}: the workload did not finish (no exit code recorded)")
        elif code != 0:
            failures.append(f"{host}: workload exit code {code}")
        hook_failures = _read(node_ws / "hook_failures").split()
        failures += [f"{host}: script {h} failed (see nodes/{host}/logs/{h}.log)" for h in hook_failures]
        samplers = []
        for s in item.chain.samplers:
            csv_path = node_ws / "samplers" / s.output_name
            rows = max(0, len(_read(csv_path).splitlines()) - 1)
            exit_text = _read(node_ws / ".runner" / f"sampler_{s.tool}.exit").strip()
            sampler = {"tool": s.tool, "mode": s.mode, "csv": f"nodes/{host}/samplers/{s.output_name}", "rows": rows,
                       "exit_code": int(exit_text) if exit_text.isdigit() else None}
            if sampler["exit_code"] == 3:
                sampler["note"] = "no GPU telemetry here (NVML/amdsmi missing or no GPU): header only"
            samplers.append(sampler)
        nodes.append({"host": host, "exit_code": code, "profilers": profilers, "samplers": samplers,
                      "hook_failures": hook_failures, "log": f"nodes/{host}/logs/run.log"})
    return nodes, failures


def _finish(item: Planned, job: JobSettings, ctx: AdditionalContext, opts: RunOptions, ws: Path, job_id: str,
            final: cluster.JobState, cancelled_for: str | None, interrupted: bool, failures: list[str],
            started_at: str, duration: float, warnings: list[str], out_dir: Path) -> str:
    card, chain = item.card, item.chain
    if cancelled_for == "timeout":
        failures.append(f"workload timed out after {item.timeout:g}s: job {job_id} cancelled (scancel)")
    elif interrupted:
        failures.append("interrupted (Ctrl-C)" + (f": job {job_id} cancelled (scancel)" if job_id else ""))
    elif final.state == "TIMEOUT":
        failures.append(f"SLURM's time limit {job.time} ended job {job_id}")
    elif job_id and final.state != "COMPLETED":
        failures.append(
            f"SLURM job {job_id} {final.state}" + (f" (exit code {final.exit_code})" if final.exit_code else "")
        )
    nodes, node_failures = _node_results(item, ws) if job_id else ([], [])
    failures += node_failures
    if job_id and len(nodes) < job.nodes:
        failures.append(f"{len(nodes)} of {job.nodes} nodes ran the task (see logs/slurm-{job_id}.out)")
    performance = None
    for node in nodes:
        performance = performance or parse_performance(_read(ws / node["log"]))
    if performance is None and job_id and not failures:
        failures.append("no 'performance: <value> <metric>' line in any node's output")
    result_file = next(iter(sorted((ws / "nodes").glob("*/workload_result.json"))), None)
    device_name = ""
    precision = card.training_precision
    if result_file is not None:
        try:
            result: WorkloadResult = inputs.load_json_object(result_file, "workload_result.json")  # type: ignore
            if result.get("status") == "failed":
                failures.append(f"{result_file.relative_to(ws)} says status failed")
            device = result.get("device") or {}
            device_name = str(device.get("arch") or device.get("name") or "") if device.get("type") != "cpu" else ""
            precision = precision_of(result, card.training_precision)
        except (UserError, AttributeError):
            failures.append(f"{result_file.relative_to(ws)} is unreadable")
    status: RunStatus = "SUCCESS" if not failures else "FAILURE"
    target = "CPU" if job.gpus_per_node is None else (ctx.gpu_vendor or "GPU")
    manifest: RunJson = {
        "schema_version": SCHEMA_VERSION, "tool": "madengine-rocprof run", "model": card.name, "card": card.raw,
        "args": card.args, "status": status, "failures": failures, "warnings": warnings,
        "started_at": started_at, "duration_s": round(duration, 3), "runner": "slurm",
        "context": ctx.model_dump(mode="json", by_alias=True, exclude_none=True),
        "chain": chain_summary(chain, opts.first_outermost),
        "timeout_s": item.timeout,
        "slurm": {"job_id": job_id, "state": final.state, "exit_code": final.exit_code, "state_from": final.source,
                  "nodelist": final.nodes, "partition": job.partition, "nodes": job.nodes,
                  "ranks_per_node": job.ranks_per_node, "gpus_per_node": job.gpus_per_node, "time": job.time,
                  "exclusive": job.exclusive, "cancelled": cancelled_for, "script": "job.sbatch", "task": "task.sh",
                  "output": f"logs/slurm-{job_id}.out" if job_id else ""},
        "nodes": nodes,
        "performance": {"value": performance[0], "metric": performance[1]} if performance else None,
    }
    write_json(ws / "run.json", manifest)
    ranks = job.nodes * job.ranks_per_node
    append_perf_row(out_dir / "perf.csv", {
        "model": card.name, "n_gpus": ranks, "nnodes": job.nodes, "gpus_per_node": job.ranks_per_node,
        "training_precision": precision, "pipeline": "", "args": card.args, "tags": ",".join(card.tags),
        "docker_file": "", "base_docker": "", "docker_sha": "", "docker_image": "",
        "git_commit": git_commit(opts.model_root), "machine_name": final.nodes, "deployment_type": "slurm",
        "launcher": "torchrun", "gpu_architecture": device_name or target,
        "performance": performance[0] if performance else "", "metric": performance[1] if performance else "",
        "relative_change": "", "status": status, "build_duration": 0, "test_duration": round(duration, 3),
        "dataname": "", "data_provider_type": "", "data_size": "", "data_download_duration": "", "build_number": "0",
        "additional_docker_run_options": "", "run_dir": ws.name,
    })
    mark = "SUCCESS" if status == "SUCCESS" else "FAILURE: " + "; ".join(failures)
    say(f"[run] {card.name} [{chain.label}]: {mark}")
    return status
