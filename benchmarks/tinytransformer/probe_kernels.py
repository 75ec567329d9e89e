"""Device probe for v4's memory-bound kernels (H100/H200): checks, then times, the RMSNorm backward (atomic dw) at the
B32 S512 shape for several program counts, and the one-kernel AdamW over 32M parameters against torch's fused AdamW.

    python benchmarks/tinytransformer/probe_kernels.py

Prints one line per measurement (median of triton.testing.do_bench) with the bytes moved and the achieved GB/s."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "tinytransformer"))

import torch  # noqa: E402
import triton.testing  # noqa: E402

import tt_kernels  # noqa: E402
import tt_model  # noqa: E402
import tt_optim  # noqa: E402


def rmsnorm_backward(rows=16384, cols=512):
    dev = "cuda"
    x = torch.randn(rows, cols, device=dev)
    r = torch.randn(rows, cols, device=dev).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn(cols, device=dev)).to(torch.bfloat16).requires_grad_()
    x.requires_grad_()
    r.requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y, h = tt_kernels.add_rmsnorm(x, r, w)
    dy = torch.randn_like(y)
    dh = torch.randn_like(h)
    gx, gr, gw = torch.autograd.grad((y, h), (x, r, w), (dy, dh), retain_graph=True)
    # check against eager fp32 (x + r is the norm input; the kernel saved a bf16 copy of it)
    xr = (x.detach() + r.detach().float()).to(torch.bfloat16).float().requires_grad_()
    yr = tt_model.eager_rmsnorm(xr, w.detach().float(), 1e-6)
    (ex,) = torch.autograd.grad((yr, xr), (xr,), (dy.float(), dh))
    ew = ((dy.float() * xr.detach() * torch.rsqrt(xr.detach().pow(2).mean(-1, keepdim=True) + 1e-6)).sum(0))
    err_x = float((gx - ex).norm() / ex.norm())
    err_w = float((gw.float() - ew).norm() / ew.norm())
    print(f"rmsnorm bwd check: dx rel err {err_x:.2e}, dw rel err {err_w:.2e} (bf16 dw)")
    assert err_x < 1e-2 and err_w < 1e-2
    nbytes = rows * cols * (2 + 2 + 4 + 4 + 2)  # x(bf16) dy(bf16) dh(fp32) -> dx(fp32) dr(bf16)
    landed = tt_kernels.NORM_BWD_PROGRAMS_PER_SM
    for per_sm in (1, 2, 4, 8, 16):
        tt_kernels.NORM_BWD_PROGRAMS_PER_SM = per_sm
        ms = triton.testing.do_bench(lambda: torch.autograd.grad((y, h), (x, r, w), (dy, dh), retain_graph=True),
                                     warmup=25, rep=200, return_mode="median")
        print(f"rmsnorm bwd {rows}x{cols} programs/SM {per_sm:2d}: {ms * 1e3:7.1f} us, {nbytes / ms / 1e6:7.0f} GB/s")
    tt_kernels.NORM_BWD_PROGRAMS_PER_SM = landed  # the sweep must not leave its last value behind


def adamw(n=31_977_984):
    dev = "cuda"
    p = torch.nn.Parameter(torch.randn(n, device=dev) * 0.02)
    ref = torch.nn.Parameter(p.detach().clone())
    holder = torch.nn.Module()
    holder.p = p
    weights = tt_optim.use_low_precision_params(holder)
    opt = tt_optim.MasterAdamW(weights, lr=1e-3, weight_decay=0.01)
    ref_opt = torch.optim.AdamW([ref], lr=1e-3, weight_decay=0.01, fused=True)
    for _ in range(3):
        g = torch.randn(n, device=dev).to(torch.bfloat16)
        p.grad, ref.grad = g, g.float()
        opt.step()
        ref_opt.step()
    err = float((weights.master - ref.detach()).abs().max())
    print(f"adamw check: max |master - torch fused AdamW| = {err:.2e} after 3 steps")
    assert err < 1e-6
    ms = triton.testing.do_bench(opt.step, warmup=25, rep=200, return_mode="median")
    print(f"tt_adamw (bf16 grads read in place, fp32 master) {n} params: {ms * 1e3:7.1f} us, "
          f"{n * 28 / ms / 1e6:7.0f} GB/s (28 B/param)")
    ms = triton.testing.do_bench(ref_opt.step, warmup=25, rep=200, return_mode="median")
    print(f"torch fused AdamW fp32 params/grads (one tensor) {n} params: {ms * 1e3:7.1f} us, "
          f"{n * 28 / ms / 1e6:7.0f} GB/s (28 B/param)")


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    rmsnorm_backward()
    rmsnorm_backward(1024, 512)
    adamw()
