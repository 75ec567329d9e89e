"""Escalate from a trace to counters: pick the kernels that matter in a lightweight run, re-run the same workload
once per counter profile they need, with the profiler's kernel filter, and join both passes per kernel.

- selection: the top N kernels by kernel time (or every kernel above a share of it);
- profile per kernel category: compute_bound for GEMM, convolution and attention, memory_bound for the rest of the
  compute kernels;
  communication and unknown kernels are listed but not escalated (counters do not explain them / no profile fits);
- the second pass is an ordinary `madengine-rocprof run` (the runner's public entry point) of the same model card
  with the same context, whose tools are one escalation tool: the built-in rocprofv3_compute / rocprofv3_memory
  with `kernel_include_regex` set to exactly the chosen names. The wrapper turns that into rocprofv3
  `--kernel-include-regex`, or ncu `--kernel-name regex:` plus `--launch-skip/--launch-count` on NVIDIA;
- the joined report gives per kernel: time, calls and share from the first pass, counters and derived metrics from
  the second (achieved bandwidth, FP32 rate, tensor/matrix-core FLOPs per launch and their rate, each against the
  device's peak) and what bounds it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.insights.kernel_match import filter_regex, match_name
from madengine_rocprof.insights.peaks import Peak, device_peak
from madengine_rocprof.reports.analysis import merge_kernels
from madengine_rocprof.reports.categories import classify
from madengine_rocprof.reports.discover import load_run
from madengine_rocprof.reports.model import CounterStats, RunData

SCHEMA_VERSION = 1
PROFILE_FOR_CATEGORY = {
    "GEMM": "compute_bound",
    "convolution": "compute_bound",
    "attention": "compute_bound",
    "normalization": "memory_bound",
    "elementwise": "memory_bound",
    "reduction": "memory_bound",
    "optimizer": "memory_bound",
    "memory copy": "memory_bound",
}
NOT_ESCALATED = {
    "communication": "communication: its time is waiting on peers and links, not counters",
    "allocation/view": "a CPU operator that allocates or re-views a tensor: no kernel to profile",
    "unknown": "unknown kernel: no profile fits (classify it with a kernel rules file)",
}
BASE_TOOL = {"compute_bound": "rocprofv3_compute", "memory_bound": "rocprofv3_memory"}
TOOL_PREFIX = "escalate_"
PLAN_FILE = "escalation_plan.json"
REPORT_FILE = "escalation.json"
BOUND_AT = 60.0  # percent of a peak from which that resource is called the bound
ENV_LAUNCH_SKIP = "MADENGINE_ROCPROF_NCU_LAUNCH_SKIP"
ENV_LAUNCH_COUNT = "MADENGINE_ROCPROF_NCU_LAUNCH_COUNT"
ENV_METRICS = "MADENGINE_ROCPROF_NCU_METRICS"  # the wrapper's comma list replacing the profile's ncu metrics
# ncu's top-level tensor-path op counters, as ncu names them on Hopper (ncu --query-metrics on an H100, ncu
# 2025.3.1: benchmarks/insights/README.md); they are disjoint, while the op_hgmma_/op_hmma_ and _sparsity_ variants
# repeat the same ops. Other architectures name them differently, and ncu refuses a name it does not know, so the
# compute_bound pass asks for them only where the first pass's device is one of these.
TENSOR_METRICS = (
    (re.compile(r"H100|H200|GH200", re.IGNORECASE), (
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
        "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum",
        "sm__ops_path_tensor_src_fp64.sum")),
)


@dataclass
class Target:
    name: str
    category: str
    role: str
    calls: int
    total_ns: float
    share: float
    profile: str | None  # None: not escalated (see reason)
    reason: str = ""


def select_targets(run: RunData, top: int | None = 5, min_share: float | None = None) -> list[Target]:
    """Kernels by total time, largest first: the first `top`, and (if given) only those with share >= min_share."""
    kernels = merge_kernels(run)
    total = sum(k.total_ns for k in kernels.values())
    if not kernels or total <= 0:
        raise UserError(
            f"no timed kernels in {run.path}",
            file=str(run.path),
            fix="escalate a run made with a kernel trace (e.g. the rocprofv3_lightweight tool)",
        )
    ranked = sorted(kernels.items(), key=lambda kv: (-kv[1].total_ns, kv[0]))
    chosen: list[Target] = []
    for name, stats in ranked:
        share = stats.total_ns / total
        if min_share is not None and share < min_share:
            break
        if top is not None and len(chosen) >= top:
            break
        found = classify(name)
        profile = PROFILE_FOR_CATEGORY.get(found.category)
        chosen.append(
            Target(
                name,
                found.category,
                found.role,
                stats.calls,
                stats.total_ns,
                share,
                profile,
                "" if profile else NOT_ESCALATED[found.category],
            )
        )
    return chosen


def launch_budget(calls: list[int], launches_per_kernel: int, others: int = 0) -> int:
    """ncu's --launch-count for kernels with these first-pass call counts, when the filter also matches `others`
    launches of kernels that are not targets (other instantiations of a target's function). ncu counts every
    matching launch in order, so the most frequent kernels would use up `launches_per_kernel x kernels` before the
    rarest one ran (seen on an H200: 3 of 5 GEMMs got no counters). Launches interleave step by step, so the rarest
    kernel gets `launches_per_kernel` of them after about that many x (all matching calls / its calls) launches."""
    rarest = max(1, min(calls))
    return max(launches_per_kernel * len(calls), -(-launches_per_kernel * (sum(calls) + others) // rarest))


def escalation_tool(profile: str, kernels: int, regex: str, launch_count: int, launch_skip: int,
                    ncu_metrics: str | None = None):
    """The built-in counter tool of `profile`, limited to the kernels `regex` selects (kernel_match.filter_regex;
    kernel trace kept for the per-kernel time); on ncu at most `launch_count` matching launches are profiled, after
    `launch_skip`, with `ncu_metrics` (a comma list) instead of the profile's metrics where given. Full names (no
    truncation): the filter's lookaheads read template arguments."""
    from madengine_rocprof.registry.store import get_tool, tool_from_data

    base = get_tool(BASE_TOOL[profile])
    data = base.model_dump()
    data.update(
        name=TOOL_PREFIX + profile,
        core_profile=profile,
        trace=["kernel"],
        stats=False,
        summary=False,
        output_formats=["csv"],
        kernel_include_regex=regex,
        kernel_exclude_regex=None,
        truncate_kernels=False,
        description=f"escalation: {profile} counters for {kernels} kernel(s) of a first pass",
        env_vars={
            **base.env_vars,
            ENV_LAUNCH_SKIP: str(launch_skip),
            ENV_LAUNCH_COUNT: str(launch_count),
            **({ENV_METRICS: ncu_metrics} if ncu_metrics else {}),
        },
        pre_scripts=[],
        post_scripts=[],
    )
    return tool_from_data(data, f"escalation tool {profile}")


@contextmanager
def registry_with(tools):
    """A private registry home holding the user's tools and counters plus the escalation tools, for one run."""
    from madengine_rocprof.registry.store import user_home

    source = user_home()
    previous = os.environ.get("MADENGINE_ROCPROF_HOME")
    with tempfile.TemporaryDirectory(prefix="madengine-rocprof-escalate-") as tmp:
        home = Path(tmp)
        for sub in ("tools", "counters"):
            if (source / sub).is_dir():
                shutil.copytree(source / sub, home / sub)
        (home / "tools").mkdir(exist_ok=True)
        for tool in tools:
            (home / "tools" / f"{tool.name}.json").write_text(
                json.dumps(tool.model_dump(exclude_none=True), allow_nan=False))
        os.environ["MADENGINE_ROCPROF_HOME"] = tmp
        try:
            yield home
        finally:
            if previous is None:
                os.environ.pop("MADENGINE_ROCPROF_HOME", None)
            else:
                os.environ["MADENGINE_ROCPROF_HOME"] = previous


def _read_run_json(run: Path) -> dict:
    path = run / "run.json"
    if not path.is_file():
        raise UserError(
            f"{run} has no run.json: escalation re-runs a model, so it needs a run directory written by "
            "`madengine-rocprof run`",
            file=str(run),
            fix="pass a directory from `madengine-rocprof run`",
        )
    info = inputs.load_json_object(path, "run.json")
    inputs.check_shape(info, RUN_JSON_SHAPE, str(path), fix="re-run the first pass with this version of the tool")
    return info


# What escalation reads from run.json and from its own escalation_plan.json (inputs.check_shape)
RUN_JSON_SHAPE = {"model": str, "context": dict, "card?": (dict, None), "args?": (str, None), "runner?": (str, None)}
PLAN_SHAPE = {
    "first_pass": str, "model": str, "tag": str, "context": dict, "runner?": (str, None), "output_dir": str,
    "targets": [{"name": str, "category": str, "role": str, "calls": int, "total_ns": float, "share": float,
                 "profile": (str, None), "reason?": str}],
    "passes": [{"profile": str, "tool": str, "kernels": [str], "kernel_include_regex": str, "env": dict,
                "run_dir?": (str, None), "exit_code?": (int, None)}],
}


def read_plan(path: Path) -> dict:
    """escalation_plan.json (written by `escalate`, read back by `--join-only`), checked before it is used."""
    plan = inputs.load_json_object(path, PLAN_FILE)
    inputs.check_shape(plan, PLAN_SHAPE, str(path), fix="run `madengine-rocprof escalate RUN` again to re-create it")
    return plan


def model_tag(info: dict) -> str:
    """`name` or `name:k=v:...` so the second pass gets the same arguments as the first (extras were name:k=v)."""
    raw = str((info.get("card") or {}).get("args", ""))
    args = str(info.get("args", raw))
    if args == raw:
        return info["model"]
    extra = shlex.split(args[len(raw) :]) if args.startswith(raw) else None
    if not extra or len(extra) % 2 or not all(k.startswith("--") for k in extra[::2]):
        raise UserError(
            f"cannot repeat the first pass's model arguments {args!r}",
            file="run.json",
            where="args",
            fix="put extra model arguments in the context's model_args, then escalate",
        )
    return ":".join([info["model"]] + [f"{k[2:]}={v}" for k, v in zip(extra[::2], extra[1::2], strict=True)])


def tensor_metrics(device: str | None) -> str | None:
    """The compute_bound ncu metrics plus the tensor-op counters, for a device whose ncu names them as TENSOR_METRICS
    says; None (the profile's own metrics) for any other device."""
    from madengine_rocprof.wrapper.nvidia import NCU_METRICS

    extra = next((names for pattern, names in TENSOR_METRICS if device and pattern.search(device)), None)
    return ",".join([*NCU_METRICS["compute_bound"], *extra]) if extra else None


def escalation_dir(run: Path) -> Path:
    """Beside the first pass, never inside it (a report of the first pass must not count the second)."""
    return run.parent / f"{run.name}.escalate"


def plan_second_pass(
    run: Path,
    targets: list[Target],
    first_pass_calls: Mapping[str, int],
    launches_per_kernel: int = 10,
    launch_skip: int = 0,
    device: str | None = None,
) -> dict:
    """One pass per profile the targets need (on a device of TENSOR_METRICS, the compute_bound pass also counts
    tensor-core ops). Its kernel filter selects the targets in any profiler's spelling
    (kernel_match.filter_regex); `others` are the first-pass kernels it also selects (other instantiations of a
    target's function), whose calls the ncu launch budget must cover too and whose counters the join sets aside."""
    info = _read_run_json(run)
    groups: dict[str, list[str]] = {}
    calls: dict[str, list[int]] = {}
    for t in targets:
        if t.profile:
            groups.setdefault(t.profile, []).append(t.name)
            calls.setdefault(t.profile, []).append(t.calls)
    if not groups:
        raise UserError(
            "none of the selected kernels can be escalated: "
            + "; ".join(f"{t.name[:60]}: {t.reason}" for t in targets),
            fix="raise --top, or classify unknown kernels with --kernel-rules",
        )
    passes = []
    for profile in ("compute_bound", "memory_bound"):
        if profile in groups:
            regex = filter_regex(groups[profile], first_pass_calls)
            others = sorted(n for n in first_pass_calls if n not in groups[profile] and re.search(regex, n) is not None)
            budget = launch_budget(calls[profile], launches_per_kernel, sum(first_pass_calls[n] for n in others))
            metrics = tensor_metrics(device) if profile == "compute_bound" else None
            tool = escalation_tool(profile, len(groups[profile]), regex, budget, launch_skip, metrics)
            passes.append(
                {
                    "profile": profile,
                    "tool": tool.name,
                    "kernels": groups[profile],
                    "also_selected": others,
                    "kernel_include_regex": regex,
                    "env": {
                        ENV_LAUNCH_SKIP: tool.env_vars[ENV_LAUNCH_SKIP],
                        ENV_LAUNCH_COUNT: tool.env_vars[ENV_LAUNCH_COUNT],
                        **({ENV_METRICS: metrics} if metrics else {}),
                    },
                }
            )
    context = {k: v for k, v in info["context"].items() if k != "tools"}
    return {
        "first_pass": str(run),
        "model": info["model"],
        "tag": model_tag(info),
        "context": context,
        "runner": info.get("runner"),
        "targets": [asdict(t) for t in targets],
        "passes": passes,
        "output_dir": str(escalation_dir(run)),
    }


def run_second_pass(
    plan: dict,
    *,
    models_file: Path,
    runner: str | None = None,
    timeout: float | None = None,
    echo: bool = True,
) -> dict:
    """One runner call per profile, with the plan's launch bounds; records each pass's run directory and status in
    the plan (returned)."""
    from madengine_rocprof.runner.lifecycle import RunOptions, run_models

    out = Path(plan["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    for step in plan["passes"]:
        bounds = step["env"]
        tool = escalation_tool(
            step["profile"],
            len(step["kernels"]),
            step["kernel_include_regex"],
            int(bounds[ENV_LAUNCH_COUNT]),
            int(bounds[ENV_LAUNCH_SKIP]),
            bounds.get(ENV_METRICS) if isinstance(bounds.get(ENV_METRICS), str) else None,
        )
        context = dict(plan["context"], tools=[{"name": tool.name}])
        with registry_with([tool]):
            code = run_models(
                RunOptions(
                    tags=[plan["tag"]],
                    context_json=json.dumps(context, allow_nan=False),
                    runner=runner or plan.get("runner") or "auto",
                    output_dir=out,
                    timeout=timeout,
                    models_file=models_file,
                    echo=echo,
                )
            )
        step["exit_code"] = code
        step["run_dir"] = _find_pass_dir(out, tool.name)
    (out / PLAN_FILE).write_text(inputs.dumps(plan, indent=1) + "\n")
    return plan


def _find_pass_dir(out: Path, tool: str) -> str | None:
    for child in sorted(out.iterdir()):
        try:
            info = inputs.load_json_object(child / "run.json", "run.json")
        except UserError:
            continue
        chain = info.get("chain")
        if isinstance(chain, dict) and chain.get("tools") == [tool]:
            return str(child)
    return None


# ---- joining both passes -------------------------------------------------------------------------------------


def kernel_counters(run: RunData, names: list[str]) -> dict[str, dict]:
    """Counter -> {total, mean, dispatches, time_ns} over the second-pass kernels `names` (one first-pass kernel,
    possibly spelled differently): time_ns is their time on the dispatches that counter was read on (each pass of a
    multi-pass counter file re-runs the workload)."""
    out: dict[str, dict] = {}
    for source in run.counters:
        for name in names:
            time_ns = (source.kernel_time.get(name) or [0, 0])[1]
            for (kernel, counter), stats in source.by_kernel.items():
                if kernel != name:
                    continue
                entry = out.setdefault(counter, {"stats": CounterStats(), "time_ns": 0.0})
                entry["stats"].merge(stats)
                entry["time_ns"] += time_ns
    return {
        c: {
            "total": e["stats"].total,
            "mean": e["stats"].mean,
            "dispatches": e["stats"].dispatches,
            "time_ns": e["time_ns"] or None,
        }
        for c, e in sorted(out.items())
    }


def counted_kernels(run: RunData) -> dict[str, int]:
    """Kernel name -> dispatches that counters were read on, in a second pass (the most of any counter)."""
    per: dict[tuple[str, str], int] = {}
    for source in run.counters:
        for key, stats in source.by_kernel.items():
            per[key] = per.get(key, 0) + stats.dispatches
    out: dict[str, int] = {}
    for (kernel, _), dispatches in per.items():
        out[kernel] = max(out.get(kernel, 0), dispatches)
    return out


@dataclass
class Joined:
    """The second pass's kernels, each assigned to one first-pass kernel or listed with why it was not."""

    by_kernel: dict[tuple[str, str], list[dict]]  # (profile, first-pass name) -> [{name, how, dispatches}]
    not_joined: list[dict]  # {profile, name, dispatches, reason, candidates}


def join_names(first_names: list[str], second: dict[str, RunData], targets: set[str]) -> Joined:
    """Match every second-pass kernel to the first pass by kernel_match.match_name. Kernels that match no single
    first-pass kernel, and kernels the filter selected that are not top kernels, are listed with the reason."""
    joined = Joined({}, [])
    for profile, data in second.items():
        for name, dispatches in sorted(counted_kernels(data).items()):
            found = match_name(name, first_names)
            if found.kernel is not None and found.kernel in targets:
                joined.by_kernel.setdefault((profile, found.kernel), []).append(
                    {"name": name, "how": found.how, "dispatches": dispatches}
                )
                continue
            if found.kernel is not None:
                reason = "not a top kernel: selected by the filter as another instantiation of a top kernel's function"
            elif found.how == "ambiguous":
                reason = f"ambiguous: as spelled, it fits {len(found.candidates)} first-pass kernels; not assigned"
            else:
                reason = "no first-pass kernel has this function name"
            joined.not_joined.append(
                {
                    "profile": profile,
                    "name": name,
                    "dispatches": dispatches,
                    "reason": reason,
                    "candidates": list(found.candidates) or ([found.kernel] if found.kernel else []),
                }
            )
    return joined


def _rate(counters: dict, name: str) -> float | None:
    entry = counters.get(name)
    return entry["total"] / entry["time_ns"] if entry and entry["time_ns"] else None


def derived(counters: dict, peak: Peak | None) -> dict:
    """Achieved bandwidth and FP32 rate where the counters allow, as % of the device peak, and ncu's own % of peak."""
    out: dict = {}
    # AMD: FETCH_SIZE / WRITE_SIZE in KiB, each over the kernel time of its own pass; bytes/ns = GB/s. Both are
    # needed (as read + write on NVIDIA): one alone, e.g. when the WRITE_SIZE pass failed, is not the traffic
    fetch, write = _rate(counters, "FETCH_SIZE"), _rate(counters, "WRITE_SIZE")
    if fetch is not None and write is not None:
        out["bandwidth_gbs"] = (fetch + write) * 1024
        out["bandwidth_formula"] = "(FETCH_SIZE + WRITE_SIZE) x 1024 B / kernel time"
    duration = counters.get("gpu__time_duration.sum")
    if duration and duration["total"] > 0:
        t = duration["total"]
        if "dram__bytes_read.sum" in counters and "dram__bytes_write.sum" in counters:
            out["bandwidth_gbs"] = (
                counters["dram__bytes_read.sum"]["total"] + counters["dram__bytes_write.sum"]["total"]
            ) / t
            out["bandwidth_formula"] = "(dram__bytes_read.sum + dram__bytes_write.sum) / gpu__time_duration.sum"
        ops = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("fadd", "fmul", "ffma")]
        if all(o in counters for o in ops):
            flops = counters[ops[0]]["total"] + counters[ops[1]]["total"] + 2 * counters[ops[2]]["total"]
            out["fp32_tflops"] = flops / t / 1e3
            out["fp32_formula"] = "(fadd + fmul + 2 x ffma thread instructions) / gpu__time_duration.sum"
        _tensor_flops(counters, t, peak, out)
    amd_fp32 = ("SQ_INSTS_VALU_ADD_F32", "SQ_INSTS_VALU_MUL_F32", "SQ_INSTS_VALU_FMA_F32")
    add, mul, fma = (_rate(counters, c) for c in amd_fp32)
    if add is not None and mul is not None and fma is not None:
        out["fp32_tflops"] = 64 * (add + mul + 2 * fma) / 1e3
        out["fp32_formula"] = "64 lanes x (ADD_F32 + MUL_F32 + 2 x FMA_F32) / kernel time"
    for key, metric in (
        ("ncu_sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        ("ncu_dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        ("ncu_tensor_pipe_pct", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
        ("occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active"),
        ("occupancy_pct", "OccupancyPercent"),
    ):
        if metric in counters:
            out[key] = counters[metric]["mean"]
    mops = {m.group(1): counters[name] for name in counters if (m := MFMA_MOPS.match(name))}
    if mops and all(e["time_ns"] for e in mops.values()):
        _put_tensor(out, {_DTYPE_OF[t.lower()]: MFMA_FLOPS_PER_MOP * e["total"] for t, e in mops.items()},
                    sum(MFMA_FLOPS_PER_MOP * e["total"] / max(e["dispatches"], 1) for e in mops.values()),
                    sum(MFMA_FLOPS_PER_MOP * e["total"] / e["time_ns"] for e in mops.values()) / 1e3,
                    "512 x SQ_INSTS_VALU_MFMA_MOPS_* / kernel time", peak)
    if "SQ_WAVES" in counters and counters["SQ_WAVES"]["total"] > 0 and "SQ_INSTS_VALU" in counters:
        out["valu_per_wave"] = counters["SQ_INSTS_VALU"]["total"] / counters["SQ_WAVES"]["total"]
    if peak and peak.bandwidth_gbs and "bandwidth_gbs" in out:
        out["bandwidth_pct_of_peak"] = 100 * out["bandwidth_gbs"] / peak.bandwidth_gbs
    if peak and peak.fp32_tflops and "fp32_tflops" in out:
        out["fp32_pct_of_peak"] = 100 * out["fp32_tflops"] / peak.fp32_tflops
    out["bound"] = bound(out)
    return out


# ncu's tensor-path op counters: "# of math ops executed in Tensor path with source X (and destination Y)"; one FMA
# of a matrix multiply is two ops, so their sum over a GEMM is its 2*M*N*K FLOPs (checked on an H100: equal within
# 0.1%, 1.6% where a tile overhangs the matrix). Only the top-level floating-point counters are read: the op_hgmma_
# / op_hmma_, _sparsity_ and _realtime variants repeat or split the same ops, and integer ops are not FLOPs.
TENSOR_OPS = re.compile(r"^sm__ops_path_tensor_src_(bf16|fp16|tf32|fp8|fp64)(?:_dst_[a-z0-9]+)?\.sum$")
# AMD: SQ_INSTS_VALU_MFMA_MOPS_<type> counts matrix ops in units of 512 FLOPs (rocprofiler-compute's MFMA FLOPs)
MFMA_MOPS = re.compile(r"^SQ_INSTS_VALU_MFMA_MOPS_(F16|BF16|F32|F64|F8|XF32)$")
MFMA_FLOPS_PER_MOP = 512
_DTYPE_OF = {"f16": "fp16", "fp16": "fp16", "bf16": "bf16", "f32": "fp32", "fp32": "fp32", "tf32": "tf32",
             "xf32": "tf32", "f64": "fp64", "fp64": "fp64", "f8": "fp8", "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8"}


def _tensor_flops(counters: dict, duration_ns: float, peak: Peak | None, out: dict) -> None:
    """Tensor/matrix-core FLOPs per dispatch and their rate over the kernel time, against the dtype's matrix peak
    (the dtype with the most ops names the peak)."""
    by_dtype: dict[str, float] = {}
    per_dispatch = 0.0
    for name, entry in counters.items():
        found = TENSOR_OPS.match(name)
        if found and entry["total"] > 0:  # a dtype the kernel did not use names no peak
            dtype = _DTYPE_OF.get(found.group(1), found.group(1))
            by_dtype[dtype] = by_dtype.get(dtype, 0.0) + entry["total"]
            per_dispatch += entry["total"] / max(entry["dispatches"], 1)
    if by_dtype and duration_ns > 0:
        _put_tensor(out, by_dtype, per_dispatch, sum(by_dtype.values()) / duration_ns / 1e3,
                    "sum of sm__ops_path_tensor_src_*.sum / gpu__time_duration.sum", peak)


def _put_tensor(out: dict, by_dtype: dict[str, float], per_dispatch: float, tflops: float, formula: str,
                peak: Peak | None) -> None:
    out["tensor_flops"] = per_dispatch
    out["tensor_tflops"] = tflops
    out["tensor_flops_by_dtype"] = by_dtype
    out["tensor_formula"] = formula
    dtype = max(by_dtype, key=lambda d: by_dtype[d])
    matrix = peak.matrix_tflops(dtype) if peak else None
    if matrix:
        out["tensor_pct_of_peak"] = 100 * tflops / matrix
        out["tensor_peak"] = f"{dtype} matrix {matrix:g} TFLOP/s"


def bound(metrics: dict) -> str:
    """The resource nearest its peak when one is at BOUND_AT% or more; else say that none is near its peak."""
    compute = [
        (metrics[k], label)
        for k, label in (
            ("fp32_pct_of_peak", "FP32 compute"),
            ("tensor_pct_of_peak", "tensor-core FLOPs"),
            ("ncu_sm_throughput_pct", "SM compute"),
            ("ncu_tensor_pipe_pct", "tensor cores"),
        )
        if metrics.get(k) is not None
    ]
    memory = [
        (metrics[k], "memory bandwidth")
        for k in ("bandwidth_pct_of_peak", "ncu_dram_throughput_pct")
        if metrics.get(k) is not None
    ]
    measured = compute + memory
    if not measured:
        return "not determined (no counter of this profile relates to a peak)"
    pct, label = max(measured)
    if pct >= BOUND_AT:
        return f"{label} ({pct:.0f}% of peak)"
    missing = "" if compute and memory else (" (memory not measured)" if compute else " (compute not measured)")
    return f"latency/occupancy: nothing near peak, highest {label} {pct:.0f}%{missing}"


def _device(run: RunData) -> Mapping[str, Any]:
    """The workload's device record (workload_result.json), {} when absent."""
    device = run.workload.get("device") if run.workload else None
    return device if isinstance(device, dict) else {}


def device_name(run: RunData) -> str | None:
    """The first pass's GPU name: the workload's device record, else a Kineto trace's deviceProperties."""
    found = _device(run).get("name")
    if isinstance(found, str) and found:
        return found
    for src in run.timing:
        tables = getattr(src, "tables", None)
        for props in getattr(tables, "device_properties", None) or []:
            if isinstance(props, dict) and isinstance(props.get("name"), str):
                return props["name"]
    return None


def join(first: RunData, second: dict[str, RunData], targets: list[Target], peak: Peak | None, plan: dict) -> dict:
    first_names = list(merge_kernels(first))
    joined = join_names(first_names, second, {t.name for t in targets if t.profile})
    rows = []
    for rank, t in enumerate(targets, start=1):
        row = {"rank": rank, **asdict(t), "average_ns": t.total_ns / t.calls if t.calls else None}
        data = second.get(t.profile) if t.profile else None
        if t.profile and data is None:
            code = next((p.get("exit_code") for p in plan.get("passes", []) if p["profile"] == t.profile), None)
            row["reason"] = f"no counters: the {t.profile} pass " + (
                f"failed (exit {code}) and left no profiler output" if code else "was not run"
            )
        elif t.profile and data is not None:
            found = joined.by_kernel.get((t.profile, t.name), [])
            counters = kernel_counters(data, [f["name"] for f in found])
            row["joined_from"] = found
            row["counters"] = counters
            row["derived"] = derived(counters, peak) if counters else {}
            if not counters:
                ambiguous = [
                    n["name"] for n in joined.not_joined if n["profile"] == t.profile and t.name in n["candidates"]
                ]
                row["reason"] = (
                    f"the second pass read counters for {len(ambiguous)} kernel(s) that fit this one and others "
                    "equally (see not_joined); none assigned"
                    if ambiguous
                    else "the second pass read no counters for this kernel (filter missed it, or ncu's "
                    "--launch-count was used up by other kernels)"
                )
        rows.append(row)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "madengine-rocprof escalate",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "first_pass": str(first.path),
        "kernel_time_ns": sum(k.total_ns for k in merge_kernels(first).values()),
        "device": _device(first).get("name"),
        "peak": asdict(peak) if peak else None,
        "passes": [
            {k: p.get(k) for k in ("profile", "tool", "kernel_include_regex", "env", "run_dir", "exit_code")}
            for p in plan.get("passes", [])
        ],
        "kernels": rows,
        "not_joined": joined.not_joined,
    }


def build_report(run: Path, plan: dict, peak_bandwidth: float | None = None, peak_tflops: float | None = None) -> dict:
    first = load_run(run, run.name)
    fields = set(Target.__dataclass_fields__)
    targets = [Target(**{k: v for k, v in t.items() if k in fields}) for t in plan["targets"]]
    second = {}
    for step in plan["passes"]:
        if step.get("run_dir") and Path(step["run_dir"]).is_dir():
            try:
                second[step["profile"]] = load_run(Path(step["run_dir"]), Path(step["run_dir"]).name)
            except UserError:
                if not step.get("exit_code"):
                    raise
                # a failed pass that left no readable output (e.g. no counter profiler: no_profiler, exit 127):
                # its kernels get no counters, the report says why and the command exits 1
    device = _device(first)
    peak = device_peak(device.get("name") or device.get("arch"), peak_bandwidth, peak_tflops)
    return join(first, second, targets, peak, plan)
