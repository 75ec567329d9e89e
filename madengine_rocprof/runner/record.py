"""The record of one run as it happens (steps, failures, samplers, image) and its evaluation into run.json and the
perf.csv row: shared by every executor (local, docker), written whatever happened."""
from __future__ import annotations

import datetime
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from madengine_rocprof import inputs
from madengine_rocprof.atomic import write_json
from madengine_rocprof.errors import UserError
from madengine_rocprof.runner import stopping
from madengine_rocprof.runner.chain import Chain, profiler_output_dir
from madengine_rocprof.runner.executors import StepResult
from madengine_rocprof.runner.results import append_perf_row, find_performance
from madengine_rocprof.wrapper.contracts import (
    Manifest,
    ProfilerEntry,
    RunJson,
    RunStatus,
    WorkloadResult,
    missing_keys,
)

if TYPE_CHECKING:
    from madengine_rocprof.models import AdditionalContext
    from madengine_rocprof.runner.planning import Planned, RunOptions

SCHEMA_VERSION = 1


def say(text: str) -> None:
    print(text, flush=True)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def git_commit(repo: Path, short: bool = True) -> str:
    try:
        argv = ["git", "-C", str(repo), "rev-parse", *(["--short"] if short else []), "HEAD"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


@dataclass
class RunRecord:
    """What one model's run knows so far; every step adds to it, and write_results() turns it into the results."""

    item: Planned
    ws: Path                   # the run directory
    out_dir: Path              # --output-dir (perf.csv)
    runner: str                # local | docker
    vendor: str                # the vendor used
    detected: str              # the vendor detected on this machine
    warnings: list[str]
    started_at: str = field(default_factory=now)
    t0: float = field(default_factory=time.monotonic)
    steps: list[StepResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    samplers: list[dict[str, Any]] = field(default_factory=list)
    image: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False

    def add_step(self, step: StepResult) -> StepResult:
        self.steps.append(step)
        self.interrupted |= step.interrupted
        return step


def profiler_outcomes(chain: Chain, ws: Path) -> tuple[list[ProfilerEntry], list[str]]:
    outcomes: list[ProfilerEntry] = []
    failures: list[str] = []
    for tool in chain.profiler_tools:
        out = Path(profiler_output_dir(str(ws), tool, len(chain.profiler_tools)))
        manifest = out / "manifest.json"
        rel = str(out.relative_to(ws))
        if not manifest.is_file():
            outcomes.append({"tool": tool, "output_dir": rel, "outcome": "no_manifest"})
            failures.append(f"profiler {tool}: no manifest.json in {rel} (the wrapper did not finish)")
            continue
        try:
            data: Manifest = inputs.load_json_object(manifest, "manifest.json")  # type: ignore[assignment]
        except UserError as err:
            outcomes.append({"tool": tool, "output_dir": rel, "outcome": "bad_manifest"})
            failures.append(f"profiler {tool}: unreadable manifest.json: {err}")
            continue
        missing = missing_keys(data, Manifest)
        if missing:  # a manifest of another shape: say which keys, rather than guess
            outcomes.append({"tool": tool, "output_dir": rel, "outcome": "bad_manifest"})
            failures.append(f"profiler {tool}: manifest.json lacks {', '.join(missing)}")
            continue
        outcome = data["outcome"]
        entry: ProfilerEntry = {"tool": tool, "output_dir": rel, "outcome": outcome, "profiler": data["profiler"],
                                "outputs": len(data["outputs"]), "dispatch_count": data["dispatch_count"],
                                "exit_code": data["exit_code"]}
        outcomes.append(entry)
        if outcome != "ok":
            failures.append(f"profiler {tool}: {outcome}")
        elif not data["outputs"]:
            failures.append(f"profiler {tool}: captured nothing (no output files)")
    return outcomes, failures


def chain_summary(chain: Chain, first_outermost: bool) -> dict[str, Any]:
    """run.json's `chain`: the tools, their order, the final command and what wraps it (local, docker and slurm)."""
    return {
        "tools": chain.tools,
        "order": "first listed outermost" if first_outermost else "last listed outermost (madengine)",
        "command": chain.command,
        "env": chain.env,
        "profilers": chain.profiler_tools,
        "samplers": [s.tool for s in chain.samplers],
        "pre_scripts": [r.model_dump() for r in chain.pre_scripts],
        "post_scripts": [r.model_dump() for r in chain.post_scripts],
        "notes": chain.notes,
    }


def write_results(record: RunRecord, ctx: AdditionalContext, opts: RunOptions) -> str:
    """Evaluate a run (steps, profiler manifests, workload_result.json) and write run.json and its perf.csv row.
    Returns SUCCESS or FAILURE; a file that cannot be written (full disk) is reported and makes it FAILURE."""
    item, ws, steps, failures = record.item, record.ws, record.steps, record.failures
    image, samplers, warnings, vendor = record.image, record.samplers, record.warnings, record.vendor
    interrupted, duration = record.interrupted, time.monotonic() - record.t0
    card, chain = item.card, item.chain
    run_step = next((s for s in steps if s.name == "run"), None)
    performance = None
    if run_step is None:
        if interrupted:
            failures.append("interrupted before the workload started")
        elif not failures:
            failures.append("the workload did not run")
    else:
        performance = find_performance(ws / "logs" / "run.log")
        if run_step.interrupted:
            failures.append(f"workload interrupted ({stopping.name()})")
        elif run_step.timed_out:
            # a result printed before the limit means the workload hung on its way out (teardown, a rank's exit)
            done = " after printing its performance line: it hung on its way out" if performance else ""
            failures.append(f"workload timed out after {item.timeout:g}s{done}")
        elif run_step.exit_code != 0:
            failures.append(f"workload exit code {run_step.exit_code}")
        if performance is None and run_step.ok:
            failures.append("no 'performance: <value> <metric>' line in the workload output")
    profilers, profiler_failures = profiler_outcomes(chain, ws) if run_step else ([], [])
    failures.extend(profiler_failures)
    result_file = ws / "workload_result.json"
    device_name = ""
    precision = card.training_precision  # models.json's label, unless the workload says what it ran in
    if result_file.is_file():
        try:
            result: WorkloadResult = inputs.load_json_object(result_file, "workload_result.json")  # type: ignore
            if result.get("status") == "failed":
                failures.append("workload_result.json says status failed")
            device = result.get("device") or {}
            device_name = str(device.get("arch") or device.get("name") or "") if device.get("type") != "cpu" else ""
            precision = precision_of(result, card.training_precision)
        except (UserError, AttributeError):
            failures.append("workload_result.json is unreadable")
    failures.extend(f"{s.name}: {s.log_error}" for s in steps if s.log_error)
    status: RunStatus = "SUCCESS" if not failures else "FAILURE"
    n_gpus = (
        ctx.distributed.nproc_per_node if ctx.distributed and ctx.distributed.nproc_per_node else None
    ) or card.n_gpus
    manifest: RunJson = {
        "schema_version": SCHEMA_VERSION, "tool": "madengine-rocprof run", "model": card.name, "card": card.raw,
        "args": card.args, "status": status, "failures": failures, "warnings": warnings,
        "started_at": record.started_at, "duration_s": round(duration, 3), "runner": record.runner,
        "gpu_vendor": {"requested": ctx.gpu_vendor, "detected": record.detected, "used": vendor},
        "context": ctx.model_dump(mode="json", by_alias=True, exclude_none=True),
        "image": image,
        "chain": chain_summary(chain, opts.first_outermost),
        "timeout_s": item.timeout,
        "steps": [{"name": s.name, "exit_code": s.exit_code, "duration_s": round(s.duration_s, 3),
                   "timed_out": s.timed_out, "interrupted": s.interrupted, "outcome": s.describe(),
                   "log": str(Path(s.log).relative_to(ws)) if s.log else ""} for s in steps],
        "profilers": profilers, "samplers": samplers,
        "performance": {"value": performance[0], "metric": performance[1]} if performance else None,
    }
    written = _keep(ws / "run.json", lambda: write_json(ws / "run.json", manifest))
    row = {
        "model": card.name,
        "n_gpus": n_gpus,
        "nnodes": 1,
        "gpus_per_node": n_gpus,
        "training_precision": precision,
        "pipeline": "",
        "args": card.args,
        "tags": ",".join(card.tags),
        "docker_file": image.get("dockerfile", ""),
        "base_docker": image.get("base_docker", ""),
        "docker_sha": image.get("id", ""),
        "docker_image": image.get("tag", ""),
        "git_commit": git_commit(opts.model_root),
        "machine_name": socket.gethostname(),
        "deployment_type": "local",
        "launcher": ctx.distributed.launcher if ctx.distributed and ctx.distributed.launcher else "",
        "gpu_architecture": device_name or vendor,
        "performance": performance[0] if performance else "",
        "metric": performance[1] if performance else "",
        "relative_change": "",
        "status": status,
        "build_duration": round(image.get("build_duration_s", 0.0), 3),
        "test_duration": round(run_step.duration_s, 3) if run_step else "",
        "dataname": "",
        "data_provider_type": "",
        "data_size": "",
        "data_download_duration": "",
        "build_number": "0",
        "additional_docker_run_options": "",
        "run_dir": ws.name,
    }
    written &= _keep(record.out_dir / "perf.csv", lambda: append_perf_row(record.out_dir / "perf.csv", row))
    mark = "SUCCESS" if status == "SUCCESS" else "FAILURE: " + "; ".join(failures)
    say(f"[run] {card.name} [{chain.label}]: {mark}")
    return status if written else "FAILURE"


def precision_of(result: Any, label: str) -> str:
    """perf.csv's training_precision: the dtype the workload says it ran in (workload_result.json `settings.dtype`;
    TinyTransformer v4 is bf16 on a GPU, fp32 on a CPU), else models.json's label."""
    settings = result.get("settings") if isinstance(result, dict) else None
    ran_in = settings.get("dtype") if isinstance(settings, dict) else None
    return ran_in.strip() if isinstance(ran_in, str) and ran_in.strip() else label


def _keep(path: Path, write: Callable[[], None]) -> bool:
    """Write one result file; a full disk or a read-only folder is reported, and the other files are still tried."""
    try:
        write()
        return True
    except OSError as err:
        say(f"[run] error: cannot write {path}: {err.strerror or err} (the previous file, if any, is unchanged)")
        return False
