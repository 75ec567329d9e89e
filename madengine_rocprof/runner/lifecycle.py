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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madengine_rocprof.errors import UserError, from_os_error
from madengine_rocprof.models import AdditionalContext, ScriptRef, load_context
from madengine_rocprof.registry.store import BUILTIN_COUNTERS_DIR, PACKAGE_ROOT
from madengine_rocprof.runner import host, stopping
from madengine_rocprof.runner.chain import (
    Chain,
    Sampler,
    build_chain,
    distributed_env,
    model_command,
)
from madengine_rocprof.runner.executors import DockerExecutor, Executor, LocalExecutor, StepResult
from madengine_rocprof.runner.images import BuildFailed, default_base, ensure_image, select_dockerfile
from madengine_rocprof.runner.record import RunRecord, git_commit, say, write_results
from madengine_rocprof.runner.results import count_lines
from madengine_rocprof.runner.selection import ModelCard, load_models, select_models

DEFAULT_TIMEOUT_S = 7200.0     # madengine's default model timeout
DEFAULT_HOOK_TIMEOUT_S = 600.0  # madengine's fixed pre/post script timeout
SCRIPTS_DIR = "model_scripts"   # the card's script folder, copied into the workspace (madengine copies it too)
PACKAGE_DIR = Path(__file__).resolve().parents[1]
SCHEMA_VERSION = 1


@dataclass
class RunOptions:
    tags: list[str]
    context_file: str | None = None
    context_json: str | None = None
    runner: str = "auto"                  # auto | docker | local
    output_dir: Path = Path("runs")
    timeout: float | None = None
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT_S
    models_file: Path = Path("models.json")
    first_outermost: bool = False
    echo: bool = True
    repo: Path = field(default_factory=lambda: PACKAGE_ROOT)  # the plugin: wrapper script, counters

    @property
    def model_root(self) -> Path:
        """Card paths (scripts, dockerfile, pre/post scripts) are relative to models.json's folder, as in MAD."""
        return self.models_file.resolve().parent


@dataclass
class Planned:
    card: ModelCard
    chain: Chain
    timeout: float
    hooks: list[tuple[str, ScriptRef, Path]]   # (phase, ref, host file)


def _words(text: str, where: str, file: str | None = None) -> list[str]:
    """Arguments split as a shell would (they are quoted again when the command is built)."""
    try:
        return shlex.split(text)
    except ValueError as err:
        raise UserError(f"cannot split arguments {text!r}: {err}", file=file, where=where,
                        fix="close the quote, or quote the argument that contains it") from None


@dataclass(frozen=True)
class Target:
    """Where the models run: the runner kind, its Docker client (docker only) and the GPU vendor."""

    runner: str        # local | docker
    client: Any        # docker.DockerClient for the docker runner, else None
    vendor: str        # the vendor used (the context's, or what was detected)
    detected: str      # what this machine has


def confined(root: Path, relative: str, where: str, file: str | None = None) -> Path:
    """`root/relative`, refused unless it stays inside root once `..` and symbolic links are resolved: a card or a
    context must not reach /etc or another user's files."""
    path = root / relative
    if Path(relative).is_absolute() or not path.resolve().is_relative_to(root.resolve()):
        raise UserError(f"'{relative}' leads outside {root}", file=file, where=where,
                        fix="give a path inside the folder of models.json (no absolute path, no '..' out of it)")
    return path


def _script_file(repo: Path, ref: ScriptRef, where: str) -> Path:
    _words(ref.args, f"{where}.args")
    path = confined(repo, ref.path, where)
    if not path.is_file():
        raise UserError("script not found", file=str(path), where=where,
                        fix="paths are relative to the folder of models.json")
    return path


def plan_runs(opts: RunOptions) -> tuple[AdditionalContext, list[str], list[Planned]]:
    """Everything that can be wrong with the input is found here, before anything is built, run or written."""
    ctx, warnings = load_context(opts.context_file, opts.context_json)
    source = (
        " + ".join(s for s in (opts.context_file, "--additional-context" if opts.context_json else None) if s) or None
    )
    cards = select_models(load_models(opts.models_file), opts.tags, str(opts.models_file))
    if opts.runner != "slurm":  # the SLURM runner validates several nodes itself (runner/slurm_jobs.py)
        distributed_env(ctx)  # validates the distributed block
    host.parse_gpu_list(ctx.docker_gpus or "")
    _words(ctx.model_args or "", "model_args")
    planned = []
    for card in cards:
        script = confined(opts.model_root, card.scripts, f"{card.name}.scripts", str(opts.models_file))
        if not script.is_file():
            raise UserError("the model's script does not exist", file=str(script), where=f"{card.name}.scripts")
        if script.resolve().parent == opts.model_root.resolve():
            raise UserError("the model's script is in the folder of models.json itself: that whole folder would be "
                            f"copied as {SCRIPTS_DIR}", file=str(opts.models_file), where=f"{card.name}.scripts",
                            fix="put the script in a folder of its own, e.g. scripts/<model>/run.sh")
        confined(opts.model_root, card.dockerfile, f"{card.name}.dockerfile", str(opts.models_file))
        _words(card.args, f"{card.name}.args", str(opts.models_file))
        args = f"{card.args} {ctx.model_args}".strip() if ctx.model_args else card.args
        command = model_command(SCRIPTS_DIR, script.name, args, ctx.encapsulate_script)
        chain = build_chain(ctx, command, workspace="{workspace}", plugin_home="{plugin}",
                            first_outermost=opts.first_outermost, source=source)
        hooks = [
            ("pre", r, _script_file(opts.model_root, r, f"pre_scripts[{i}]")) for i, r in enumerate(chain.pre_scripts)
        ]
        hooks += [
            ("post", r, _script_file(opts.model_root, r, f"post_scripts[{i}]"))
            for i, r in enumerate(chain.post_scripts)
        ]
        timeout = opts.timeout or ctx.timeout or card.timeout or DEFAULT_TIMEOUT_S
        planned.append(Planned(card, chain, float(timeout), hooks))
    if chain_needs_wrapper(planned) and not (opts.repo / "scripts" / "rocprof_wrapper.sh").is_file():
        raise UserError("scripts/rocprof_wrapper.sh not found beside the package", file=str(opts.repo),
                        fix="run from a checkout of madengine-rocprof (pip install -e .)")
    return ctx, warnings, planned


def chain_needs_wrapper(planned: list[Planned]) -> bool:
    return any(p.chain.profiler_tools for p in planned)


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
    out_dir = opts.output_dir.resolve()
    for item in planned:
        _check_run_dir(out_dir, run_dir_name(item))
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


def run_dir_name(item: Planned) -> str:
    return f"{item.card.name}__{item.chain.label}"


def _check_run_dir(out_dir: Path, name: str) -> None:
    """The run directory is a plain folder inside --output-dir (it is replaced by a rerun): anything else is refused
    before anything is written."""
    ws = out_dir / name
    if ws.is_symlink() or (ws.exists() and not ws.is_dir()):
        kind = "a symbolic link" if ws.is_symlink() else "a file"
        raise UserError(f"{ws} is {kind}, not a run directory: a rerun replaces run directories, so it is left alone",
                        fix="move it away, or choose another --output-dir")
    if ws.resolve().parent != out_dir or ws.name != name:
        raise UserError(f"run directory '{name}' would lie outside {out_dir}", where="models.json name")


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
    if record.interrupted or stopping.received() is not None:
        raise stopping.Interrupted(stopping.received() or signal.SIGINT)
    return status


def _prepare_run_dir(item: Planned, opts: RunOptions, ws: Path) -> None:
    try:
        if ws.exists():
            shutil.rmtree(ws)  # a rerun replaces the previous run directory (perf.csv keeps every row)
        for sub in (ws / "logs", ws / "profiler", ws / "samplers"):
            sub.mkdir(parents=True, exist_ok=True)
        # symlinks=True: a link in the script folder is copied as a link, never followed out of it
        shutil.copytree((opts.model_root / item.card.scripts).parent, ws / SCRIPTS_DIR, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for _, _, path in item.hooks:
            shutil.copy2(path, ws / SCRIPTS_DIR / path.name)
    except OSError as err:  # a full disk or a read-only tree before the run starts: no half-made run directory
        shutil.rmtree(ws, ignore_errors=True)
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


