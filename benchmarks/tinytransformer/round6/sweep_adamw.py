"""Sweep of the one-kernel AdamW's launch settings (elements per program, warps) over v4's 74 real parameters
(31,977,984; bf16 gradients, fp32 master weights and moments: 28 bytes per parameter), timed in CUDA graphs.
Writes the best as a bench.py --kernel-settings file. GPU only. Round 6: every setting within 1% of the landed one
(2048 elements, 8 warps: 225 us, about 4.0 TB/s), so nothing changed.

    python benchmarks/tinytransformer/round6/sweep_adamw.py OUT.json
"""
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "tinytransformer"))
import torch  # noqa: E402
import triton.testing  # noqa: E402

import tt_kernels as K  # noqa: E402
import tt_model  # noqa: E402
import tt_train  # noqa: E402

dev = torch.device("cuda")
cfg = tt_model.ModelConfig(max_seq_len=512)
res = {}
ref_master = None
for block, warps in itertools.product((1024, 2048, 4096, 8192), (4, 8, 16)):
    if block // (32 * warps) < 4:
        continue
    K.ADAMW_BLOCK, K.ADAMW_WARPS = block, warps
    model = tt_train.build_model("v4", cfg, dev, 0, "triton", dtype="bf16")
    opt = tt_train.make_optimizer(model, "v4", 3e-4, dev, capturable=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, device=dev, generator=g).to(torch.bfloat16)
    opt.step()
    torch.cuda.synchronize()
    if ref_master is None:
        ref_master = opt.weights.master.clone()
    err = float((opt.weights.master - ref_master).abs().max())
    ms = triton.testing.do_bench_cudagraph(opt.step, rep=200, return_mode="median")
    n = opt.weights.master.numel()
    res[(block, warps)] = ms * 1e3
    print(f"block {block:5d} warps {warps:2d}: {ms*1e3:6.1f} us {n*28/ms/1e6:6.0f} GB/s "
          f"(first-step diff vs first setting {err:.1e})", flush=True)
    del model, opt
best = min(res, key=lambda k: res[k])
print("best", best, f"{res[best]:.1f} us; current (2048, 8) {res[(2048, 8)]:.1f} us")
Path(sys.argv[1]).write_text(json.dumps({"ADAMW_BLOCK": best[0], "ADAMW_WARPS": best[1]}))
