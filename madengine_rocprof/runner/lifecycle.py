"""One profiled run per selected model: build or reuse the image, start the container (or run locally), pre-scripts,
samplers, the workload under the tool chain, then ALWAYS: stop samplers, post-scripts, remove the container,
evaluate and write run.json + the perf.csv row, whatever happened (success, failure, timeout, Ctrl-C)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madengine_rocprof.errors import UserError, UserErrors, from_os_error
from madengine_rocprof.models import AdditionalContext, ScriptRef
from madengine_rocprof.registry.store import BUILTIN_COUNTERS_DIR
from madengine_rocprof.runner import host, stopping
from madengine_rocprof.runner.chain import (
    Chain,
    Sampler,
    distributed_env,
)
from madengine_rocprof.runner.executors import DockerExecutor, Executor, LocalExecutor, StepResult
from madengine_rocprof.runner.images import BuildFailed, default_base, ensure_image, select_dockerfile
from madengine_rocprof.runner.planning import (
    PACKAGE_DIR,
    SCRIPTS_DIR,
    Planned,
    RunOptions,
    check_run_dir,
    plan_runs,
    put_back,
    run_dir_name,
    set_aside,
    settle_previous,
    unrunnable_here,
)
from madengine_rocprof.runner.record import RunRecord, git_commit, say, write_results
from madengine_rocprof.runner.results import count_lines
from madengine_rocprof.runner.selection import ModelCard


@dataclass(frozen=True)
class Target:
    """Where the models run: the runner kind, its Docker client (docker only) and the GPU vendor."""

    runner: str        # local | docker
    client: Any        # docker.DockerClient for the docker runner, else None
    vendor: str        # the vendor used (the context's, or what was detected)
    detected: str      # what this machine has


def choose_runner(kind: str) -> tuple[str, Any]:
    if kind not in ("auto", "docker", "local"):
        raise UserError(f"unknown runner '{kind}'", where="--runner", fix="use auto, docker, local or slurm")
    if kind == "local":
        return "local", None
    why: list[str] = []
    client = host.docker_client(why=why)
    if client is None and kind == "docker":
        raise UserError("no Docker engine answers" + "".join(f" ({w})" for w in why), where="--runner docker",
                        fix="start one (sudo bash scripts/setup.sh --docker) or use --runner local")
    return ("docker", client) if client is not None else ("local", None)


def run_models(opts: RunOptions) -> int:
    """Run every selected model under the chosen tools: `madengine-rocprof run`'s entry.

    Args:
        opts: what to run (tags, context file or JSON, models.json), where (runner auto|docker|local|slurm,
            output_dir) and limits (timeout, hook_timeout).

    Returns:
        0 when every model succeeded, 1 when any failed. Each model leaves its folder (run.json, logs, profiler
        output) and a perf.csv row under opts.output_dir.

    Raises:
        UserError: bad input (unknown tag, invalid context, missing Dockerfile), before anything is written.
        KeyboardInterrupt: Ctrl-C, SIGTERM or SIGHUP (stopping.Interrupted, exit code 128 + signal), re-raised
            once the interrupted model's results are written.
    """
    if opts.runner == "slurm":
        from madengine_rocprof.runner.slurm import run_slurm
        with stopping.handled():  # a scheduler's SIGTERM or a closed terminal: cancel the job, keep the results
            return run_slurm(opts)
    ctx, warnings, planned = plan_runs(opts)
    for w in warnings:
        say(f"warning: {w}")
    runner, client = choose_runner(opts.runner)
    detected = host.detect_vendor()
    vendor, vendor_notes = host.effective_vendor(ctx.gpu_vendor, detected)
    if runner == "docker":  # a GPU index this machine lacks is bad input: found before anything is written
        vendor_notes += host.device_options(vendor, ctx.docker_gpus)[1]
    for note in vendor_notes:
        say(f"warning: {note}")
    if runner == "docker" and not ctx.MAD_CONTAINER_IMAGE:
        for item in planned:  # a missing Dockerfile is bad input: refuse before anything is written
            select_dockerfile(opts.model_root, item.card.dockerfile, vendor, ctx.guest_os if vendor != "CPU" else None)
    if runner == "local" and opts.require_profilers:  # refused before anything runs or is written
        problems = [p for item in planned for p in unrunnable_here(item.chain.profiler_tools,
                                                                   {**os.environ, **item.chain.env})]
        if problems:
            raise UserErrors(list({str(p): p for p in problems}.values()))
    out_dir = opts.output_dir.resolve()
    for item in planned:
        check_run_dir(out_dir, run_dir_name(item))
    out_dir.mkdir(parents=True, exist_ok=True)
    say(f"[run] {len(planned)} model(s), tools: {planned[0].chain.label}, runner: {runner}, target: {vendor}, "
        f"results: {out_dir}")
    target = Target(runner, client, vendor, detected)
    statuses = []
    with stopping.handled():  # SIGTERM and SIGHUP get Ctrl-C's clean-up
        for item in planned:
            statuses.append(run_one(item, ctx, opts, target, out_dir, warnings + vendor_notes))
    failed = sum(s != "SUCCESS" for s in statuses)
    say(f"[run] done: {len(statuses) - failed} succeeded, {failed} failed; perf.csv: {out_dir / 'perf.csv'}")
    return 0 if failed == 0 else 1


def _executor(target: Target, image: str, ws: Path, opts: RunOptions, ctx: AdditionalContext, chain: Chain,
              base_env: dict[str, str]) -> Executor:
    vendor = target.vendor
    if target.runner == "docker":
        plugin = DockerExecutor.plugin_in
        mounts = {
            str(ws): {"bind": DockerExecutor.workspace_in, "mode": "rw"},
            str(PACKAGE_DIR): {"bind": f"{plugin}/madengine_rocprof", "mode": "ro"},
            str(opts.repo / "scripts" / "rocprof_wrapper.sh"): {
                "bind": f"{plugin}/scripts/rocprof_wrapper.sh",
                "mode": "ro",
            },
            str(BUILTIN_COUNTERS_DIR): {"bind": f"{plugin}/counters", "mode": "ro"},
        }
        for name, folder in chain.counter_dirs.items():
            mounts[str(folder)] = {"bind": f"{plugin}/{name}", "mode": "ro"}
        for inside, outside in ctx.docker_mounts.items():
            mounts[str(Path(outside).resolve())] = {"bind": inside, "mode": "rw"}
        if not (opts.repo / "scripts" / "rocprof_wrapper.sh").is_file():
            del mounts[str(opts.repo / "scripts" / "rocprof_wrapper.sh")]
        run_options, _ = host.device_options(vendor, ctx.docker_gpus)
        if ctx.docker_cpus:
            run_options["cpuset_cpus"] = ctx.docker_cpus
        pythonpath = ":".join(p for p in (plugin, base_env.get("PYTHONPATH")) if p)  # the context's stays, after ours
        env = {**base_env, "PYTHONPATH": pythonpath, "MADENGINE_ROCPROF_PLUGIN": plugin}
        return DockerExecutor(target.client, image, ws, mounts, env, run_options,
                              {"org.madengine-rocprof.run": str(ws)}, say)
    plugin = str(opts.repo)
    env = dict(os.environ)
    env.update(base_env)
    env.update(host.visible_devices_env(vendor, ctx.docker_gpus))
    if vendor == "CPU":
        env.setdefault("TRITON_INTERPRET", "1")  # as in the CPU image: Triton has no CPU backend, only its interpreter
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (plugin, env.get("PYTHONPATH")) if p)
    env["MADENGINE_ROCPROF_PLUGIN"] = plugin
    return LocalExecutor(ws, Path(plugin), env)


def _fill(text: str, workspace: str, plugin: str) -> str:
    """Put the paths into the generated command, quoted for where each placeholder stands (bare, or inside the
    single or double quotes shlex.quote and the user's own cmd put around it): a folder named `a b` or `$(x)`
    stays one word and never runs."""
    values = {"{workspace}": workspace, "{plugin}": plugin}
    out, i, single, double = [], 0, False, False
    while i < len(text):
        key = next((k for k in values if text.startswith(k, i)), None)
        if key is not None:
            value = values[key]
            if single:
                out.append(value.replace("'", "'\"'\"'"))
            elif double:
                out.append(re.sub(r'([\\$`"])', r"\\\1", value))
            else:
                out.append(shlex.quote(value))
            i += len(key)
            continue
        ch = text[i]
        if ch == "\\" and not single:
            out.append(text[i:i + 2])
            i += 2
            continue
        if ch == "'" and not double:
            single = not single
        elif ch == '"' and not single:
            double = not double
        out.append(ch)
        i += 1
    return "".join(out)


def run_one(item: Planned, ctx: AdditionalContext, opts: RunOptions, target: Target, out_dir: Path,
            warnings: list[str]) -> str:
    """One model under its chain: prepare the run directory, run the steps, ALWAYS clean up and write the results.
    Returns SUCCESS or FAILURE; a stopping signal is re-raised (as stopping.Interrupted) once results are written."""
    card, chain = item.card, item.chain
    ws = out_dir / run_dir_name(item)
    _prepare_run_dir(item, opts, ws)
    say(f"[run] === {card.name} under [{chain.label}] -> {ws}")
    record = RunRecord(item, ws, out_dir, target.runner, target.vendor, target.detected, warnings)
    executor: Executor | None = None
    started = False
    try:
        image_tag = _image(card, ctx, opts, target, ws / "logs", record.image) if target.runner == "docker" else ""
        executor = _executor(target, image_tag, ws, opts, ctx, chain, _base_env(ctx, opts, chain))
        executor.start()
        started = True
        record.image["id"] = record.image.get("id") or executor.image_id
        _run_steps(record, executor, opts)
    except BuildFailed as err:
        record.failures.append(str(err))
        say(f"[run] {err}")
    except KeyboardInterrupt:
        record.interrupted = True
        say(f"[run] interrupted ({stopping.name()}): cleaning up; a second signal hurries it")
    except UserError:
        raise
    except Exception as err:  # docker API errors (image missing, daemon gone): recorded, results still written
        record.failures.append(f"{type(err).__name__}: {err}")
        say(f"[run] error: {type(err).__name__}: {err}")
    finally:
        status = _clean_up_and_write(record, executor if started else None, executor, ctx, opts)
        note = settle_previous(ws, status)
        if note:
            say(note)
    if record.interrupted or stopping.received() is not None:
        raise stopping.Interrupted(stopping.received() or signal.SIGINT)
    return status


def _prepare_run_dir(item: Planned, opts: RunOptions, ws: Path) -> None:
    kept = None
    try:
        kept = set_aside(ws)  # a rerun keeps the previous run in <out>/.previous until it succeeds itself
        for sub in (ws / "logs", ws / "profiler", ws / "samplers"):
            sub.mkdir(parents=True, exist_ok=True)
        # symlinks=True: a link in the script folder is copied as a link, never followed out of it
        shutil.copytree((opts.model_root / item.card.scripts).parent, ws / SCRIPTS_DIR, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for _, _, path in item.hooks:
            shutil.copy2(path, ws / SCRIPTS_DIR / path.name)
    except OSError as err:  # a full disk or a read-only tree before the run starts: no half-made run directory
        shutil.rmtree(ws, ignore_errors=True)
        put_back(ws, kept)
        if isinstance(err, shutil.Error) and err.args and isinstance(err.args[0], list) and err.args[0]:
            _src, dst, why = err.args[0][0]  # copytree gathers (source, destination, reason) per file
            reason = str(why).split("] ", 1)[-1].split(": '", 1)[0]
            raise UserError(f"cannot prepare the run directory: {reason}", file=str(dst),
                            fix="free space on the output file system, or choose another --output-dir") from None
        raise from_os_error(err, "cannot prepare the run directory") from None


def _base_env(ctx: AdditionalContext, opts: RunOptions, chain: Chain) -> dict[str, str]:
    env = {**chain.env, **distributed_env(ctx)}
    commit = git_commit(opts.model_root, short=False)
    if commit:
        env.setdefault("GIT_SHA", commit)  # the workload runs from a copy outside the checkout
    return env


def _run_steps(record: RunRecord, executor: Executor, opts: RunOptions) -> None:
    """Pre-scripts, samplers, then the workload (skipped when a pre-script failed or a signal came)."""
    item, logs = record.item, record.ws / "logs"
    for i, (_phase, ref, path) in enumerate(h for h in item.hooks if h[0] == "pre"):
        step = record.add_step(_hook(executor, f"pre_{i}_{path.stem}", ref, path, opts.hook_timeout, opts.echo))
        if not step.ok:
            record.failures.append(f"pre-script {path.name}: {step.describe()}; workload not started")
            return
    if record.interrupted:
        return
    for s in item.chain.samplers:
        _start_sampler(executor, s, logs)
    command = _fill(item.chain.command, executor.workspace, executor.plugin_home)
    say(f"[run] workload: {command}  (timeout {item.timeout:g}s)")
    step = record.add_step(executor.run_step("run", command, executor.workspace, item.timeout, logs / "run.log",
                                             opts.echo))
    say(f"[run] workload {step.describe()} after {step.duration_s:.1f}s")


def _clean_up_and_write(record: RunRecord, started: Executor | None, executor: Executor | None,
                        ctx: AdditionalContext, opts: RunOptions) -> str:
    """Samplers stopped, post-scripts (not after a signal), the executor closed, then the results written: a
    second signal or a dead container never skips what follows."""
    try:
        if started is not None:
            for s in record.item.chain.samplers:
                record.samplers.append(_stop_sampler(started, s, record.ws))
            if not record.interrupted:  # post-scripts run after a failure or a timeout too; a signal means stop now
                for i, (_phase, ref, path) in enumerate(h for h in record.item.hooks if h[0] == "post"):
                    step = record.add_step(_hook(started, f"post_{i}_{path.stem}", ref, path, opts.hook_timeout,
                                                 opts.echo))
                    if not step.ok:
                        record.failures.append(f"post-script {path.name}: {step.describe()}")
    except KeyboardInterrupt:
        record.interrupted = True
    except Exception as err:  # the container died under us: still remove it and write the results
        record.failures.append(f"cleanup: {type(err).__name__}: {err}")
    finally:
        try:
            if executor is not None:
                executor.close()  # removes the container even when interrupted (its own finally)
        except KeyboardInterrupt:  # a (second) Ctrl-C while cleaning up: still write the results
            record.interrupted = True
        with stopping.shielded():  # what is known is written whatever signal comes now
            shutil.rmtree(record.ws / ".runner", ignore_errors=True)
            record.interrupted |= stopping.received() is not None
            status = write_results(record, ctx, opts)
    return status


def _image(card: ModelCard, ctx: AdditionalContext, opts: RunOptions, target: Target, logs: Path,
           image: dict[str, Any]) -> str:
    vendor = target.vendor
    if ctx.MAD_CONTAINER_IMAGE:
        image.update(tag=ctx.MAD_CONTAINER_IMAGE, dockerfile="", build_duration_s=0.0, base_docker="")
        say(f"[build] using MAD_CONTAINER_IMAGE {ctx.MAD_CONTAINER_IMAGE}: no build")
        return ctx.MAD_CONTAINER_IMAGE
    dockerfile = select_dockerfile(opts.model_root, card.dockerfile, vendor, ctx.guest_os if vendor != "CPU" else None)
    build_log = logs / "build.log"
    tag, image_id, seconds = ensure_image(target.client, dockerfile, dict(ctx.docker_build_arg), build_log, say)
    image.update(
        tag=tag,
        id=image_id,
        dockerfile=str(dockerfile.relative_to(opts.model_root)),
        build_duration_s=seconds,
        base_docker=ctx.docker_build_arg.get("BASE_DOCKER") or default_base(dockerfile),
    )
    return tag


def _hook(executor: Executor, name: str, ref: ScriptRef, path: Path, timeout: float, echo: bool) -> StepResult:
    command = shlex.join(["bash", path.name, *shlex.split(ref.args)])  # args are words, never shell code
    say(f"[run] {name}: {command}")
    ws_host = executor.state.parent
    return executor.run_step(
        name, command, f"{executor.workspace}/{SCRIPTS_DIR}", timeout, ws_host / "logs" / f"{name}.log", echo
    )


def _start_sampler(executor: Executor, s: Sampler, logs: Path) -> None:
    out = f"{executor.workspace}/samplers/{s.output_name}"
    stop = f"{executor.workspace}/.runner/stop_{s.tool}"
    argv = [executor.python, "-m", "madengine_rocprof.samplers", s.mode, "--output", out, "--stop-file", stop]
    say(f"[run] sampler {s.tool} ({s.mode}) -> samplers/{s.output_name}")
    executor.start_background(s.tool, argv, logs / f"sampler_{s.tool}.log", env=s.env)


def _stop_sampler(executor: Executor, s: Sampler, ws: Path) -> dict[str, Any]:
    code = executor.stop_background(s.tool, ws / ".runner" / f"stop_{s.tool}")
    csv_path = ws / "samplers" / s.output_name
    rows = max(0, count_lines(csv_path) - 1) if csv_path.exists() else 0
    result = {"tool": s.tool, "mode": s.mode, "exit_code": code, "csv": f"samplers/{s.output_name}", "rows": rows,
              "log": f"logs/sampler_{s.tool}.log"}
    if code == 3:
        result["note"] = "no GPU telemetry here (NVML/amdsmi missing or no GPU): header only"
    elif code != 0:
        result["note"] = f"sampler exit code {code}: see {result['log']}"
    say(f"[run] sampler {s.tool} stopped: {rows} samples" + (f" ({result['note']})" if "note" in result else ""))
    return result


