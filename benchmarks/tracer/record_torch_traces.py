"""Short torch.profiler (Kineto) traces of TinyTransformer training steps, with ProfilerStep#N markers, as gzipped
Chrome JSON: real GPU traces for developing the reports' Kineto readers (not a benchmark).

    python3 benchmarks/tracer/record_torch_traces.py --out DIR [--versions v1,v4] [--steps 5]

Each version runs the harness's own model, optimizer and step (tt_train.TrainStep) at B8 S128, warms up, then
records `--steps` steps under torch.profiler's schedule (wait 0, warmup 1, active N), CPU and CUDA activities,
calling prof.step() after each training step. Writes DIR/tt_<version>_b8s128.pt.trace.json.gz.
"""
from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts", "tinytransformer"))


def record(version: str, steps: int, out: str) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    import tt_harness
    import tt_model
    import tt_train
    from tt_versions import VERSIONS

    args = tt_harness.parse_args(["--version", version, "--batch-size", "8", "--seq-len", "128"])
    tt_harness.resolve(args)
    device = torch.device(args.device)
    spec = VERSIONS[version]
    graphs = device.type == "cuda" and spec.cuda_graphs
    cfg = tt_model.ModelConfig(vocab_size=args.vocab_size, hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                               num_heads=args.num_heads, num_kv_heads=args.num_kv_heads, max_seq_len=args.seq_len)
    model = tt_train.build_model(version, cfg, device, args.seed, args.attention, dtype=args.dtype)
    opt = tt_train.make_optimizer(model, version, args.learning_rate, device, capturable=graphs)
    step = tt_train.TrainStep(model, opt, device, args.dtype, graphs=graphs, tf32=spec.tf32)
    tokens = tt_train.make_tokens("random", 16, args.batch_size, args.seq_len, cfg.vocab_size, args.seed, "cpu")
    feed = tt_train.BatchFeed(tokens, device)
    for _ in range(6):  # warm-up (a CUDA graph is captured here)
        step(*feed.next())
    tt_train.sync(device)
    path = os.path.join(out, f"tt_{version}_b8s128.pt.trace.json.gz")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path), record_shapes=False) as prof:
        for _ in range(steps + 1):
            step(*feed.next())
            prof.step()
    tt_train.sync(device)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--versions", default="v1,v4")
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for version in args.versions.split(","):
        path = record(version.strip(), args.steps, args.out)
        print(f"{version}: {path} ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
