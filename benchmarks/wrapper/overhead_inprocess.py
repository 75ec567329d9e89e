"""Lightweight-tracing overhead measured inside ONE process, so process-to-process variance cancels.

Part A (the product path): the TinyTransformer harness runs under the wrapper's embedded tracer with
MADENGINE_ROCPROF_TRACER_SKIP_STEPS=S, so the same process runs untraced steps first and traced steps after. The
step whose optimizer hook starts the profiler (Kineto/CUPTI initialisation, a one-time cost) and the step after it
are reported separately and left out of both windows. A plain process (no wrapper) is the drift control: the same
two windows without any tracer. The kernel trace's row count is checked against launches per step x traced steps.

Part B (diagnosis): one process builds the same model and times blocks of steps under several torch.profiler
configurations in turn (rounds alternate the order), reporting device time per step, host time per step, GPU busy
time per step and the kernels each configuration saw per step.

    python3 benchmarks/wrapper/overhead_inprocess.py --out results/ [--procs 3] [--quick]
Prints a table last; writes overhead_inprocess.json into --out ($OUT by default).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(REPO, "scripts", "tinytransformer", "tt_harness.py")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(values: list[float]) -> dict:
    return {"n": len(values), "median": statistics.median(values), "p10": pct(values, 10), "p90": pct(values, 90)}


def split_windows(step_times: list[float], warmup: int, skip: int) -> dict:
    """Timed steps (warm-up excluded) -> untraced / start / settle / traced windows.

    The tracer counts every optimizer step, warm-up included, and starts the profiler in the hook of step number
    `skip` (1-based), i.e. inside timed step t0 = skip - 1 - warmup; t0 + 1 is the first step that runs traced."""
    t0 = skip - 1 - warmup
    if t0 < 2 or t0 + 3 > len(step_times):
        raise SystemExit(f"skip {skip} leaves too few steps on one side (warm-up {warmup}, {len(step_times)} timed)")
    return {"untraced": step_times[:t0], "start_step": step_times[t0], "first_traced_step": step_times[t0 + 1],
            "traced": step_times[t0 + 2:], "start_index": t0}


# ---------------------------------------------------------------------------------------------- Part A
def harness_run(harness_args: list[str], work: str, traced: bool, env_extra: dict,
                wrapper_opts: list[str] | None = None) -> dict:
    result = os.path.join(work, "result.json")
    app = [sys.executable, HARNESS, *harness_args, "--json-out", result]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    cmd = app
    if traced:
        env.update(env_extra)
        cmd = [sys.executable, "-m", "madengine_rocprof.wrapper", "--profiler", "embedded", "--profile",
               "lightweight", "--kernel-trace", "--stats", *(wrapper_opts or []), "-d", os.path.join(work, "out"),
               "--", *app]
    t = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
    wall = time.monotonic() - t
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"harness failed (traced={traced}): exit {done.returncode}")
    with open(result) as fh:
        res = json.load(fh)
    row = {"traced": traced, "env": env_extra if traced else {}, "wall_s": round(wall, 2),
           "step_times_ms": res["step_times_ms"], "warmup": res["settings"]["warmup_steps_used"],
           "metrics": res["metrics"]}
    if traced:
        with open(os.path.join(work, "out", "manifest.json")) as fh:
            man = json.load(fh)
        traces = glob.glob(os.path.join(work, "out", "*", "*_kernel_trace.csv"))
        names: collections.Counter[str] = collections.Counter()
        for path in traces:
            with open(path, newline="") as fh:
                for r in csv.DictReader(fh):
                    names[r["Kernel_Name"]] += 1
        row.update(outcome=man["outcome"], dispatch_count=man["dispatch_count"], trace_rows=sum(names.values()),
                   distinct_kernels=len(names), tracer=man.get("tracer"), wrapper_opts=wrapper_opts or [])
    return row


def part_a(harness_args: list[str], skip: int, procs: int, variants: dict, log: str) -> list[dict]:
    rows = []
    order = [("plain", False, {})] + [(name, True, env) for name, env in variants.items()]
    for i in range(procs):
        for name, traced, env in (order if i % 2 == 0 else order[::-1]):
            env = dict(env, MADENGINE_ROCPROF_TRACER_SKIP_STEPS=str(skip)) if traced else {}
            wrapper_opts = env.pop("WRAPPER_ARGS", "").split()  # e.g. WRAPPER_ARGS=--hip-trace in a variant
            with tempfile.TemporaryDirectory() as work:
                row = harness_run(harness_args, work, traced, env, wrapper_opts)
            row["variant"] = name
            win = split_windows(row["step_times_ms"], row["warmup"], skip)
            row["windows"] = {"untraced": summary(win["untraced"]), "traced": summary(win["traced"]),
                              "start_step_ms": win["start_step"], "first_traced_step_ms": win["first_traced_step"],
                              "start_index": win["start_index"]}
            row["overhead_pct"] = 100.0 * (row["windows"]["traced"]["median"] / row["windows"]["untraced"]["median"]
                                           - 1.0)
            print(json.dumps({k: v for k, v in row.items() if k != "step_times_ms"}), file=sys.stderr, flush=True)
            with open(log, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------- Part B
def part_b(harness_args: list[str], steps: int, rounds: int) -> dict:
    sys.path.insert(0, os.path.dirname(HARNESS))
    import torch
    from torch.profiler import ProfilerActivity, profile

    import tt_harness
    import tt_model
    import tt_train
    from tt_versions import VERSIONS

    args = tt_harness.parse_args(harness_args)
    tt_harness.resolve(args)
    device = torch.device(args.device)
    spec = VERSIONS[args.version]
    cfg = tt_model.ModelConfig(vocab_size=args.vocab_size, hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                               num_heads=args.num_heads, num_kv_heads=args.num_kv_heads, max_seq_len=args.seq_len)
    model = tt_train.build_model(args.version, cfg, device, args.seed, args.attention)
    opt = tt_train.make_optimizer(model, args.version, args.learning_rate, device, capturable=False)
    step = tt_train.TrainStep(model, opt, device, args.dtype, graphs=False, tf32=spec.tf32)
    xs, ys = tt_train.split_batches(tt_train.make_tokens(args.task, 16, args.batch_size, args.seq_len,
                                                         cfg.vocab_size, args.seed + 1009, device))
    gpu = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize()) if gpu else (lambda: None)

    def experimental(**kw):
        from torch._C._profiler import _ExperimentalConfig
        return _ExperimentalConfig(**kw)

    gpu_act = ProfilerActivity.CUDA if gpu else ProfilerActivity.CPU
    kernels_only = ["CONCURRENT_KERNEL", "GPU_MEMCPY", "GPU_MEMSET"]
    configs = {
        "none": None,
        "cuda (corr off: tracer default)": lambda: profile(activities=[gpu_act],
                                                           experimental_config=experimental(
                                                               disable_external_correlation=True)),
        "cuda (corr on)": lambda: profile(activities=[gpu_act]),
        "cuda kernels+memcpy only (filter)": lambda: profile(activities=[{gpu_act: kernels_only}],
                                                             experimental_config=experimental(
                                                                 disable_external_correlation=True)),
        "cuda kernels+runtime (filter)": lambda: profile(activities=[{gpu_act: kernels_only + ["CUDA_RUNTIME"]}],
                                                         experimental_config=experimental(
                                                             disable_external_correlation=True)),
        "cpu+cuda": lambda: profile(activities=[ProfilerActivity.CPU, gpu_act]),
    }
    unsupported = {}
    p: Any  # a torch.profiler.profile (or None for the untraced config)
    for name, make in list(configs.items()):
        if make is None:
            continue
        try:
            p = make()
            p.start()
            step(xs[0], ys[0])
            sync()
            p.stop()
        except Exception as exc:  # e.g. activity filters need a newer torch
            unsupported[name] = repr(exc)[:300]
            del configs[name]
    for i in range(3):
        step(xs[i], ys[i])
    sync()

    def block(n: int):
        dev, host = [], []
        for i in range(n):
            if gpu:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
            t = time.perf_counter()
            step(xs[i % xs.shape[0]], ys[i % ys.shape[0]])
            host.append((time.perf_counter() - t) * 1e3)
            if gpu:
                b.record()
                dev.append((a, b))
        sync()
        return ([a.elapsed_time(b) for a, b in dev] if gpu else host), host

    res: dict[str, dict[str, Any]] = {
        n: {"device_ms": [], "host_ms": [], "start_ms": [], "kernels_per_step": [], "activities_per_step": [],
            "busy_ms_per_step": [], "names": None}
        for n in configs
    }
    names = list(configs)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            make = configs[name]
            p = None
            if make is not None:
                sync()
                t = time.perf_counter()
                p = make()
                p.start()
                res[name]["start_ms"].append((time.perf_counter() - t) * 1e3)
                block(2)  # settle: first traced steps pay one-time costs
            dev, host = block(steps)
            res[name]["device_ms"] += dev
            res[name]["host_ms"] += host
            if p is not None:
                p.stop()
                evs = [e for e in p.profiler.kineto_results.events()
                       if (e.device_type() == torch.autograd.DeviceType.CUDA) == gpu]
                if gpu:  # kernels alone (the kernel trace's rows) and all GPU activities (memcpy/memset too)
                    res[name]["kernels_per_step"].append(
                        sum(not e.name().startswith(("Memcpy", "Memset")) for e in evs) / (steps + 2))
                    res[name]["activities_per_step"].append(len(evs) / (steps + 2))
                    res[name]["busy_ms_per_step"].append(sum(e.duration_ns() for e in evs) / 1e6 / (steps + 2))
                    res[name]["names"] = sorted(collections.Counter(e.name() for e in evs).items())
                else:
                    res[name]["kernels_per_step"].append(len(evs) / (steps + 2))
    base = statistics.median(res["none"]["device_ms"])
    out: dict[str, Any] = {"unsupported": unsupported, "steps_per_block": steps, "rounds": rounds, "variants": {}}
    ref_names = res[names[1]]["names"] if len(names) > 1 else None
    for name in names:
        d = res[name]
        out["variants"][name] = {
            "device_step_ms": summary(d["device_ms"]), "host_step_ms": summary(d["host_ms"]),
            "overhead_pct": 100.0 * (statistics.median(d["device_ms"]) / base - 1.0),
            "profiler_start_ms": d["start_ms"], "kernels_per_step": d["kernels_per_step"],
            "gpu_activities_per_step": d["activities_per_step"],
            "gpu_busy_ms_per_step": d["busy_ms_per_step"],
            "same_kernel_names_as_default": (d["names"] == ref_names) if d["names"] is not None else None,
        }
    return out


def versions() -> dict:
    import torch
    info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
        with contextlib.suppress(OSError):
            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True).stdout.strip()
    else:
        info["device"] = "cpu"
    return info


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--procs", type=int, default=3, help="Part A: processes per variant")
    p.add_argument("--num-steps", type=int, default=80)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--skip", type=int, default=45, help="optimizer steps (warm-up included) before tracing starts")
    p.add_argument("--block-steps", type=int, default=10, help="Part B: timed steps per block")
    p.add_argument("--rounds", type=int, default=3, help="Part B: rounds over all configurations")
    p.add_argument("--tracer-variant", action="append", default=[], metavar="NAME:K=V[;K=V]",
                   help="Part A: extra traced variant with tracer environment; WRAPPER_ARGS=... adds wrapper options"
                   " (the default variant runs unless --no-default)")
    p.add_argument("--no-default", action="store_true", help="Part A: run only the --tracer-variant variants")
    p.add_argument("--skip-part-b", action="store_true")
    p.add_argument("harness", nargs=argparse.REMAINDER, help="-- harness arguments (default: v1 eager)")
    args = p.parse_args()
    harness = [a for a in args.harness if a != "--"] or ["--version", "v1", "--cuda-graphs", "off"]
    harness_a = harness + ["--num-steps", str(args.num_steps), "--warmup-steps", str(args.warmup_steps)]
    variants: dict[str, dict[str, str]] = {} if args.no_default else {"default": {}}
    for spec in args.tracer_variant:
        name, _, kvs = spec.partition(":")
        variants[name] = dict(kv.split("=", 1) for kv in kvs.split(";") if kv)
    os.makedirs(args.out, exist_ok=True)
    report = {"versions": versions(), "harness_args": harness_a, "skip_steps": args.skip, "command": sys.argv}
    t = time.monotonic()
    if not args.skip_part_b:
        report["part_b"] = part_b(harness, args.block_steps, args.rounds)
        with open(os.path.join(args.out, "part_b.json"), "w") as fh:  # kept if a later part runs out of time
            json.dump(report, fh, indent=1)
        print(f"part B done in {time.monotonic() - t:.0f} s", file=sys.stderr, flush=True)
    unsupported = report.get("part_b", {}).get("unsupported", {})
    if any("(filter)" in name for name in unsupported):  # this torch has no activity filters: same as default
        variants = {k: v for k, v in variants.items() if "MADENGINE_ROCPROF_TRACER_GPU_ACTIVITIES" not in v}
    report["part_a"] = part_a(harness_a, args.skip, args.procs, variants, os.path.join(args.out, "part_a_rows.jsonl"))
    # Completeness: rows in the kernel trace vs launches per step (Part B, default config) x traced steps.
    per_step = None
    if "part_b" in report:
        ks = report["part_b"]["variants"].get("cuda (corr off: tracer default)", {}).get("kernels_per_step")
        per_step = statistics.median(ks) if ks else None
    traced_steps = args.warmup_steps + args.num_steps - args.skip
    for row in report["part_a"]:
        if row["traced"] and per_step:
            row["expected_rows"] = per_step * traced_steps
            row["extra_rows"] = row["trace_rows"] - per_step * traced_steps
    # Per variant: overhead of each process (its own traced vs untraced medians), and the plain drift control.
    agg: dict[str, list[float]] = {}
    for row in report["part_a"]:
        agg.setdefault(row["variant"], []).append(row["overhead_pct"])
    report["part_a_overhead_pct"] = {k: {"per_process": v, "median": statistics.median(v), "min": min(v),
                                         "max": max(v)} for k, v in agg.items()}
    with open(os.path.join(args.out, "overhead_inprocess.json"), "w") as fh:
        json.dump(report, fh, indent=1)

    print("\n== versions:", json.dumps(report["versions"]))
    if "part_b" in report:
        pb = report["part_b"]
        print(f"== Part B: one process, {pb['rounds']} rounds x {pb['steps_per_block']} steps per configuration;"
              f" unsupported: {list(pb['unsupported'])}")
        print(f"{'configuration':36s} {'dev med':>8s} {'p10':>7s} {'p90':>7s} {'host med':>8s} {'ovh %':>7s}"
              f" {'kern/step':>9s} {'busy ms':>8s} {'start ms':>8s} names")
        for name, v in pb["variants"].items():
            ks = v["kernels_per_step"]
            print(f"{name:36s} {v['device_step_ms']['median']:8.3f} {v['device_step_ms']['p10']:7.3f}"
                  f" {v['device_step_ms']['p90']:7.3f} {v['host_step_ms']['median']:8.3f} {v['overhead_pct']:7.2f}"
                  f" {(statistics.median(ks) if ks else 0):9.1f}"
                  f" {(statistics.median(v['gpu_busy_ms_per_step']) if v['gpu_busy_ms_per_step'] else 0):8.3f}"
                  f" {(statistics.median(v['profiler_start_ms']) if v['profiler_start_ms'] else 0):8.1f}"
                  f" {v['same_kernel_names_as_default']}")
    print(f"== Part A: harness {' '.join(harness_a)}, tracer starts after optimizer step {args.skip}")
    print(f"{'variant':10s} {'untraced med':>12s} {'p10':>7s} {'p90':>7s} {'traced med':>10s} {'p10':>7s} {'p90':>7s}"
          f" {'ovh %':>7s} {'start ms':>8s} {'1st ms':>7s} {'rows':>7s}")
    for row in report["part_a"]:
        w = row["windows"]
        print(f"{row['variant']:10s} {w['untraced']['median']:12.3f} {w['untraced']['p10']:7.3f}"
              f" {w['untraced']['p90']:7.3f} {w['traced']['median']:10.3f} {w['traced']['p10']:7.3f}"
              f" {w['traced']['p90']:7.3f} {row['overhead_pct']:7.2f} {w['start_step_ms']:8.2f}"
              f" {w['first_traced_step_ms']:7.2f} {row.get('trace_rows', '-'):>7}"
              f" {','.join((row.get('tracer') or {}).get('backends', ['-']))}"
              f" dropped={(row.get('tracer') or {}).get('dropped_records', '-')} {row.get('outcome', '')}")
    if per_step:
        print(f"kernel trace rows expected: {per_step:g} per step x {traced_steps} traced steps ="
              f" {per_step * traced_steps:g} (+ a few after the last step); got"
              f" {[r['trace_rows'] for r in report['part_a'] if r['traced']]}")
    for k, v in report["part_a_overhead_pct"].items():
        print(f"overhead {k}: median {v['median']:.2f}% (min {v['min']:.2f}, max {v['max']:.2f}) over "
              f"{len(v['per_process'])} processes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
