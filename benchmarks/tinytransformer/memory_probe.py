"""Where v4's peak memory comes from at B32 S512 (GPU): live and peak allocated memory after each stage of the
harness's timed run (model + optimizer, each eager warm-up step, the CUDA-graph capture, replays).

    python benchmarks/tinytransformer/memory_probe.py [--batch 32 --seq 512] [--graphs on|off]"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "tinytransformer"))

import torch  # noqa: E402

import tt_model  # noqa: E402
import tt_train  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--graphs", choices=("on", "off"), default="on")
    args = p.parse_args()
    dev = torch.device("cuda")
    mib = 2 ** 20

    def show(stage):
        torch.cuda.synchronize()
        print(f"{stage:38s} live {torch.cuda.memory_allocated() / mib:8.1f} MiB   peak since last "
              f"{torch.cuda.max_memory_allocated() / mib:8.1f} MiB", flush=True)
        torch.cuda.reset_peak_memory_stats()

    cfg = tt_model.ModelConfig(max_seq_len=args.seq)
    model = tt_train.build_model("v4", cfg, dev, 0, "triton", dtype="bf16")
    opt = tt_train.make_optimizer(model, "v4", 3e-4, dev, capturable=args.graphs == "on")
    show("model + optimizer")
    step = tt_train.TrainStep(model, opt, dev, "bf16", graphs=args.graphs == "on")
    feed = tt_train.BatchFeed(tt_train.make_tokens("random", 4, args.batch, args.seq, 1000, 0, "cpu"), dev)
    show("batch feed")
    for i in range(6):
        step(*feed.next())
        show(f"step {i} ({'eager' if step.graph is None or i < 3 else 'graph'})")


if __name__ == "__main__":
    main()
