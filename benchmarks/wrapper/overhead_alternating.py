"""Tracing overhead on a TinyTransformer training step, measured with alternating windows inside one process.

Why: step times of eager v1 at B8 S128 drift by several percent between minutes and between processes on the device
machine (benchmarks/wrapper/README.md: plain processes drifted up to +17.8% between two windows), which is larger
than the overhead to measure. Here each process alternates untraced and traced blocks of BLOCK_STEPS steps (AB, BA,
AB, ... so a trend cancels), and the overhead is the median over pairs of (traced block median step / untraced block
median step), with a bootstrap 95% interval over the pairs of all processes. The tracer is the product's backend
object (cupti_backend.CuptiBackend, or torch.profiler as the torch backend starts it), started before a traced
block and stopped after it, outside the timed steps. A `plain` variant runs the same schedule with no tracer: its
"overhead" is the method's own bias and noise. The first traced window of each process (CUPTI's one-time setup) is
not timed.

    python3 benchmarks/wrapper/overhead_alternating.py --out DIR [--variants plain,cupti,...] [--procs 2]
        [--pairs 40] [--block-steps 4] -- --version v1 --batch-size 8 --seq-len 128 --cuda-graphs off

Step time is the harness's: CUDA events around each whole step (tt_train.timed_run); each block's wall clock
(end-to-end, host work included) is compared the same way.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TT = os.path.join(REPO, "scripts", "tinytransformer")
VARIANTS = {
    "plain": "no tracer: the method's own bias and noise",
    "cupti": "CUPTI: kernel + memcpy + memset records (the default: per-thread buffers, CUPTI zeroes no buffer)",
    "cupti_shared_buffers": "CUPTI: as `cupti`, but one buffer queue for all threads",
    "cupti_api_activity": "CUPTI + every CUDA runtime API call as CUPTI's API activity records (--hip-trace,"
                          " MADENGINE_ROCPROF_TRACER_API_RECORDER=activity)",
    "cupti_api_interpose": "CUPTI + every CUDA runtime API call recorded by the libcudart interposer, kernels joined"
                           " to their launch by a CUPTI callback on the driver's launch/copy/set calls"
                           " (MADENGINE_ROCPROF_TRACER_API_RECORDER=interpose; round 10's results name it"
                           " cupti_api_interpose_callback)",
    "cupti_api_interpose_nojoin": "diagnostic: as cupti_api_interpose without the driver launch callback (no join)",
    "cupti_kernel_only": "diagnostic: as `cupti`, concurrent kernel records only (no memcpy/memset records)",
    "torch": "torch.profiler, CUDA activities, external correlation off (the torch backend's default)",
}


def _tracer(variant: str, torch) -> tuple[Any, Any, Any]:
    """(start, stop, summary) for one variant; summary() -> dict once all windows are done."""
    if variant == "plain":
        return (lambda: None), (lambda: None), (lambda: {})
    if variant == "torch":
        from torch._C._profiler import _ExperimentalConfig
        from torch.profiler import ProfilerActivity, profile

        state: dict[str, Any] = {"kernels": []}

        def start_torch():
            state["p"] = profile(activities=[ProfilerActivity.CUDA],
                                 experimental_config=_ExperimentalConfig(disable_external_correlation=True))
            state["p"].start()

        def stop_torch():
            state["p"].stop()
            state["kernels"].append(sum(1 for e in state["p"].profiler.kineto_results.events()
                                        if e.device_type() == torch.autograd.DeviceType.CUDA))
        return start_torch, stop_torch, lambda: {"gpu_events_per_window": state["kernels"]}
    sys.path.insert(0, REPO)
    from madengine_rocprof.tracer import cupti_backend

    module = cupti_backend.load()
    if variant == "cupti_api_interpose_nojoin":
        from madengine_rocprof.tracer import api_recorder

        api_recorder.launch_cbids = lambda cupti: []
    interposed = variant.startswith("cupti_api_interpose")
    backend = cupti_backend.CuptiBackend(
        module,
        api=variant == "cupti_api_activity" or interposed,
        per_thread_buffers=variant != "cupti_shared_buffers",
        api_recorder_choice="interpose" if interposed else "activity")
    if variant == "cupti_kernel_only":
        backend.kinds = backend.kinds[:1]

    def start_checked():
        backend.start()
        if backend.warnings:  # a variant must measure what its name says, not a fallback
            raise SystemExit(f"{variant}: {backend.warnings}")

    def stop():
        backend.stop()

    def summary():
        with tempfile.TemporaryDirectory(prefix="overhead_trace_") as tmp:
            path, counts = backend.trace(os.path.join(tmp, "t.json"), demangle_names=False)
            with open(path, encoding="utf-8") as fh:
                trace = json.load(fh)
        counts["kernel_rows"] = sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel")
        counts["api_rows"] = sum(1 for e in trace["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver"))
        return counts
    return start_checked, stop, summary


def build_step(harness_argv: list[str]):
    """(torch, tt_train, step, feed, device, args): an eager training step and its batches, from harness arguments."""
    sys.path.insert(0, TT)
    import torch

    import tt_harness
    import tt_model
    import tt_train
    from tt_versions import VERSIONS

    args = tt_harness.parse_args(harness_argv)
    tt_harness.resolve(args)
    device = torch.device(args.device)
    spec = VERSIONS[args.version]
    if args.cuda_graphs == "on" or (args.cuda_graphs == "auto" and spec.cuda_graphs):
        raise SystemExit("this benchmark measures eager steps: pass --cuda-graphs off (a graph replay is one launch)")
    cfg = tt_model.ModelConfig(vocab_size=args.vocab_size, hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                               num_heads=args.num_heads, num_kv_heads=args.num_kv_heads, max_seq_len=args.seq_len)
    model = tt_train.build_model(args.version, cfg, device, args.seed, args.attention, dtype=args.dtype)
    opt = tt_train.make_optimizer(model, args.version, args.learning_rate, device, capturable=False)
    step = tt_train.TrainStep(model, opt, device, args.dtype, graphs=False, tf32=spec.tf32)
    tokens = tt_train.make_tokens(args.task, 64, args.batch_size, args.seq_len, cfg.vocab_size, args.seed, "cpu")
    feed = tt_train.BatchFeed(tokens, device)
    return torch, tt_train, step, feed, device, args


def percentiles(values: list[float]) -> dict:
    if not values:
        return {}
    v = sorted(values)
    pick = {f"p{q}": v[min(len(v) - 1, int(q / 100 * len(v)))] for q in (0, 1, 50, 99)}
    return {**pick, "max": v[-1], "mean": round(statistics.fmean(v), 1)}


def warm_step(argv) -> tuple:
    """(args, tt_train, step, feed, device): the harness's training step after 10 untraced warm-up steps."""
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("harness", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    sys.path[:0] = [REPO]
    _torch, tt_train, step, feed, device, _args = build_step([a for a in args.harness if a != "--"])
    tt_train.timed_run(step, feed, 10, 0, device)
    return args, tt_train, step, feed, device


def one(variant: str, pairs: int, block_steps: int, harness_argv: list[str]) -> dict:
    torch, tt_train, step, feed, device, args = build_step(harness_argv)
    start, stop, summary = _tracer(variant, torch)

    def block(traced: bool) -> tuple[list[float], float]:
        if traced:
            start()
        times, _losses, wall = tt_train.timed_run(step, feed, 0, block_steps, device)  # ends with a device sync
        if traced:
            stop()
        return times, wall

    tt_train.timed_run(step, feed, max(args.warmup_steps, 10), 0, device)
    block(True)  # the first traced window pays one-time setup (CUPTI attaches to the context): not timed
    rows = []
    for i in range(pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        got = {traced: block(traced) for traced in order}
        print(f"pair {i + 1}/{pairs}", file=sys.stderr, flush=True)  # progress: a hang shows where it stopped
        rows.append({"order": "untraced first" if order[0] is False else "traced first",
                     "untraced_ms": got[False][0], "traced_ms": got[True][0],
                     "untraced_wall_s": got[False][1], "traced_wall_s": got[True][1]})
    return {"variant": variant, "what": VARIANTS[variant], "pid": os.getpid(), "pairs": rows,
            "block_steps": block_steps, "tracer": summary()}


def bootstrap(values: list[float], seed: int = 1, draws: int = 4000) -> tuple[float, float]:
    """95% percentile interval of the median of `values`, resampled with replacement."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return meds[int(0.025 * draws)], meds[int(0.975 * draws) - 1]


def aggregate(processes: list[dict]) -> dict:
    step_ratios = [statistics.median(p["traced_ms"]) / statistics.median(p["untraced_ms"])
                   for proc in processes for p in proc["pairs"]]
    wall_ratios = [p["traced_wall_s"] / p["untraced_wall_s"] for proc in processes for p in proc["pairs"]]
    # steady state: without the first step of each block (a window's start: buffer hand-over, CUPTI re-arming)
    steady = [statistics.median(p["traced_ms"][1:]) / statistics.median(p["untraced_ms"][1:])
              for proc in processes for p in proc["pairs"] if len(p["traced_ms"]) > 1]
    lo, hi = bootstrap(step_ratios)
    wlo, whi = bootstrap(wall_ratios)
    return {"pairs": len(step_ratios), "processes": len(processes),
            "overhead_pct": (statistics.median(step_ratios) - 1) * 100, "ci95_pct": [(lo - 1) * 100, (hi - 1) * 100],
            "per_process_pct": [(statistics.median([statistics.median(p["traced_ms"]) / statistics.median(
                p["untraced_ms"]) for p in proc["pairs"]]) - 1) * 100 for proc in processes],
            "steady_overhead_pct": (statistics.median(steady) - 1) * 100 if steady else None,
            "steady_ci95_pct": [(x - 1) * 100 for x in bootstrap(steady)] if steady else None,
            "wall_overhead_pct": (statistics.median(wall_ratios) - 1) * 100,
            "wall_ci95_pct": [(wlo - 1) * 100, (whi - 1) * 100],
            "untraced_step_ms_median": statistics.median(t for proc in processes for p in proc["pairs"]
                                                         for t in p["untraced_ms"]),
            "traced_step_ms_median": statistics.median(t for proc in processes for p in proc["pairs"]
                                                       for t in p["traced_ms"])}


def main() -> int:
    argv = sys.argv[1:]
    harness = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(
        usage="%(prog)s [options] -- TinyTransformer harness arguments (e.g. --version v1 --batch-size 8)",
        description=__doc__.split("\n")[0],
        epilog="variants: " + "; ".join(f"{k}: {v}" for k, v in VARIANTS.items()),
    )
    p.add_argument("--out", required=False, help="folder for overhead_alternating.json (default: print only)")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma list (default: all, see below)")
    p.add_argument("--procs", type=int, default=2, help="processes per variant (their order rotates; default 2)")
    p.add_argument("--pairs", type=int, default=40, help="untraced/traced block pairs per process (default 40)")
    p.add_argument("--block-steps", type=int, default=4, help="training steps per block (default 4)")
    p.add_argument("--one", choices=list(VARIANTS), help="run one process of this variant (what the driver runs)")
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.pairs, args.block_steps, harness)))
        return 0
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    errors: dict[str, str] = {}
    for rep in range(args.procs):
        for v in variants[rep % len(variants):] + variants[:rep % len(variants)]:
            t0 = time.monotonic()
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", v, "--pairs", str(args.pairs),
                                   "--block-steps", str(args.block_steps), "--", *harness],
                                  env=env,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                errors[f"{v}#{rep}"] = done.stderr[-3000:]
                print(f"{v} process {rep}: FAILED\n{done.stderr[-1500:]}", file=sys.stderr, flush=True)
                continue
            runs[v].append(json.loads(done.stdout.strip().splitlines()[-1]))
            a = aggregate(runs[v][-1:])
            print(f"{v} process {rep}: {a['overhead_pct']:+.2f}% (wall {a['wall_overhead_pct']:+.2f}%), "
                  f"{time.monotonic() - t0:.0f} s, tracer {json.dumps(runs[v][-1]['tracer'])[:300]}",
                  file=sys.stderr, flush=True)
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    result = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda,
              "harness_args": harness, "pairs_per_process": args.pairs, "block_steps": args.block_steps,
              "summary": {v: {"what": VARIANTS[v], **aggregate(r)} for v, r in runs.items() if r},
              "errors": errors, "runs": runs}
    text = json.dumps(result, indent=1)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "overhead_alternating.json"), "w", encoding="utf-8") as fh:
            fh.write(text)
    for v, s in result["summary"].items():
        steady = (f" steady {s['steady_overhead_pct']:+6.2f}% ({s['steady_ci95_pct'][0]:+.2f}.."
                  f"{s['steady_ci95_pct'][1]:+.2f})" if s["steady_overhead_pct"] is not None else "")
        print(f"{v:22s} overhead {s['overhead_pct']:+6.2f}% (95% CI {s['ci95_pct'][0]:+.2f}..{s['ci95_pct'][1]:+.2f}; "
              f"per process {', '.join(f'{x:+.1f}' for x in s['per_process_pct'])})"
              f" wall {s['wall_overhead_pct']:+6.2f}%"
              f"{steady} | step ms {s['untraced_step_ms_median']:.2f} -> {s['traced_step_ms_median']:.2f}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
