"""What the data-parallel v4 step costs over one rank, and which data-parallel path hides the communication best.

    python3 benchmarks/tinytransformer/scaling_probe.py --out DIR [--modes side,noside,side]   # one rank: with and
        # without the side-stream weight gradients (DDP turns them off: its hooks read each gradient at once)
    python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
        benchmarks/tinytransformer/scaling_probe.py --out DIR --modes sharded,ddp:25,ddp:8   # 2 ranks, one run each

Modes of 2 ranks: `sharded` (tt_sharded_adamw: reduce-scatter, sharded AdamW, all-gather; the default; `sharded:noside`
without the side-stream weight gradients, `sharded:kN` exchanging the flat buffer in N chunks), `ddp:MB`
(DistributedDataParallel with MB-MiB buckets, the gradient all-reduce captured in the graph). v4 B8 S128 (or
--batch-size/--seq-len), every run in this one process (one process group); rank 0 prints one line per run and
appends it to DIR/probe.jsonl. Not a case: its lines are evidence for tt_train.SHARDED_OPTIMIZER and DDP_BUCKET_MB."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "tinytransformer"))

import torch  # noqa: E402

import tt_harness  # noqa: E402
import tt_sharded_adamw  # noqa: E402
import tt_train  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--modes", default=None, help="runs, comma-separated: side, noside (one rank); sharded, ddp:MB "
                   "(several ranks); default side,noside,side or sharded,ddp:25")
    p.add_argument("--batch-size", default="8")
    p.add_argument("--seq-len", default="128")
    p.add_argument("--steps", default="200")
    args = p.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rank = 0
    if world > 1:
        rank, _, _ = tt_harness.setup_distributed(argparse.Namespace(device=device))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import tt_kernels
    modes = (args.modes or ("sharded,ddp:25" if world > 1 else "side,noside,side")).split(",")
    code = 0
    default_chunks = tt_sharded_adamw.COMM_CHUNKS
    for mode in modes:
        tt_kernels.WGRAD_SIDE_STREAM = not mode.endswith("noside")
        tt_sharded_adamw.COMM_CHUNKS = default_chunks
        if world > 1 and mode in ("sharded", "sharded:noside") or re.fullmatch(r"sharded:k[1-9]", mode):
            tt_train.SHARDED_OPTIMIZER = True
            if mode[-2] == "k":
                tt_sharded_adamw.COMM_CHUNKS = int(mode[-1])
        elif world > 1 and mode.startswith("ddp:"):
            tt_train.SHARDED_OPTIMIZER = False
            tt_train.DDP_BUCKET_MB = float(mode[4:])
        elif world > 1 or mode not in ("side", "noside"):
            p.error(f"unknown mode {mode!r} for {world} rank(s): side, noside (one rank); sharded, sharded:noside, "
                    "sharded:kN, ddp:MB (several)")
        json_out = out / f"probe_{rank}.json"
        warmup = "15" if device == "cuda" else "1"
        rc = tt_harness.main(["--version", "v4", "--batch-size", args.batch_size, "--seq-len", args.seq_len,
                              "--num-steps", args.steps, "--warmup-steps", warmup, "--json-out", str(json_out)]
                             + (["--device", "cpu", "--tiny"] if device == "cpu" else []))
        code = code or rc
        if rank == 0:
            m = json.loads(json_out.read_text())["metrics"]
            line = {"world": world, "mode": mode, "batch": int(args.batch_size), "seq": int(args.seq_len),
                    "tokens_per_second": m["tokens_per_second"],
                    "step_ms": m["step_time_ms"]["median"], "p10_ms": m["step_time_ms"]["p10"],
                    "p90_ms": m["step_time_ms"]["p90"], "nccl_env": {k: v for k, v in os.environ.items()
                                                                     if k.startswith("NCCL_")}}
            print("probe", json.dumps(line), flush=True)
            with (out / "probe.jsonl").open("a") as fh:
                fh.write(json.dumps(line) + "\n")
    if world > 1:
        import torch.distributed as dist
        dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
