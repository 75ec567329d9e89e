"""Triton kernels: values against independent eager fp64 computations, and gradients with torch.autograd.gradcheck
(fp64, Triton interpreter on a CPU). Shapes are small but span several blocks and a partial last block."""
from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import tt_kernels
import tt_model
import tt_versions

DEV = "cuda" if torch.cuda.is_available() else "cpu"
f64: dict[str, Any] = dict(dtype=torch.float64, device=DEV)


def gradcheck(fn, inputs):
    """Full (slow-mode) gradcheck: every Jacobian entry. Fast mode was seen to miss a 1% error in one gradient."""
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, fast_mode=False)


def check_vjp(fn, ref_fn, inputs, seed=0):
    """Triton backward vs autograd through an independent fp64 reference, for one random output cotangent."""
    torch.manual_seed(seed)
    out = fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    cots = [torch.randn_like(o) for o in outs]
    got = torch.autograd.grad(outs, inputs, cots)
    ref = ref_fn(*inputs)
    refs = ref if isinstance(ref, tuple) else (ref,)
    want = torch.autograd.grad(refs, inputs, cots)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-10)


@pytest.fixture
def small_attention_blocks(monkeypatch):
    monkeypatch.setattr(tt_kernels, "INTERPRET_ATTN_BLOCK", 16)


def rope_tables(S, D):
    half = D // 2
    inv = 10000.0 ** (-torch.arange(half, dtype=torch.float64) * 2 / D)
    ang = torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().to(DEV), ang.sin().to(DEV)


def reference_attention(q, k, v):
    """Plain softmax attention in fp64, written independently of the model code (loops over heads)."""
    B, S, H, D = q.shape
    group = H // k.shape[2]
    out = torch.empty_like(q)
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    for h in range(H):
        scores = q[:, :, h] @ k[:, :, h // group].transpose(1, 2) / math.sqrt(D)
        scores = scores.masked_fill(~mask, float("-inf"))
        out[:, :, h] = scores.softmax(-1) @ v[:, :, h // group]
    return out


def test_rmsnorm_values_and_gradcheck():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 24, **f64, requires_grad=True)
    w = (1 + 0.1 * torch.randn(24, **f64)).requires_grad_()
    expected = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(tt_kernels.rmsnorm(x, w), expected)
    check_vjp(tt_kernels.rmsnorm, lambda a, b: a / torch.sqrt((a * a).mean(-1, keepdim=True) + 1e-6) * b, (x, w))
    gradcheck(lambda a, b: tt_kernels.rmsnorm(a, b), (x[:1, :2], w))


@pytest.mark.parametrize("slots", [1, 8])
def test_fused_add_rmsnorm_returns_sum_and_norm_and_gradcheck(slots, monkeypatch):
    """slots: the backward's dw accumulator rows (1: both programs add into one row; 8: each its own row)."""
    monkeypatch.setattr(tt_kernels, "NORM_BWD_SLOTS", slots)
    torch.manual_seed(1)
    x = torch.randn(70, 24, **f64, requires_grad=True)  # 70 rows: more than one 64-row tile
    r = torch.randn(70, 24, **f64, requires_grad=True)
    w = (1 + 0.1 * torch.randn(24, **f64)).requires_grad_()
    y, h = tt_kernels.add_rmsnorm(x, r, w)
    torch.testing.assert_close(h, x + r)
    torch.testing.assert_close(y, (x + r) / torch.sqrt(((x + r) ** 2).mean(-1, keepdim=True) + 1e-6) * w)
    # both outputs feed the loss, as in the model (h continues the residual stream)
    def ref(a, b, c):
        s_ = a + b
        return s_ / torch.sqrt((s_ * s_).mean(-1, keepdim=True) + 1e-6) * c, s_
    check_vjp(lambda a, b, c: tuple(tt_kernels.add_rmsnorm(a, b, c)), ref, (x, r, w))
    gradcheck(lambda a, b, c: tuple(tt_kernels.add_rmsnorm(a, b, c)), (x[:3], r[:3], w))


@pytest.mark.parametrize("slots", [1, 8])
def test_rmsnorm_backward_leaves_its_scratch_zeroed_for_the_next_call(slots, monkeypatch):
    """The backward's dw accumulator and done-counter live in one buffer per stream that no memset clears: the kernel's
    last program must zero it, or the next call's dw would include this one's."""
    monkeypatch.setattr(tt_kernels, "NORM_BWD_SLOTS", slots)
    monkeypatch.setattr(tt_kernels, "_NORM_BWD_SCRATCH", {})
    torch.manual_seed(5)
    x = torch.randn(70, 24, **f64, requires_grad=True)
    w = (1 + 0.1 * torch.randn(24, **f64)).requires_grad_()
    dy = torch.randn(70, 24, **f64)
    expected = torch.autograd.grad(x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w, (x, w), dy)
    for _ in range(3):  # the same scratch each time
        got = torch.autograd.grad(tt_kernels.rmsnorm(x, w), (x, w), dy)
        torch.testing.assert_close(got, expected)
        (scratch,) = tt_kernels._NORM_BWD_SCRATCH.values()
        assert scratch.shape == (slots * 24 + 2,) and not scratch.any()


@pytest.mark.parametrize("min_tiles", [1, 3])
def test_rmsnorm_backward_with_several_tiles_per_program(min_tiles, monkeypatch):
    monkeypatch.setattr(tt_kernels, "NORM_BWD_MIN_TILES", min_tiles)
    torch.manual_seed(6)
    x = torch.randn(200, 24, **f64, requires_grad=True)  # 4 tiles of 64 rows under the interpreter
    w = (1 + 0.1 * torch.randn(24, **f64)).requires_grad_()
    dy = torch.randn(200, 24, **f64)
    expected = torch.autograd.grad(x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w, (x, w), dy)
    torch.testing.assert_close(torch.autograd.grad(tt_kernels.rmsnorm(x, w), (x, w), dy), expected)


def test_side_stream_linear_gradients_and_fallbacks(monkeypatch):
    """SideStreamLinear's backward (dX here, dW through weight_grad) matches autograd's; on a CPU, or with the side
    stream switched off, linear() is plain F.linear and weight_grad() computes on the current stream."""
    monkeypatch.setattr(tt_kernels, "WGRAD_SIDE_STREAM", True)
    torch.manual_seed(7)
    x = torch.randn(2, 5, 6, **f64, requires_grad=True)
    w = torch.randn(4, 6, **f64, requires_grad=True)
    gradcheck(tt_kernels.SideStreamLinear.apply, (x, w))
    check_vjp(tt_kernels.SideStreamLinear.apply, torch.nn.functional.linear, (x, w))
    assert not tt_kernels._side_wgrad_ok(torch.randn(3, 4), torch.randn(3, 6))  # CPU tensors: never the side stream
    monkeypatch.setattr(tt_kernels, "WGRAD_SIDE_STREAM", False)
    y = tt_kernels.linear(x, w)
    assert y.grad_fn is not None and "SideStreamLinear" not in type(y.grad_fn).__name__


def test_weight_gradient_written_into_a_given_buffer_and_kept_by_autograd():
    """A weight with a gradient buffer (GRAD_BUFFER_ATTR, set by the sharded optimizer): linear() takes
    SideStreamLinear also on a CPU, the product lands in the buffer, and autograd keeps that memory as .grad (no copy);
    a buffer of the wrong shape is ignored; a DDP-hooked weight is never given to the side stream."""
    torch.manual_seed(9)
    x = torch.randn(3, 5, 6, **f64, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(4, 6, **f64))
    flat = torch.full((40,), float("nan"), **f64)  # poisoned: every element the product owns must be written
    setattr(w, tt_kernels.GRAD_BUFFER_ATTR, flat[8:32].view(4, 6))
    y = tt_kernels.linear(x, w)
    assert "SideStreamLinear" in type(y.grad_fn).__name__
    dy = torch.randn_like(y)
    y.backward(dy)
    expected = dy.reshape(-1, 4).t() @ x.detach().reshape(-1, 6)
    assert w.grad is not None
    torch.testing.assert_close(w.grad, expected)
    assert w.grad.data_ptr() == flat[8:32].data_ptr()  # the buffer itself, not a copy
    torch.testing.assert_close(flat[8:32].view(4, 6), expected)
    assert flat[:8].isnan().all() and flat[32:].isnan().all()  # nothing outside its place
    w2 = torch.nn.Parameter(torch.randn(4, 6, **f64))
    setattr(w2, tt_kernels.GRAD_BUFFER_ATTR, torch.zeros(6, 4, **f64))  # wrong shape: ignored
    tt_kernels.linear(x, w2).backward(dy)
    assert w2.grad is not None and w2.grad.shape == (4, 6) and not getattr(w2, tt_kernels.GRAD_BUFFER_ATTR).any()
    setattr(w2, tt_kernels.GRAD_HOOKED_ATTR, True)
    assert tt_kernels.grad_target(w2) == (True, None)
    assert not tt_kernels._side_wgrad_ok(torch.randn(3, 4), torch.randn(3, 6), hooked=True)


def test_low_precision_residual_stream_embedding(monkeypatch):
    """RESIDUAL_FP32 False: the embedding hands the residual stream over in the weights' dtype (bf16), True: in fp32;
    the weight gradient is the same sum either way."""
    torch.manual_seed(8)
    w = torch.randn(11, 6, dtype=torch.bfloat16, requires_grad=True)
    ids = torch.randint(0, 11, (3, 4))
    grads = {}
    for fp32_out in (True, False):
        out = tt_model._IndexAddEmbedding.apply(ids, w, fp32_out)
        assert out.dtype == (torch.float32 if fp32_out else torch.bfloat16)
        (grads[fp32_out],) = torch.autograd.grad(out.float().sum(dim=(0, 1)) @ torch.arange(6.0), (w,))
    torch.testing.assert_close(grads[True], grads[False])
    ops = tt_versions.FastOps()
    for flag in (True, False):
        monkeypatch.setattr(tt_kernels, "RESIDUAL_FP32", flag)
        assert ops.embedding(ids, w).dtype == (torch.float32 if flag else torch.bfloat16)


@pytest.mark.parametrize("capability,hip,expected", [((9, 0), None, True), ((8, 0), None, False),
                                                      ((9, 0), "6.2", False)])
def test_programmatic_dependent_launch_only_where_supported(capability, hip, expected, monkeypatch):
    """PDL on: a kernel gets launch_pdl and its PDL wait flag on Hopper or later CUDA GPUs only (not on Ampere, not on
    ROCm); the interpreter never does."""
    launched = {}

    class FakeKernel:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launched.update(kwargs)

    monkeypatch.setattr(tt_kernels, "PDL", 1)
    monkeypatch.setattr(tt_kernels, "INTERPRET", False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(tt_kernels, "_CC_MAJOR", {})
    monkeypatch.setattr(torch.version, "hip", hip)
    tt_kernels._launch(FakeKernel(), (1,), BLOCK=4)
    assert launched == ({"BLOCK": 4, "PDL": 1, "launch_pdl": True} if expected else {"BLOCK": 4})
    monkeypatch.setattr(tt_kernels, "INTERPRET", True)
    assert tt_kernels._pdl_mode() == 0


def test_swiglu_values_and_gradcheck():
    torch.manual_seed(2)
    gu = torch.randn(2, 7, 2 * 20, **f64, requires_grad=True)
    g, u = gu[..., :20], gu[..., 20:]
    torch.testing.assert_close(tt_kernels.swiglu(gu), g * torch.sigmoid(g) * u)
    check_vjp(tt_kernels.swiglu, lambda t: t[..., :20] * torch.sigmoid(t[..., :20]) * t[..., 20:], (gu,))
    gradcheck(tt_kernels.swiglu, (gu[:1, :3],))


def test_swiglu_down_matches_unfused_and_gradcheck():
    torch.manual_seed(3)
    gu = torch.randn(2, 5, 2 * 12, **f64, requires_grad=True)
    w = torch.randn(8, 12, **f64, requires_grad=True)
    g, u = gu[..., :12], gu[..., 12:]
    torch.testing.assert_close(tt_kernels.swiglu_down(gu, w), (F.silu(g) * u) @ w.t())
    check_vjp(tt_kernels.swiglu_down, lambda t, m: (F.silu(t[..., :12]) * t[..., 12:]) @ m.t(), (gu, w))
    gradcheck(tt_kernels.swiglu_down, (gu[:1, :2], w))


def test_rope_rotates_pairs_and_gradcheck():
    torch.manual_seed(4)
    B, S, H, D = 2, 9, 3, 8
    cos, sin = rope_tables(S, D)
    x = torch.randn(B, S, H, D, **f64, requires_grad=True)
    y = tt_kernels.rope(x, cos, sin)
    # independent check: rotating the pair (x0, x1) by theta keeps its length and matches the complex product
    xc = torch.view_as_complex(x.detach().reshape(B, S, H, D // 2, 2).contiguous())
    rot = torch.polar(torch.ones_like(cos), torch.atan2(sin, cos))[None, :, None, :]
    torch.testing.assert_close(y.detach(), torch.view_as_real(xc * rot).reshape(B, S, H, D))
    check_vjp(lambda a: tt_kernels.rope(a, cos, sin), lambda a: tt_model.eager_rope(a, cos, sin), (x,))
    gradcheck(lambda a: tt_kernels.rope(a, cos, sin), (x[:1, :, :1],))


@pytest.mark.parametrize("S,H,HKV", [(40, 4, 2), (33, 2, 2)])
def test_flash_attention_values_and_grads(S, H, HKV):
    """S=40 / 33 with 32-wide blocks: two query and key blocks, a partial last block, causal block skipping."""
    torch.manual_seed(5)
    B, D = 1, 16
    q = torch.randn(B, S, H, D, **f64, requires_grad=True)
    k = torch.randn(B, S, HKV, D, **f64, requires_grad=True)
    v = torch.randn(B, S, HKV, D, **f64, requires_grad=True)
    torch.testing.assert_close(tt_kernels.flash_attention(q, k, v), reference_attention(q, k, v))
    check_vjp(tt_kernels.flash_attention, reference_attention, (q, k, v))


@pytest.mark.parametrize("fwd,dkdv,dq", [((32, 16), (16, 32), (16, 32)), ((16, 32), (32, 16), (32, 16)),
                                         ((32, 16), (16, 32), (32, 16))])
def test_flash_attention_with_unequal_tiles(fwd, dkdv, dq, monkeypatch):
    """Query and key tiles of different sizes: the forward's unmasked stage must stop at the last key block wholly
    before the query block, and the backward must agree (S=45: three or four blocks, the last one partial), also when
    the dK/dV and dQ kernels use different tiles."""
    monkeypatch.setattr(tt_kernels, "_attn_blocks",
                        lambda D, S=0: dict(fwd=fwd + (1, 1), dkdv=dkdv + (1, 1), dq=dq + (1, 1)))
    torch.manual_seed(11)
    q = torch.randn(1, 45, 2, 16, **f64, requires_grad=True)
    k = torch.randn(1, 45, 1, 16, **f64, requires_grad=True)
    v = torch.randn(1, 45, 1, 16, **f64, requires_grad=True)
    torch.testing.assert_close(tt_kernels.flash_attention(q, k, v), reference_attention(q, k, v))
    check_vjp(tt_kernels.flash_attention, reference_attention, (q, k, v))


@pytest.mark.slow
def test_flash_attention_gradcheck(small_attention_blocks):
    """16-wide tiles: S=17 spans two blocks (the second partial); 2 query heads share 1 kv head; D=4 is padded to the
    16-wide dot. Fast-mode gradcheck over all inputs, full gradcheck for k (fast mode alone missed a 1% error in dk;
    check_vjp above compares every gradient with an fp64 reference)."""
    torch.manual_seed(9)
    q = torch.randn(1, 17, 2, 4, **f64, requires_grad=True)
    k = torch.randn(1, 17, 1, 4, **f64, requires_grad=True)
    v = torch.randn(1, 17, 1, 4, **f64, requires_grad=True)
    assert torch.autograd.gradcheck(tt_kernels.flash_attention, (q, k, v), atol=1e-5, rtol=1e-4, fast_mode=True)
    gradcheck(lambda kk: tt_kernels.flash_attention(q.detach(), kk, v.detach()), (k,))


def test_flash_attention_takes_strided_views():
    """q/k/v as views of one packed projection (what the model passes) give the same result as contiguous copies."""
    torch.manual_seed(6)
    B, S, H, HKV, D = 2, 20, 4, 2, 16
    qkv = torch.randn(B, S, H + 2 * HKV, D, **f64)
    q, k, v = qkv[:, :, :H], qkv[:, :, H:H + HKV], qkv[:, :, H + HKV:]
    torch.testing.assert_close(tt_kernels.flash_attention(q, k, v),
                               tt_kernels.flash_attention(q.contiguous(), k.contiguous(), v.contiguous()))


def test_rope_attention_packed_matches_separate_ops_and_gradcheck():
    torch.manual_seed(7)
    B, S, H, HKV, D = 1, 36, 4, 2, 16
    cos, sin = rope_tables(S, D)
    qkv = torch.randn(B, S, H + 2 * HKV, D, **f64, requires_grad=True)
    q = tt_model.eager_rope(qkv[:, :, :H], cos, sin)
    k = tt_model.eager_rope(qkv[:, :, H:H + HKV], cos, sin)
    expected = reference_attention(q, k, qkv[:, :, H + HKV:])
    # the packed function rotates its input in place: give it a copy
    got = tt_kernels.rope_attention(qkv.detach().clone(), cos, sin, H)
    torch.testing.assert_close(got, expected.detach())

    def ref(t):
        return reference_attention(tt_model.eager_rope(t[:, :, :H], cos, sin),
                                   tt_model.eager_rope(t[:, :, H:H + HKV], cos, sin), t[:, :, H + HKV:])
    check_vjp(lambda t: tt_kernels.rope_attention(t * 1.0, cos, sin, H), ref, (qkv,))


def test_rope_attention_gradcheck(small_attention_blocks):
    torch.manual_seed(10)
    S, H, HKV, D = 17, 2, 1, 8
    cos, sin = rope_tables(S, D)
    qkv = torch.randn(1, S, H + 2 * HKV, D, **f64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: tt_kernels.rope_attention(t * 1.0, cos, sin, H), (qkv,),
                                    atol=1e-5, rtol=1e-4, fast_mode=True)


def test_cross_entropy_values_and_gradcheck():
    torch.manual_seed(8)
    logits = torch.randn(10, 37, **f64, requires_grad=True)
    targets = torch.randint(0, 37, (10,), device=DEV)
    expected = -(logits.log_softmax(-1).gather(1, targets[:, None])).mean()
    torch.testing.assert_close(tt_kernels.cross_entropy(logits, targets), expected)
    check_vjp(lambda a: tt_kernels.cross_entropy(a, targets),
              lambda a: -(a.log_softmax(-1).gather(1, targets[:, None])).mean(), (logits,))
    gradcheck(lambda a: tt_kernels.cross_entropy(a, targets), (logits[:3],))


def test_kernels_record_profiler_ranges_under_interpreter():
    if not tt_kernels.INTERPRET:
        pytest.skip("GPU run: kernels appear as device kernels instead")
    from torch.profiler import profile
    x = torch.randn(4, 16, dtype=torch.float32)
    with profile() as prof:
        tt_kernels.rmsnorm(x, torch.ones(16))
    assert "triton::tt_rmsnorm_fwd" in {e.name for e in prof.events()}


@pytest.mark.parametrize("block", [None, 64])
def test_master_adamw_matches_torch_adamw_and_writes_bf16_params(block, monkeypatch):
    """One Triton kernel for every parameter: fp32 master weights follow torch.optim.AdamW given the same (bf16)
    gradients, read in place as the first gradient's pointer plus each one's element distance (new gradient tensors,
    gradients overwritten in place, and views of one buffer laid out in reverse, so that distances are negative);
    the model's parameters are bf16 views of one buffer holding the rounded master weights. block=64 splits every
    parameter into several chunks, the last one partial (1200 = 18 * 64 + 48)."""
    import tt_optim
    if block is not None:
        monkeypatch.setattr(tt_kernels, "adamw_chunk_block", lambda: block)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(40, 30, bias=False), torch.nn.Linear(30, 7)).to(DEV)
    ref = [p.detach().clone().requires_grad_() for p in model.parameters()]
    weights = tt_optim.use_low_precision_params(model)
    params = list(model.parameters())
    assert all(p.dtype == torch.bfloat16 and p.data_ptr() >= weights.low.data_ptr() for p in params)
    opt = tt_optim.MasterAdamW(weights, lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.1)
    grads: list[torch.Tensor] = []
    for i in range(6):
        if i % 3 == 1:  # same tensors (same addresses) as the step before: the distances are not reloaded
            for g in grads:
                g.copy_(torch.randn(g.shape, device=DEV).to(torch.bfloat16))
        elif i % 3 == 2:  # one buffer, the first gradient last: the others lie before it
            sizes = [r.numel() for r in ref][::-1]
            flat = torch.randn(sum(sizes), device=DEV).to(torch.bfloat16)
            grads = [v.view(r.shape) for v, r in zip(flat.split(sizes)[::-1], ref, strict=True)]
            assert grads[0].data_ptr() > grads[-1].data_ptr()
        else:
            grads = [torch.randn(r.shape, device=DEV).to(torch.bfloat16) for r in ref]
        for p, r, g in zip(params, ref, grads, strict=True):
            p.grad, r.grad = g, g.float()
        grads_before = [g.clone() for g in grads]
        opt.step()
        ref_opt.step()
        assert all(torch.equal(g, g0) for g, g0 in zip(grads, grads_before, strict=True))
        want = torch.cat([r.detach().reshape(-1) for r in ref])
        torch.testing.assert_close(weights.master, want, rtol=1e-5, atol=1e-6)
    # the kernel wrote the master weights in bf16: within one bf16 step (the interpreter truncates, GPUs round)
    step = weights.master.abs() * 2.0 ** -7
    assert bool(((weights.low.float() - weights.master).abs() <= step).all())
    params[0].grad = grads[0].t().contiguous().t()  # same values, transposed layout
    with pytest.raises(RuntimeError, match="contiguous"):
        opt.step()
    for p in params:
        p.grad = None
    with pytest.raises(RuntimeError, match="no gradient"):
        opt.step()
