"""Device probe for v4's kernels (H100/H200): every variant is checked against the current default, then timed as CUDA
graph replays (triton.testing.do_bench_cudagraph, median), so launch gaps and host work stay out of the numbers.

    python benchmarks/tinytransformer/probe_kernels.py

Sections, at the B8 S128 and B32 S512 shapes of the benchmark model (hidden 512, 8 heads / 4 kv heads, ffn 2048):
- flash attention tile sweep (B32 S512 only: B8 S128's attention is small): forward, dK/dV and dQ kernels, each
  (BLOCK_M, BLOCK_N, warps, stages);
- RMSNorm backward (fused residual, bf16 weight) sweep: rows per tile, warps, programs per SM, dw accumulator rows;
- SwiGLU backward with the activation recompute fused in, against the separate recompute + backward it replaced;
- AdamW over the v4 model's 74 bf16 gradients (address table), and the torch.cat gather it replaced.
The first line of each sweep is the default in tt_kernels. Prints one line per measurement and a summary last."""
from __future__ import annotations

import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "tinytransformer"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton.testing  # noqa: E402

import tt_kernels  # noqa: E402
import tt_model  # noqa: E402
import tt_train  # noqa: E402

DEV = "cuda"
SHAPES = {"B8_S128": (8, 128), "B32_S512": (32, 512)}
FWD_TILES = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3)]
BWD_TILES = [(64, 64, 4, 2), (64, 64, 8, 2), (128, 64, 8, 2), (64, 128, 8, 2)]
SUMMARY: list[str] = []


def time_us(fn) -> float:
    return triton.testing.do_bench_cudagraph(fn, rep=20, return_mode="median") * 1e3


def rel(a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def use_tiles(blocks: dict[str, tuple[int, int, int, int]]) -> None:
    """Attention tiles for the next launches (what tt_kernels._attn_blocks returns)."""
    def fixed(D: int) -> dict[str, tuple[int, int, int, int]]:
        return blocks
    tt_kernels._attn_blocks = fixed


def use_norm_rows(rows: int) -> None:
    def fixed(block: int) -> int:
        return rows
    tt_kernels._norm_rows = fixed


def best(name, rows):
    """rows: (label, us); the default is first."""
    default = rows[0][1]
    label, us = min(rows, key=lambda r: r[1])
    SUMMARY.append(f"{name}: default {default:.1f} us, best {label} {us:.1f} us ({100 * (us / default - 1):+.1f}%)")


def attention(name, B, S, H=8, HKV=4, D=64):
    torch.manual_seed(0)
    q = torch.randn(B, S, H, D, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(B, S, HKV, D, device=DEV, dtype=torch.bfloat16)
    v = torch.randn(B, S, HKV, D, device=DEV, dtype=torch.bfloat16)
    do = torch.randn(B, S, H, D, device=DEV, dtype=torch.bfloat16)
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(H // HKV, 1),
                                         v.transpose(1, 2).repeat_interleave(H // HKV, 1), is_causal=True)
    base = tt_kernels._attn_blocks(D)
    o0, lse0 = tt_kernels._flash_fwd(q, k, v)
    err = rel(o0, ref.transpose(1, 2))
    print(f"[{name}] attention default vs SDPA: rel err {err:.2e}")
    assert err < 2e-2
    grads0 = [torch.empty_like(t) for t in (q, k, v)]
    tt_kernels._flash_bwd(q, k, v, o0, lse0, do, *grads0)
    flops_fwd = 2 * 2 * B * H * S * S * D / 2  # causal: half the score matrix
    rows = []
    for tiles in FWD_TILES:
        use_tiles({**base, "fwd": tiles})
        o, _ = tt_kernels._flash_fwd(q, k, v)
        assert rel(o, o0) < 1e-2, tiles
        us = time_us(lambda: tt_kernels._flash_fwd(q, k, v))
        rows.append((str(tiles), us))
        print(f"[{name}] attn fwd {tiles}: {us:7.1f} us {flops_fwd / us / 1e6:6.0f} TFLOP/s")
    best(f"{name} attn fwd", rows)
    for kernel in ("dkdv", "dq"):
        rows = []
        for tiles in BWD_TILES:
            use_tiles({**base, kernel: tiles})
            grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
            tt_kernels._flash_bwd(q, k, v, o0, lse0, do, *grads)
            errs = [rel(g, g0) for g, g0 in zip(grads, grads0, strict=True)]
            assert max(errs) < 1e-2, (tiles, errs)
            us = time_us(lambda gr=grads: tt_kernels._flash_bwd(q, k, v, o0, lse0, do, *gr))
            rows.append((str(tiles), us))
            print(f"[{name}] attn bwd (delta + dkdv + dq), {kernel} tiles {tiles}: {us:7.1f} us")
        best(f"{name} attn bwd {kernel}", rows)
    use_tiles(base)


def rmsnorm_backward(name, n_rows, cols=512):
    """The Function's backward called directly (autograd's engine would tie the capture to the legacy stream)."""
    torch.manual_seed(1)
    x = torch.randn(n_rows, cols, device=DEV, requires_grad=True)
    r = torch.randn(n_rows, cols, device=DEV).to(torch.bfloat16).requires_grad_()
    w = (1 + 0.1 * torch.randn(cols, device=DEV)).to(torch.bfloat16).requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y, h = tt_kernels.add_rmsnorm(x, r, w)
    ctx = types.SimpleNamespace(saved_tensors=y.grad_fn.saved_tensors, has_res=True, dtypes=(x.dtype, r.dtype),
                                shape=x.shape)
    dy, dh = torch.randn_like(y), torch.randn_like(h)

    def grad():
        return tt_kernels.TritonRMSNorm.backward(ctx, dy, dh)[:2]

    ref = grad()
    knobs = ("NORM_BWD_WARPS", "NORM_BWD_PROGRAMS_PER_SM", "NORM_BWD_SLOTS")
    default_rows = tt_kernels._norm_rows
    defaults = (default_rows(cols),) + tuple(getattr(tt_kernels, k) for k in knobs)
    nbytes = n_rows * cols * (2 + 2 + 4 + 4 + 2)  # hs(bf16) dy(bf16) dh(fp32) -> dx(fp32) dr(bf16)
    rows = []
    configs = [defaults] + [(rt, wp, ps, sl) for sl in (1, 8) for rt in (4, 8) for wp in (4, 8) for ps in (4, 16)
                            if (rt, wp, ps, sl) != defaults]
    for rows_per_tile, *values in configs:
        use_norm_rows(rows_per_tile)
        for k, val in zip(knobs, values, strict=True):
            setattr(tt_kernels, k, val)
        got = grad()
        errs = [rel(g, g0) for g, g0 in zip(got, ref, strict=True)]
        assert max(errs) < 1e-2, errs
        us = time_us(grad)
        label = f"rows {rows_per_tile} warps {values[0]} programs/SM {values[1]} slots {values[2]}"
        rows.append((label, us))
        print(f"[{name}] rmsnorm bwd {n_rows}x{cols} {label}: {us:7.1f} us {nbytes / us / 1e3:6.0f} GB/s")
    tt_kernels._norm_rows = default_rows
    for k, val in zip(knobs, defaults[1:], strict=True):
        setattr(tt_kernels, k, val)
    best(f"{name} rmsnorm bwd", rows)


def swiglu(name, tokens, ffn=2048):
    torch.manual_seed(2)
    gu = torch.randn(tokens, 2 * ffn, device=DEV, dtype=torch.bfloat16)
    dact = torch.randn(tokens, ffn, device=DEV, dtype=torch.bfloat16)
    act = torch.empty_like(dact)
    dgu_new = tt_kernels._swiglu_bwd(gu, dact, act)
    assert torch.equal(act, tt_kernels._swiglu_fwd(gu)) and torch.equal(dgu_new, tt_kernels._swiglu_bwd(gu, dact))
    old = time_us(lambda: (tt_kernels._swiglu_fwd(gu), tt_kernels._swiglu_bwd(gu, dact)))
    new = time_us(lambda: tt_kernels._swiglu_bwd(gu, dact, act))
    print(f"[{name}] swiglu backward {tokens}x{ffn}: recompute + backward {old:.1f} us, fused {new:.1f} us")
    SUMMARY.append(f"{name} swiglu bwd+recompute: separate {old:.1f} us, fused {new:.1f} us")


def adamw():
    cfg = tt_model.ModelConfig()
    model = tt_train.build_model("v4", cfg, torch.device(DEV), 0, "triton", dtype="bf16")
    opt = tt_train.make_optimizer(model, "v4", 1e-3, torch.device(DEV), capturable=False)
    params = list(model.parameters())
    torch.manual_seed(3)
    for p in params:
        p.grad = torch.randn_like(p) * 1e-2
    master = opt.weights.master
    ref = master.detach().clone().requires_grad_()
    ref.grad = torch.cat([p.grad.reshape(-1) for p in params]).float()
    ref_opt = torch.optim.AdamW([ref], lr=1e-3, weight_decay=0.01, fused=True)
    opt.step()
    ref_opt.step()
    err = float((master - ref.detach()).abs().max())
    print(f"adamw check: max |master - torch fused AdamW| = {err:.2e} after 1 step ({len(params)} gradients)")
    assert err < 1e-6
    n = master.numel()
    us = time_us(opt.step)
    flat = torch.empty(n, dtype=torch.bfloat16, device=DEV)
    cat = time_us(lambda: torch.cat([p.grad.reshape(-1) for p in params], out=flat))
    print(f"tt_adamw, {len(params)} gradients in place, {n} params: {us:.1f} us, {n * 28 / us / 1e3:.0f} GB/s "
          f"(28 B/param); the torch.cat gather it replaced: {cat:.1f} us")
    SUMMARY.append(f"adamw: {us:.1f} us ({n * 28 / us / 1e3:.0f} GB/s); removed torch.cat gather {cat:.1f} us")


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    for shape_name, (batch, seq) in SHAPES.items():
        if shape_name == "B32_S512":
            attention(shape_name, batch, seq)
        rmsnorm_backward(shape_name, batch * seq)
        swiglu(shape_name, batch * seq)
    adamw()
    print("\nsummary (default first, best of the sweep):")
    print("\n".join(SUMMARY))
