"""The sharded optimizer that replaces DDP for v4's bf16 parameters on several ranks (tt_sharded_adamw), on two gloo
ranks: one step equals torch.optim.AdamW on the mean of the ranks' gradients, every rank ends with the same weights,
the projections write their weight gradients straight into the flat buffer, and the harness picks it for v4 only."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import argparse, json, os, sys
sys.path.insert(0, {scripts!r})
os.environ.setdefault("TRITON_INTERPRET", "1")
import torch
import torch.distributed as dist
import tt_harness, tt_kernels, tt_model, tt_optim, tt_sharded_adamw, tt_train
rank, world, device = tt_harness.setup_distributed(argparse.Namespace(device="cpu"))
out = {{}}

# 1. one optimizer step on a hand-made parameter set whose size (1001 elements) is no multiple of 8 * world * chunks,
# exchanged in 1 and in 3 chunks
for n_chunks in (1, 3):
    tt_sharded_adamw.COMM_CHUNKS = n_chunks
    torch.manual_seed(0)
    shapes = [(7, 11), (3, 300), (24,)]
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    start = [p.detach().clone() for p in params]
    mw = tt_optim.use_low_precision_params(torch.nn.ParameterList(params))
    grads = [[torch.randn(s) for s in shapes] for _ in range(world)]  # every rank's gradients, known to all
    lr, wd = 1e-2, 0.01
    opt = tt_sharded_adamw.ShardedMasterAdamW(mw, lr=lr, weight_decay=wd)
    for p, g in zip(params, grads[rank]):
        p.grad = g.to(torch.bfloat16)
    opt.step()
    ref = [torch.nn.Parameter(s.clone()) for s in start]
    ref_opt = torch.optim.AdamW(ref, lr=lr, weight_decay=wd)
    for i, p in enumerate(ref):  # the mean of the bf16 gradients, as the ranks exchange them
        p.grad = sum(grads[r][i].to(torch.bfloat16).float() for r in range(world)) / world
    ref_opt.step()
    n = sum(p.numel() for p in params)
    flat_ref = torch.cat([p.detach().reshape(-1) for p in ref])
    padded_ref = torch.cat([flat_ref, torch.zeros(mw.master.numel() - n)])
    res = out[n_chunks] = {{}}
    res["owned"] = opt.owned
    res["padded_size"] = mw.low.numel()
    res["master_err"] = max(float((mw.master[a:b] - padded_ref[a:b]).abs().max()) for a, b in opt.owned)
    res["low_rel_err"] = float(((mw.low[:n].float() - flat_ref).abs() / flat_ref.abs()).max())
    res["params_view_low"] = all(p.untyped_storage().data_ptr() == mw.low.untyped_storage().data_ptr()
                                 for p in params)
    gathered = [torch.empty_like(mw.low) for _ in range(world)]
    dist.all_gather(gathered, mw.low.contiguous())
    res["ranks_equal"] = all(torch.equal(gathered[0], g) for g in gathered)
    res["moments_per_rank"] = opt.exp_avg.numel()

# 2. the harness's path for v4 bf16: no DDP, the sharded optimizer, projections' gradients in the flat buffer
cfg = tt_model.ModelConfig(vocab_size=1000, hidden_dim=64, num_layers=2, num_heads=4, max_seq_len=32)
model = tt_train.build_model("v4", cfg, device, 42, "sdpa", dtype="bf16")
wrapped = tt_train.data_parallel(model, device)
opt = tt_train.make_optimizer(wrapped, "v4", 1e-3, device, capturable=False)
out["v4_kind"] = tt_train.data_parallel_kind(wrapped)
out["v4_optimizer"] = type(opt).__name__
step = tt_train.TrainStep(wrapped, opt, device, "bf16")
x, y = tt_train.split_batches(tt_train.make_tokens("random", 1, 2, 16, cfg.vocab_size, 7 + rank, device)[0])
step(x, y)
named = dict(model.named_parameters())
in_place = [name for (name, p), view in zip(named.items(), opt.grad_views) if p.grad.data_ptr() == view.data_ptr()]
out["grads_in_place"] = sorted(in_place)
out["grads_copied"] = sorted(set(named) - set(in_place))
v1 = tt_train.data_parallel(tt_train.build_model("v1", cfg, device, 42), device)
out["v1_kind"] = tt_train.data_parallel_kind(v1)
# DDP's weights are marked hooked: v4's projections then keep their weight gradients off the side stream
out["ddp_weights_hooked"] = all(tt_kernels.grad_target(p)[0] for p in v1.parameters())
out["sharded_weights_hooked"] = any(tt_kernels.grad_target(p)[0] for p in model.parameters())
del v1, step, opt, wrapped, model
if rank == 0:
    open(sys.argv[1], "w").write(json.dumps(out))
dist.destroy_process_group()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


@pytest.mark.slow
def test_sharded_adamw_on_two_ranks_equals_adamw_on_the_mean_gradient(tmp_path):
    script = tmp_path / "sharded_2ranks.py"
    script.write_text(SCRIPT.format(scripts=str(REPO / "scripts" / "tinytransformer")))
    result = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        str(script), str(result)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(result.read_text())
    # 1001 elements padded to a multiple of 8 x 2 ranks x chunks; each rank keeps the moments of its half only
    assert (out["1"]["padded_size"], out["1"]["moments_per_rank"], out["1"]["owned"]) == (1008, 504, [[0, 504]])
    assert (out["3"]["padded_size"], out["3"]["moments_per_rank"]) == (1008, 504)
    assert out["3"]["owned"] == [[0, 168], [336, 504], [672, 840]]  # rank 0: the first half of every chunk
    for res in (out["1"], out["3"]):
        assert res["master_err"] < 1e-6  # fp32 master weights: AdamW's arithmetic to float rounding
        assert res["low_rel_err"] <= 2 ** -7  # the all-gathered bf16 weights: within one bf16 step (8-bit mantissa)
        assert res["params_view_low"] and res["ranks_equal"]
    assert out["v4_kind"] == "sharded_adamw" and out["v4_optimizer"] == "ShardedMasterAdamW"
    assert out["v1_kind"] == "ddp"
    assert out["ddp_weights_hooked"] and not out["sharded_weights_hooked"]
    # every fused projection (QKV, output, gate/up, down) of both layers wrote its gradient in place; the norms, the
    # tied embedding (two contributions) are copied
    projections = [n for n in out["grads_in_place"] if n.endswith(("wqkv.weight", "wo.weight", "w_gate_up.weight",
                                                                    "w_down.weight"))]
    assert len(projections) == 8 and projections == out["grads_in_place"]
    assert "tok_emb.weight" in out["grads_copied"] and "norm" in out["grads_copied"]
