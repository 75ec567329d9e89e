"""Triton kernels for the TinyTransformer workloads, each wrapped in a torch.autograd.Function with a Triton backward.

Kernels: RMSNorm (optionally fused with the residual add), SwiGLU, interleaved-pair RoPE, causal flash attention
(grouped-query, causal block skipping). Every kernel accumulates in fp32, or in fp64 when given fp64 tensors so that
torch.autograd.gradcheck can test it.

On a machine without a GPU the kernels run in Triton's interpreter: TRITON_INTERPRET=1 must be set before triton is
imported, which this module does when no CUDA/ROCm device is visible. The interpreter is slow: tiny shapes only.
"""
from __future__ import annotations

import math
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402  (must follow the TRITON_INTERPRET decision)
import triton.language as tl  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


# Programmatic dependent launch (CUDA, Hopper and later): 0 off; 1 each Triton kernel is launched as a dependent of
# the kernel before it in the stream and waits for it (griddepcontrol.wait) before touching memory, so its launch is
# prepared while the previous kernel runs; 2 also lets the NEXT kernel be scheduled once every program of this one
# has passed that wait (it then waits on its own). Safe in either mode: every kernel waits before its first load or
# store, and a wait covers the whole previous kernel. Settable for A/B (bench.py --kernel-settings). Measured on an
# H200 (benchmarks/tinytransformer/README.md, round 7): alone it cost v4 B8 S128 about 0.5%; with WGRAD_SIDE_STREAM it
# gained 3-4% (1.366 -> 1.320 ms per step); mode 2 was 0.5% behind mode 1.
PDL = 1


_CC_MAJOR: dict[int, int] = {}  # compute capability (major) per device index: asked once, not at every launch


def _pdl_mode() -> int:
    if INTERPRET or not PDL or torch.version.hip is not None:
        return 0
    idx = torch.cuda.current_device()
    if idx not in _CC_MAJOR:
        _CC_MAJOR[idx] = torch.cuda.get_device_capability(idx)[0]
    return PDL if _CC_MAJOR[idx] >= 9 else 0


def _launch(kernel, grid, *args, **kwargs):
    """Launch a kernel; under the interpreter also leave a profiler range named after it (there is no GPU kernel)."""
    if INTERPRET:
        with torch.profiler.record_function("triton::" + kernel.fn.__name__):
            kernel[grid](*args, **kwargs)
        return
    pdl = _pdl_mode()
    if pdl:
        kwargs.update(PDL=pdl, launch_pdl=True)
    kernel[grid](*args, **kwargs)


@triton.jit
def _grid_dependency(PDL: tl.constexpr):
    """A kernel's first statement: with PDL >= 1 wait until the previous kernel in the stream is complete and its
    writes are visible; with PDL == 2 then allow the next kernel to be scheduled."""
    if PDL >= 1:
        tl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    if PDL >= 2:
        tl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)


def _acc_type(t: torch.Tensor):
    return tl.float64 if t.dtype == torch.float64 else tl.float32


def _acc_torch(t: torch.Tensor):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


# ----------------------------------------------------------------------------------------------------- RMSNorm
@triton.jit
def tt_rmsnorm_fwd(x_ptr, r_ptr, h_ptr, hs_ptr, y_ptr, w_ptr, rstd_ptr, n_rows, n_cols, eps,
                   HAS_RES: tl.constexpr, SAVE_LOW: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr,
                   ACC: tl.constexpr, PDL: tl.constexpr = 0):
    _grid_dependency(PDL)
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(ACC)
    if HAS_RES:  # h = x + r is both an output (the new residual stream) and the norm's input
        x += tl.load(r_ptr + offs, mask=mask, other=0.0).to(ACC)
        tl.store(h_ptr + offs, x.to(h_ptr.dtype.element_ty), mask=mask)
        if SAVE_LOW:  # low-precision copy of h kept for the backward instead of the fp32 stream
            tl.store(hs_ptr + offs, x.to(hs_ptr.dtype.element_ty), mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(ACC)
    tl.store(y_ptr + offs, (x * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + rows, rstd, mask=rows < n_rows)


@triton.jit
def tt_rmsnorm_bwd(dy_ptr, dh_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dr_ptr, dw_acc_ptr, count_ptr, dw_ptr, n_rows,
                   n_cols, tiles_per_prog, n_prog, HAS_DH: tl.constexpr, HAS_DR: tl.constexpr, ROWS: tl.constexpr,
                   BLOCK: tl.constexpr, SLOTS: tl.constexpr, ACC: tl.constexpr, STAGES: tl.constexpr,
                   PDL: tl.constexpr = 0):
    """Each program walks `tiles_per_prog` tiles of ROWS rows and adds its partial dw atomically into one of SLOTS
    rows of dw_acc (zeroed, ACC dtype; program p uses row p % SLOTS, so that SLOTS times fewer atomics meet on each
    address); the last program to finish (counted in count_ptr) sums the rows, writes dw in the weight's dtype and
    zeroes dw_acc and the counter again for the next launch. One launch: no reduction, cast or memset kernel."""
    _grid_dependency(PDL)
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(ACC)
    dw = tl.zeros([BLOCK], dtype=ACC)
    for t in tl.range(tiles_per_prog, num_stages=STAGES):  # STAGES > 1: the next tile's loads overlap this one
        rows = (pid * tiles_per_prog + t).to(tl.int64) * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & cmask[None, :]
        offs = rows[:, None] * n_cols + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(ACC)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(ACC)
        rstd = tl.load(rstd_ptr + rows, mask=rows < n_rows, other=0.0)
        xhat = x * rstd[:, None]
        wdy = w[None, :] * dy
        c = tl.sum(xhat * wdy, axis=1) / n_cols
        dx = (wdy - xhat * c[:, None]) * rstd[:, None]
        if HAS_DH:  # gradient arriving through the residual-stream output h
            dx += tl.load(dh_ptr + offs, mask=mask, other=0.0).to(ACC)
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if HAS_DR:
            tl.store(dr_ptr + offs, dx.to(dr_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)
    tl.atomic_add(dw_acc_ptr + (pid % SLOTS) * n_cols + cols, dw, mask=cmask, sem="release")
    done = tl.atomic_add(count_ptr, 1, sem="acq_rel")
    if done == n_prog - 1:  # every other program's dw is in dw_acc (acquire pairs with their release)
        total = tl.zeros([BLOCK], dtype=ACC)
        for slot in tl.static_range(SLOTS):
            total += tl.atomic_add(dw_acc_ptr + slot * n_cols + cols, tl.zeros([BLOCK], dtype=ACC), mask=cmask,
                                   sem="acquire")
        tl.store(dw_ptr + cols, total.to(dw_ptr.dtype.element_ty), mask=cmask)
        # every other program is done with the scratch: leave it zeroed, the next launch's clean slate
        for slot in tl.static_range(SLOTS):
            tl.store(dw_acc_ptr + slot * n_cols + cols, tl.zeros([BLOCK], dtype=ACC), mask=cmask)
        tl.store(count_ptr, 0)


# RMSNorm backward launch settings, from a sweep on an H200 in CUDA graphs (benchmarks/tinytransformer, round 6): one
# 512-wide row per tile, 8 programs per SM, 4 warps, the loop over tiles pipelined 2 deep took 36.7 us at 16384 x 512
# (round 5's 4 rows per tile, 16 programs per SM, no pipelining: 49.6 us) and 7.9 us at 1024 x 512 (8.0 us).
NORM_BWD_PROGRAMS_PER_SM = 8
NORM_BWD_WARPS = 4
NORM_BWD_ROW_ELEMENTS = 512   # elements per tile (see _norm_rows): one row at hidden 512
NORM_BWD_STAGES = 2           # software-pipelining depth of each program's loop over its tiles
NORM_BWD_MIN_TILES = 2        # tiles per program at least (few rows: half the programs and atomics; B8 S128 -1%)
# dw accumulator rows: with one, all programs' atomics meet on the same 512 addresses (2,048 programs at B32 S512)
NORM_BWD_SLOTS = 8


def _norm_rows(block: int, row_elements: int = 2048) -> int:
    """Rows per tile: many under the interpreter (its cost is per program); on a GPU about row_elements elements'
    worth of rows (1 to 16)."""
    if INTERPRET:
        return 64
    return max(1, min(16, row_elements // block))


def _norm_out_dtype(x: torch.Tensor) -> torch.dtype:
    # Under autocast the norm feeds a matmul: hand it the autocast dtype directly (saves a cast kernel).
    if x.is_cuda and torch.is_autocast_enabled("cuda"):
        return torch.get_autocast_dtype("cuda")
    return x.dtype


class TritonRMSNorm(torch.autograd.Function):
    """y = rmsnorm(x [+ r]) * w. With r given, also returns h = x + r (the fused residual add)."""

    @staticmethod
    def forward(ctx, x, weight, residual, eps):
        ctx.set_materialize_grads(False)
        shape = x.shape
        n_cols = shape[-1]
        x2 = x.reshape(-1, n_cols).contiguous()
        n_rows = x2.shape[0]
        has_res = residual is not None
        r2 = residual.reshape(-1, n_cols).contiguous() if has_res else x2
        h2 = torch.empty_like(x2) if has_res else x2
        out_dtype = _norm_out_dtype(x)
        y2 = torch.empty(x2.shape, dtype=out_dtype, device=x.device)
        rstd = torch.empty(n_rows, dtype=_acc_torch(x), device=x.device)
        # Under autocast the fp32 residual stream is not kept for the backward: a bf16 copy is (half the memory).
        save_low = has_res and out_dtype.itemsize < x.dtype.itemsize
        hs = torch.empty(x2.shape, dtype=out_dtype, device=x.device) if save_low else h2
        block = triton.next_power_of_2(n_cols)
        rows = _norm_rows(block)
        _launch(tt_rmsnorm_fwd, (triton.cdiv(n_rows, rows),), x2, r2, h2, hs, y2, weight, rstd, n_rows, n_cols, eps,
                HAS_RES=has_res, SAVE_LOW=save_low, ROWS=rows, BLOCK=block, ACC=_acc_type(x), num_warps=4)
        ctx.save_for_backward(hs, weight, rstd)
        ctx.has_res = has_res
        ctx.dtypes = (x.dtype, residual.dtype if has_res else None)
        ctx.shape = shape
        if has_res:
            return y2.view(shape), h2.view(shape)
        return y2.view(shape)

    @staticmethod
    def backward(ctx, dy, dh=None):
        h2, weight, rstd = ctx.saved_tensors
        n_rows, n_cols = h2.shape
        x_dtype, r_dtype = ctx.dtypes
        acc = _acc_type(h2) if h2.dtype == torch.float64 else tl.float32
        if dy is None:
            dy2 = torch.zeros(h2.shape, dtype=x_dtype, device=h2.device)
        else:
            dy2 = dy.reshape(-1, n_cols).contiguous()
        has_dh = dh is not None
        dh2 = dh.reshape(-1, n_cols).contiguous() if has_dh else dy2
        dx = torch.empty((n_rows, n_cols), dtype=x_dtype, device=h2.device)  # dtype of the input, not of hs
        has_dr = ctx.has_res and r_dtype != x_dtype
        dr = torch.empty((n_rows, n_cols), dtype=r_dtype, device=h2.device) if has_dr else dx
        block = triton.next_power_of_2(n_cols)
        rows = _norm_rows(block, NORM_BWD_ROW_ELEMENTS)
        n_tiles = triton.cdiv(n_rows, rows)
        n_prog = min(triton.cdiv(n_tiles, NORM_BWD_MIN_TILES),
                     2 if INTERPRET else NORM_BWD_PROGRAMS_PER_SM * _sm_count(h2.device))
        tiles_per_prog = triton.cdiv(n_tiles, n_prog)
        n_prog = triton.cdiv(n_tiles, tiles_per_prog)
        acc_dtype = torch.float64 if acc == tl.float64 else torch.float32
        slots = NORM_BWD_SLOTS
        scratch = _norm_bwd_scratch(slots * n_cols + 2, acc_dtype, h2.device)
        dw = torch.empty(n_cols, dtype=weight.dtype, device=h2.device)
        _launch(tt_rmsnorm_bwd, (n_prog,), dy2, dh2, h2, weight, rstd, dx, dr, scratch,
                scratch[slots * n_cols:].view(torch.int32), dw, n_rows, n_cols, tiles_per_prog, n_prog, HAS_DH=has_dh,
                HAS_DR=has_dr, ROWS=rows, BLOCK=block, SLOTS=slots, ACC=acc, STAGES=1 if INTERPRET else NORM_BWD_STAGES,
                num_warps=NORM_BWD_WARPS)
        dx = dx.view(ctx.shape)
        if ctx.has_res:
            return dx, dw, (dr.view(ctx.shape) if has_dr else dx), None
        return dx, dw, None, None


# The RMSNorm backward's dw accumulator rows (ACC dtype) and programs-done counter share one zeroed buffer, kept per
# (device, stream, size, dtype) and left zeroed by the kernel itself: no memset kernel per call. Kernels of one
# stream run one after another, so one buffer per stream is never used by two launches at once. A CUDA graph uses its
# capture stream's buffer; when the capture is where that buffer is first made, its zero fill is captured as well
# (one fill per replay, not one per call).
_NORM_BWD_SCRATCH: dict[tuple, torch.Tensor] = {}


def _norm_bwd_scratch(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream, n, dtype)
    buf = _NORM_BWD_SCRATCH.get(key)
    if buf is None:
        buf = _NORM_BWD_SCRATCH[key] = torch.zeros(n, dtype=dtype, device=device)
    return buf


_SM_COUNT: dict[int, int] = {}


def _sm_count(device) -> int:
    if device.type != "cuda":
        return 8
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def rmsnorm(x, weight, eps=1e-6):
    return TritonRMSNorm.apply(x, weight, None, eps)


def add_rmsnorm(x, residual, weight, eps=1e-6):
    """Returns (rmsnorm(x + residual) * weight, x + residual)."""
    return TritonRMSNorm.apply(x, weight, residual, eps)


# ------------------------------------------------------------------------------------------------------ SwiGLU
@triton.jit
def tt_swiglu_fwd(gu_ptr, out_ptr, n_elem, F, BLOCK: tl.constexpr, ACC: tl.constexpr, PDL: tl.constexpr = 0):
    _grid_dependency(PDL)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elem
    row = offs // F
    col = offs % F
    g = tl.load(gu_ptr + row * 2 * F + col, mask=mask, other=0.0).to(ACC)
    u = tl.load(gu_ptr + row * 2 * F + F + col, mask=mask, other=0.0).to(ACC)
    s = 1.0 / (1.0 + tl.exp(-g))
    tl.store(out_ptr + offs, (g * s * u).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def tt_swiglu_bwd(gu_ptr, dout_ptr, dgu_ptr, act_ptr, n_elem, F, STORE_ACT: tl.constexpr, BLOCK: tl.constexpr,
                  ACC: tl.constexpr, PDL: tl.constexpr = 0):
    """d(gate_up) from d(out); with STORE_ACT also writes out = silu(gate) * up again (the recompute the fused
    down projection needs for its weight gradient, from the same loads)."""
    _grid_dependency(PDL)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elem
    row = offs // F
    col = offs % F
    g = tl.load(gu_ptr + row * 2 * F + col, mask=mask, other=0.0).to(ACC)
    u = tl.load(gu_ptr + row * 2 * F + F + col, mask=mask, other=0.0).to(ACC)
    do = tl.load(dout_ptr + offs, mask=mask, other=0.0).to(ACC)
    s = 1.0 / (1.0 + tl.exp(-g))
    dg = do * u * s * (1.0 + g * (1.0 - s))
    du = do * g * s
    tl.store(dgu_ptr + row * 2 * F + col, dg.to(dgu_ptr.dtype.element_ty), mask=mask)
    tl.store(dgu_ptr + row * 2 * F + F + col, du.to(dgu_ptr.dtype.element_ty), mask=mask)
    if STORE_ACT:
        tl.store(act_ptr + offs, (g * s * u).to(act_ptr.dtype.element_ty), mask=mask)


def _swiglu_fwd(gu):
    F = gu.shape[-1] // 2
    out = torch.empty(gu.shape[:-1] + (F,), dtype=gu.dtype, device=gu.device)
    n = out.numel()
    block = 16384 if INTERPRET else 1024
    _launch(tt_swiglu_fwd, (triton.cdiv(n, block),), gu, out, n, F, BLOCK=block, ACC=_acc_type(gu))
    return out


def _swiglu_bwd(gu, dout, act=None):
    """d(gate_up); writes silu(gate) * up into `act` too when given."""
    F = gu.shape[-1] // 2
    dgu = torch.empty_like(gu)
    n = dout.numel()
    block = 16384 if INTERPRET else 1024
    _launch(tt_swiglu_bwd, (triton.cdiv(n, block),), gu, dout.contiguous(), dgu, dgu if act is None else act, n, F,
            STORE_ACT=act is not None, BLOCK=block, ACC=_acc_type(gu))
    return dgu


class TritonSwiGLU(torch.autograd.Function):
    """silu(gate) * up, where gate_up = [gate | up] along the last dimension (one fused projection)."""

    @staticmethod
    def forward(ctx, gate_up):
        gu = gate_up.contiguous()
        ctx.save_for_backward(gu)
        return _swiglu_fwd(gu)

    @staticmethod
    def backward(ctx, dout):
        (gu,) = ctx.saved_tensors
        return _swiglu_bwd(gu, dout)


def swiglu(gate_up):
    return TritonSwiGLU.apply(gate_up)


# -------------------------------------------------------------------------------------------------------- RoPE
@triton.jit
def tt_rope(x_ptr, y_ptr, cos_ptr, sin_ptr, n_rows, S, n_heads, sxb, sxs, sxh, syb, sys, syh, sign,
            HALF: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, ACC: tl.constexpr, PDL: tl.constexpr = 0):
    """Rotate interleaved pairs (x[2i], x[2i+1]) by angle sign*theta(s, i). A row is one (batch, token, head);
    rows are loaded whole (contiguous) and split into pairs in registers. x_ptr may equal y_ptr (in place)."""
    _grid_dependency(PDL)
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    h = r % n_heads
    tok = r // n_heads
    s = tok % S
    b = tok // S
    d = tl.arange(0, BLOCK_D)
    i = tl.arange(0, BLOCK_D // 2)
    rmask = r < n_rows
    mask = rmask[:, None] & (d[None, :] < 2 * HALF)
    x = tl.load(x_ptr + (b * sxb + s * sxs + h * sxh)[:, None] + d[None, :], mask=mask, other=0.0).to(ACC)
    x0, x1 = tl.split(tl.reshape(x, [ROWS, BLOCK_D // 2, 2]))
    cs_mask = rmask[:, None] & (i[None, :] < HALF)
    c = tl.load(cos_ptr + s[:, None] * HALF + i[None, :], mask=cs_mask, other=0.0).to(ACC)
    sn = tl.load(sin_ptr + s[:, None] * HALF + i[None, :], mask=cs_mask, other=0.0).to(ACC) * sign
    y = tl.reshape(tl.join(x0 * c - x1 * sn, x0 * sn + x1 * c), [ROWS, BLOCK_D])
    tl.store(y_ptr + (b * syb + s * sys + h * syh)[:, None] + d[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _rope_launch(x, cos, sin, sign, out=None):
    """Rotate x (B, S, heads, D) into `out` (new contiguous tensor when None; may be x itself: in place)."""
    B, S, H, D = x.shape
    assert x.stride(3) == 1 and D % 2 == 0, "RoPE needs an even, contiguous head dimension"
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device) if out is None else out
    block_d = triton.next_power_of_2(D)
    rows = 64 if INTERPRET else max(1, 2048 // block_d)
    n_rows = B * S * H
    _launch(tt_rope, (triton.cdiv(n_rows, rows),), x, y, cos, sin, n_rows, S, H, x.stride(0), x.stride(1),
            x.stride(2), y.stride(0), y.stride(1), y.stride(2), sign, HALF=D // 2, ROWS=rows, BLOCK_D=block_d,
            ACC=_acc_type(x), num_warps=4)
    return y


class TritonRoPE(torch.autograd.Function):
    """x: (B, S, heads, D), any strides with a contiguous last dim; cos/sin: (S, D/2). The backward rotates back."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rope_launch(x, cos, sin, 1.0)

    @staticmethod
    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        return _rope_launch(dy, cos, sin, -1.0), None, None


def rope(x, cos, sin):
    return TritonRoPE.apply(x, cos, sin)


# ---------------------------------------------------------------------------------------------- flash attention
# The forward's causal loop runs in two stages: key blocks wholly before the query block's first row need no causal
# mask and no bounds check (that row is < S); only the blocks at the diagonal are masked. (The same split made the
# dK/dV kernel 13% slower on an H200, so the backward kernels keep one masked loop.)
@triton.jit
def _attn_fwd_stage(acc, l_i, m_i, q, k_base, v_base, sks, svs, offs_m, offs_d, dmask, lo, hi, S, qk_scale,
                    MASKED: tl.constexpr, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if MASKED:
            kt = tl.load(k_base + cols[None, :] * sks + offs_d[:, None], mask=dmask[:, None] & (cols[None, :] < S),
                         other=0.0)
        else:
            kt = tl.load(k_base + cols[None, :] * sks + offs_d[:, None], mask=dmask[:, None], other=0.0)
        qk = tl.dot(q, kt).to(ACC) * qk_scale  # log2-domain scores
        if MASKED:
            qk = tl.where((offs_m[:, None] >= cols[None, :]) & (cols[None, :] < S), qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_base + cols[:, None] * svs + offs_d[None, :], mask=(cols[:, None] < S) & dmask[None, :],
                        other=0.0)
        else:
            v = tl.load(v_base + cols[:, None] * svs + offs_d[None, :], mask=dmask[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(ACC)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def tt_attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                sqb, sqs, sqh, skb, sks, skh, svb, svs, svh, sob, sos, soh,
                S, H, GROUP, qk_scale,
                D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                ACC: tl.constexpr, PDL: tl.constexpr = 0):
    _grid_dependency(PDL)
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :],
                mask=(offs_m[:, None] < S) & dmask[None, :], other=0.0)
    k_base = k_ptr + b * skb + hk * skh
    v_base = v_ptr + b * svb + hk * svh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=ACC)
    l_i = tl.zeros([BLOCK_M], dtype=ACC)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=ACC)
    # Causal block skipping: key blocks past the last query row of this block are never visited.
    diag = (start_m * BLOCK_M // BLOCK_N) * BLOCK_N  # key blocks before it lie wholly before row start_m * BLOCK_M
    acc, l_i, m_i = _attn_fwd_stage(acc, l_i, m_i, q, k_base, v_base, sks, svs, offs_m, offs_d, dmask, 0, diag, S,
                                    qk_scale, False, BLOCK_N, ACC)
    acc, l_i, m_i = _attn_fwd_stage(acc, l_i, m_i, q, k_base, v_base, sks, svs, offs_m, offs_d, dmask, diag,
                                    tl.minimum((start_m + 1) * BLOCK_M, S), S, qk_scale, True, BLOCK_N, ACC)
    acc = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < S) & dmask[None, :])
    tl.store(lse_ptr + bh * S + offs_m, m_i + tl.log2(l_i), mask=offs_m < S)


@triton.jit
def tt_attn_bwd_dkdv(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                     sqb, sqs, sqh, skb, sks, skh, svb, svs, svh, sdob, sdos, sdoh, sdkb, sdks, sdkh,
                     S, H, HKV, GROUP, qk_scale, sm_scale,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     ACC: tl.constexpr, PDL: tl.constexpr = 0):
    """One key/value block of one kv head; loops over the query heads of its group and the query blocks at or
    below the diagonal, so dk/dv need no atomics and no reduction over the group."""
    _grid_dependency(PDL)
    start_n = tl.program_id(0)
    bhk = tl.program_id(1).to(tl.int64)
    b = bhk // HKV
    hk = bhk % HKV
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    nmask = (offs_n[:, None] < S) & dmask[None, :]
    k = tl.load(k_ptr + b * skb + hk * skh + offs_n[:, None] * sks + offs_d[None, :], mask=nmask, other=0.0)
    v = tl.load(v_ptr + b * svb + hk * svh + offs_n[:, None] * svs + offs_d[None, :], mask=nmask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=ACC)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=ACC)
    lo = (start_n * BLOCK_N // BLOCK_M) * BLOCK_M
    for g in range(GROUP):
        h = hk * GROUP + g
        for start_m in range(lo, S, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            mmask = offs_m < S
            qt = tl.load(q_ptr + b * sqb + h * sqh + offs_m[None, :] * sqs + offs_d[:, None],
                         mask=mmask[None, :] & dmask[:, None], other=0.0)
            dot_ = tl.load(do_ptr + b * sdob + h * sdoh + offs_m[None, :] * sdos + offs_d[:, None],
                           mask=mmask[None, :] & dmask[:, None], other=0.0)
            lse = tl.load(lse_ptr + (b * H + h) * S + offs_m, mask=mmask, other=0.0)
            delta = tl.load(delta_ptr + (b * H + h) * S + offs_m, mask=mmask, other=0.0)
            qkt = tl.dot(k, qt).to(ACC) * qk_scale
            keep = (offs_m[None, :] >= offs_n[:, None]) & mmask[None, :]
            pt = tl.where(keep, tl.exp2(qkt - lse[None, :]), 0.0)
            dv += tl.dot(pt.to(dot_.dtype), tl.trans(dot_)).to(ACC)
            dpt = tl.dot(v, dot_).to(ACC)
            dst = pt * (dpt - delta[None, :])
            dk += tl.dot(dst.to(qt.dtype), tl.trans(qt)).to(ACC)
    dk *= sm_scale
    out = b * sdkb + hk * sdkh + offs_n[:, None] * sdks + offs_d[None, :]
    tl.store(dk_ptr + out, dk.to(dk_ptr.dtype.element_ty), mask=nmask)
    tl.store(dv_ptr + out, dv.to(dv_ptr.dtype.element_ty), mask=nmask)


@triton.jit
def tt_attn_bwd_dq(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
                   sqb, sqs, sqh, skb, sks, skh, svb, svs, svh, sdob, sdos, sdoh, sdqb, sdqs, sdqh,
                   S, H, GROUP, qk_scale, sm_scale,
                   D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                   ACC: tl.constexpr, PDL: tl.constexpr = 0):
    _grid_dependency(PDL)
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    mmask = offs_m < S
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :],
                mask=mmask[:, None] & dmask[None, :], other=0.0)
    do = tl.load(do_ptr + b * sdob + h * sdoh + offs_m[:, None] * sdos + offs_d[None, :],
                 mask=mmask[:, None] & dmask[None, :], other=0.0)
    lse = tl.load(lse_ptr + bh * S + offs_m, mask=mmask, other=0.0)
    delta = tl.load(delta_ptr + bh * S + offs_m, mask=mmask, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=ACC)
    hi = tl.minimum((start_m + 1) * BLOCK_M, S)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        cmask = (cols[None, :] < S) & dmask[:, None]
        kt = tl.load(k_ptr + b * skb + hk * skh + cols[None, :] * sks + offs_d[:, None], mask=cmask, other=0.0)
        vt = tl.load(v_ptr + b * svb + hk * svh + cols[None, :] * svs + offs_d[:, None], mask=cmask, other=0.0)
        qk = tl.dot(q, kt).to(ACC) * qk_scale
        keep = (offs_m[:, None] >= cols[None, :]) & (cols[None, :] < S) & mmask[:, None]
        p = tl.where(keep, tl.exp2(qk - lse[:, None]), 0.0)
        dp = tl.dot(do, vt).to(ACC)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(kt.dtype), tl.trans(kt)).to(ACC)
    dq *= sm_scale
    tl.store(dq_ptr + b * sdqb + h * sdqh + offs_m[:, None] * sdqs + offs_d[None, :], dq.to(dq_ptr.dtype.element_ty),
             mask=mmask[:, None] & dmask[None, :])


_LOG2E = 1.4426950408889634
DKDV_DEEP_SEQ = 512  # sequence length from which the dK/dV kernel pipelines 3 stages deep
INTERPRET_ATTN_BLOCK = 32  # attention tile under the interpreter (tests lower it to cover several blocks cheaply)


def _attn_blocks(D, S=0):
    if INTERPRET:
        b = INTERPRET_ATTN_BLOCK
        return dict(fwd=(b, b, 1, 1), dkdv=(b, b, 1, 1), dq=(b, b, 1, 1))
    # (BLOCK_M, BLOCK_N, num_warps, num_stages); tuned for head_dim 64 on H100/H200-class GPUs. The forward's
    # 64 x 64 tiles: H200 sweep, round 6, bf16 with 8/4 heads: 42.7 us at B32 S512 and 3.8 us at B8 S128 per call,
    # against 51.7 / 6.2 us with 128 x 64 tiles, 3 stages (benchmarks/tinytransformer/README.md, round 6).
    # dK/dV: 3 stages from S 512 (same sweep: 129.9 against 132.8 us at B32 S512, but 12.8 against 12.5 us at B8 S128).
    if D <= 64:
        return dict(fwd=(64, 64, 4, 2), dkdv=(64, 64, 4, 3 if S >= DKDV_DEEP_SEQ else 2), dq=(64, 64, 4, 2))
    return dict(fwd=(64, 64, 4, 2), dkdv=(32, 64, 4, 2), dq=(32, 64, 4, 2))


@triton.jit
def tt_attn_bwd_delta(o_ptr, do_ptr, delta_ptr, n_rows, S, H, D: tl.constexpr, ROWS: tl.constexpr,
                      BLOCK_D: tl.constexpr, ACC: tl.constexpr, PDL: tl.constexpr = 0):
    """delta[b, h, s] = sum_d O * dO; o and do are contiguous (B, S, H, D)."""
    _grid_dependency(PDL)
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    d = tl.arange(0, BLOCK_D)
    mask = (r[:, None] < n_rows) & (d[None, :] < D)
    o = tl.load(o_ptr + r[:, None] * D + d[None, :], mask=mask, other=0.0).to(ACC)
    do = tl.load(do_ptr + r[:, None] * D + d[None, :], mask=mask, other=0.0).to(ACC)
    h = r % H
    bs = r // H
    tl.store(delta_ptr + ((bs // S) * H + h) * S + bs % S, tl.sum(o * do, axis=1), mask=r < n_rows)


def _flash_fwd(q, k, v):
    B, S, H, D = q.shape
    HKV = k.shape[2]
    assert H % HKV == 0 and q.stride(3) == 1 and k.stride(3) == 1 and v.stride(3) == 1
    o = torch.empty((B, S, H, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, S), dtype=_acc_torch(q), device=q.device)
    sm_scale = 1.0 / math.sqrt(D)
    bm, bn, warps, stages = _attn_blocks(D, S)["fwd"]
    _launch(tt_attn_fwd, (triton.cdiv(S, bm), B * H), q, k, v, o, lse,
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
            S, H, H // HKV, sm_scale * _LOG2E,
            D=D, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=max(16, triton.next_power_of_2(D)), ACC=_acc_type(q),
            num_warps=warps, num_stages=stages)
    return o, lse


def _flash_bwd(q, k, v, o, lse, do, dq, dk, dv):
    """Writes the gradients into dq (B,S,H,D), dk/dv (B,S,Hkv,D): any strides with a contiguous last dim."""
    B, S, H, D = q.shape
    HKV = k.shape[2]
    do = do.contiguous()
    block_d = max(16, triton.next_power_of_2(D))
    acc = _acc_type(q)
    delta = torch.empty((B, H, S), dtype=lse.dtype, device=q.device)
    rows = 64 if INTERPRET else 32
    _launch(tt_attn_bwd_delta, (triton.cdiv(B * S * H, rows),), o, do, delta, B * S * H, S, H, D=D, ROWS=rows,
            BLOCK_D=block_d, ACC=acc)
    sm_scale = 1.0 / math.sqrt(D)
    blocks = _attn_blocks(D, S)
    bm, bn, warps, stages = blocks["dkdv"]
    strides = (q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
               v.stride(0), v.stride(1), v.stride(2), do.stride(0), do.stride(1), do.stride(2))
    assert dk.stride() == dv.stride()
    _launch(tt_attn_bwd_dkdv, (triton.cdiv(S, bn), B * HKV), q, k, v, do, lse, delta, dk, dv, *strides,
            dk.stride(0), dk.stride(1), dk.stride(2), S, H, HKV, H // HKV, sm_scale * _LOG2E, sm_scale,
            D=D, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=block_d, ACC=acc, num_warps=warps, num_stages=stages)
    bm, bn, warps, stages = blocks["dq"]
    _launch(tt_attn_bwd_dq, (triton.cdiv(S, bm), B * H), q, k, v, do, lse, delta, dq, *strides,
            dq.stride(0), dq.stride(1), dq.stride(2), S, H, H // HKV, sm_scale * _LOG2E, sm_scale,
            D=D, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=block_d, ACC=acc, num_warps=warps, num_stages=stages)


class TritonFlashAttention(torch.autograd.Function):
    """Causal grouped-query attention. q: (B, S, H, D); k, v: (B, S, Hkv, D); any strides with a contiguous last dim.
    Returns o: (B, S, H, D) contiguous, so (B, S, H*D) is a free view for the output projection."""

    @staticmethod
    def forward(ctx, q, k, v):
        o, lse = _flash_fwd(q, k, v)
        ctx.save_for_backward(q, k, v, o, lse)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
        dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
        _flash_bwd(q, k, v, o, lse, do, dq, dk, dv)
        return dq, dk, dv


def flash_attention(q, k, v):
    return TritonFlashAttention.apply(q, k, v)


class TritonRopeAttention(torch.autograd.Function):
    """RoPE + causal GQA flash attention on the packed projection qkv: (B, S, H + 2*Hkv, D) -> o (B, S, H, D).

    Forward rotates q and k IN PLACE in qkv (no copy; qkv is a fresh matmul output nobody else saved) and reads q, k,
    v as strided views. Backward writes dq, dk, dv straight into one packed gradient and un-rotates its q/k part in
    place, so there are no slices to stitch back together."""

    @staticmethod
    def forward(ctx, qkv, cos, sin, n_heads):
        qkv = qkv if qkv.is_contiguous() else qkv.contiguous()
        H = n_heads
        HKV = (qkv.shape[2] - H) // 2
        qk = qkv[:, :, : H + HKV]
        _rope_launch(qk, cos, sin, 1.0, out=qk)
        o, lse = _flash_fwd(qkv[:, :, :H], qkv[:, :, H: H + HKV], qkv[:, :, H + HKV:])
        ctx.save_for_backward(qkv, o, lse, cos, sin)
        ctx.heads = (H, HKV)
        return o

    @staticmethod
    def backward(ctx, do):
        qkv, o, lse, cos, sin = ctx.saved_tensors
        H, HKV = ctx.heads
        dqkv = torch.empty_like(qkv)
        _flash_bwd(qkv[:, :, :H], qkv[:, :, H: H + HKV], qkv[:, :, H + HKV:], o, lse, do.view(o.shape),
                   dqkv[:, :, :H], dqkv[:, :, H: H + HKV], dqkv[:, :, H + HKV:])
        dqk = dqkv[:, :, : H + HKV]
        _rope_launch(dqk, cos, sin, -1.0, out=dqk)
        return dqkv, None, None, None


def rope_attention(qkv, cos, sin, n_heads):
    return TritonRopeAttention.apply(qkv, cos, sin, n_heads)


# v4's residual stream (the embedding output and every x + branch sum): fp32 (True), or the parameters' dtype (False:
# bf16 with bf16 parameters, as Megatron-LM keeps it by default; halves the residual traffic of every fused
# add + RMSNorm and its backward). Settable for A/B (bench.py --kernel-settings).
RESIDUAL_FP32 = False  # round 7, H200: B32 S512 9.09 -> 8.72 ms per step; the parity and trajectory gates pass


# ---------------------------------------------------------------------------- weight gradients on a side stream
# A projection's backward is two independent products: dX = dY @ W, which the rest of the backward waits for, and
# dW = dY^T @ X, which only the optimizer reads. With WGRAD_SIDE_STREAM, dW runs on a second stream, so that at small
# batches (where each kernel fills only part of the GPU) it overlaps the dX chain. The backward pass's end joins the
# side stream back (an autograd final callback, so every reader of .grad is ordered after it). X and dY are held
# until then, which keeps their memory from being reused early: hence only up to WGRAD_MAX_TOKENS rows. Off for a
# weight that DistributedDataParallel hooks (GRAD_HOOKED_ATTR: its hooks read dW as soon as autograd hands it over)
# and when grad mode is on in the backward (double backward). On an H200, v4 B8 S128: with PDL 1.320 against 1.366
# ms per step; without PDL it was 0.5% slower (benchmarks/tinytransformer/README.md, round 7).
WGRAD_SIDE_STREAM = True
WGRAD_MAX_TOKENS = 4096
# Attributes a data-parallel wrapper sets on a weight (nn.Parameter): GRAD_HOOKED_ATTR (True) when DDP reads its
# gradient from a hook (then never the side stream); GRAD_BUFFER_ATTR (a tensor of the weight's shape) where the
# sharded optimizer wants its gradient, so the product writes straight there (autograd then keeps that tensor as
# .grad and the optimizer's gather copy skips it).
GRAD_HOOKED_ATTR = "_tt_grad_hooked"
GRAD_BUFFER_ATTR = "_tt_grad_buffer"


class _SideStream:
    def __init__(self):
        self.streams: dict[torch.device, torch.cuda.Stream] = {}
        self.held: list[torch.Tensor] = []  # X and dY of the products in flight, until the join
        self.joined_streams: list[tuple[torch.cuda.Stream, torch.cuda.Stream]] = []

    def weight_grad(self, dy2: torch.Tensor, x2: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        main = torch.cuda.current_stream(dy2.device)
        side = self.streams.get(dy2.device)
        if side is None:
            side = self.streams[dy2.device] = torch.cuda.Stream(dy2.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            dw = _product(dy2, x2, out)
        # one callback per product (not per pass: a pass that failed half-way must not leave the next one unjoined)
        torch.autograd.Variable._execution_engine.queue_callback(self.join)
        if (main, side) not in self.joined_streams:
            self.joined_streams.append((main, side))
        self.held += (dy2, x2)
        return dw

    def join(self):
        for main, side in self.joined_streams:
            main.wait_stream(side)
        self.joined_streams.clear()
        self.held.clear()


_SIDE = _SideStream()


def _side_wgrad_ok(dy2: torch.Tensor, x2: torch.Tensor, hooked: bool = False) -> bool:
    return (WGRAD_SIDE_STREAM and dy2.is_cuda and not INTERPRET and dy2.shape[0] <= WGRAD_MAX_TOKENS
            and not torch.is_grad_enabled() and dy2.dtype == x2.dtype and not hooked)


def _product(dy2: torch.Tensor, x2: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    if out is None:
        return dy2.t() @ x2
    torch.mm(dy2.t(), x2, out=out)
    # a new view of `out`: autograd keeps a gradient as .grad without a copy only when nothing else refers to it
    # (ctx holds `out` itself)
    return out.view(out.shape)


def grad_target(weight: torch.Tensor) -> tuple[bool, torch.Tensor | None]:
    """(hooked by DDP, the buffer its gradient should land in or None): what weight_grad needs to know of a weight,
    read in the forward (a saved tensor unpacked in the backward is not the Parameter object)."""
    out = getattr(weight, GRAD_BUFFER_ATTR, None)
    usable = out is not None and out.shape == weight.shape and out.dtype == weight.dtype and out.is_contiguous()
    return bool(getattr(weight, GRAD_HOOKED_ATTR, False)), out if usable else None


def weight_grad(dy2: torch.Tensor, x2: torch.Tensor, hooked: bool = False,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """dY^T @ X for (tokens, out) dY and (tokens, in) X: on the side stream when enabled (and the weight is not
    hooked by DDP), else here; written into `out` when given (see GRAD_BUFFER_ATTR)."""
    if out is not None and (out.dtype != dy2.dtype or out.shape != (dy2.shape[1], x2.shape[1])):
        out = None
    if _side_wgrad_ok(dy2, x2, hooked):
        return _SIDE.weight_grad(dy2, x2, out)
    return _product(dy2, x2, out)


class SideStreamLinear(torch.autograd.Function):
    """x @ weight.T (no bias) whose backward computes the weight gradient with weight_grad()."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        ctx.hooked, ctx.grad_out = grad_target(weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])
        dx = (dy2 @ weight).view(x.shape) if ctx.needs_input_grad[0] else None
        return dx, weight_grad(dy2, x.reshape(-1, x.shape[-1]), ctx.hooked, ctx.grad_out)


def linear(x, weight):
    """A bias-free projection for v4: SideStreamLinear where its side stream can apply (same dtypes, CUDA) or where
    a sharded optimizer gave the weight a gradient buffer."""
    if (WGRAD_SIDE_STREAM and x.is_cuda or hasattr(weight, GRAD_BUFFER_ATTR)) and x.dtype == weight.dtype:
        return SideStreamLinear.apply(x, weight)
    return torch.nn.functional.linear(x, weight)


# ------------------------------------------------------------------------------------------ SwiGLU + down projection
class TritonSwiGLUDown(torch.autograd.Function):
    """out = swiglu(gate_up) @ w_down.T without keeping swiglu's output alive: the backward's SwiGLU kernel recomputes
    it from the loads it makes anyway, instead of saving a (tokens x ffn_dim) activation per layer."""

    @staticmethod
    def forward(ctx, gate_up, w_down):
        gu = gate_up.contiguous()
        w = w_down.to(gu.dtype)
        out = _swiglu_fwd(gu) @ w.t()
        ctx.save_for_backward(gu, w)
        ctx.w_dtype = w_down.dtype
        ctx.hooked, ctx.grad_out = grad_target(w_down)
        return out

    @staticmethod
    def backward(ctx, dout):
        gu, w = ctx.saved_tensors
        dout2 = dout.reshape(-1, dout.shape[-1])
        act = torch.empty(gu.shape[:-1] + (gu.shape[-1] // 2,), dtype=gu.dtype, device=gu.device)
        dgu = _swiglu_bwd(gu, (dout2 @ w).view(act.shape), act)  # act: recomputed here, not saved
        act2 = act.reshape(-1, act.shape[-1])
        dw = (weight_grad(dout2, act2, ctx.hooked, ctx.grad_out) if ctx.w_dtype == act.dtype
              else (dout2.t() @ act2).to(ctx.w_dtype))
        return dgu, dw


def swiglu_down(gate_up, w_down):
    return TritonSwiGLUDown.apply(gate_up, w_down)


# --------------------------------------------------------------------------------------------------- cross-entropy
@triton.jit
def tt_xent_fwd(logits_ptr, tgt_ptr, loss_ptr, lse_ptr, V, stride, BLOCK_V: tl.constexpr, ACC: tl.constexpr,
                PDL: tl.constexpr = 0):
    _grid_dependency(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_V)
    x = tl.load(logits_ptr + row * stride + cols, mask=cols < V, other=float("-inf")).to(ACC)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    t = tl.load(tgt_ptr + row)
    xt = tl.load(logits_ptr + row * stride + t).to(ACC)
    tl.store(loss_ptr + row, lse - xt)
    tl.store(lse_ptr + row, lse)


@triton.jit
def tt_xent_bwd(logits_ptr, tgt_ptr, lse_ptr, dloss_ptr, dlogits_ptr, V, stride, inv_n,
                BLOCK_V: tl.constexpr, ACC: tl.constexpr, PDL: tl.constexpr = 0):
    _grid_dependency(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_V)
    mask = cols < V
    x = tl.load(logits_ptr + row * stride + cols, mask=mask, other=0.0).to(ACC)
    lse = tl.load(lse_ptr + row)
    t = tl.load(tgt_ptr + row)
    g = tl.load(dloss_ptr).to(ACC) * inv_n
    d = (tl.exp(x - lse) - tl.where(cols == t, 1.0, 0.0)) * g
    tl.store(dlogits_ptr + row * V + cols, d.to(dlogits_ptr.dtype.element_ty), mask=mask)


class TritonCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of (N, V) logits in their own dtype (no fp32 copy); d(logits) = (softmax - onehot) / N."""

    @staticmethod
    def forward(ctx, logits, targets):
        N, V = logits.shape
        assert logits.stride(1) == 1
        acc = _acc_torch(logits)
        losses = torch.empty(N, dtype=acc, device=logits.device)
        lse = torch.empty(N, dtype=acc, device=logits.device)
        tgt = targets.contiguous()
        block = triton.next_power_of_2(V)
        _launch(tt_xent_fwd, (N,), logits, tgt, losses, lse, V, logits.stride(0), BLOCK_V=block,
                ACC=_acc_type(logits), num_warps=4)
        ctx.save_for_backward(logits, tgt, lse)
        return losses.mean()

    @staticmethod
    def backward(ctx, dloss):
        logits, tgt, lse = ctx.saved_tensors
        N, V = logits.shape
        dlogits = torch.empty((N, V), dtype=logits.dtype, device=logits.device)
        _launch(tt_xent_bwd, (N,), logits, tgt, lse, dloss.contiguous(), dlogits, V, logits.stride(0), 1.0 / N,
                BLOCK_V=triton.next_power_of_2(V), ACC=_acc_type(logits), num_warps=4)
        return dlogits, None


def cross_entropy(logits, targets):
    return TritonCrossEntropy.apply(logits, targets)


# ------------------------------------------------------------------------------------------------------- AdamW
@triton.jit
def tt_adamw(master_ptr, grad_ptr, grad_off_ptr, chunk_ptr, m_ptr, v_ptr, param_ptr, step_ptr, lr, beta1, beta2,
             log2_beta1, log2_beta2, eps, weight_decay, ALIGN: tl.constexpr, BLOCK: tl.constexpr,
             PDL: tl.constexpr = 0):
    """One AdamW step (torch.optim.AdamW's formulas) for every parameter: fp32 master weights and moments in flat
    buffers, the low-precision gradients read where autograd left them (no gather copy), the new low-precision
    parameters written into the flat buffer the model's parameters view. Program i updates chunk i; a chunk table row
    is (gradient index, first element within that gradient, its flat offset, element count <= BLOCK). grad_ptr is the
    first gradient and grad_off_ptr holds each gradient's distance from it in elements (a typed base pointer plus an
    offset, so that loads vectorise). ALIGN divides every offset, distance and count (in elements): masks and
    addresses are then constant / aligned over ALIGN elements. step_ptr holds the step number (already incremented)."""
    _grid_dependency(PDL)
    row = chunk_ptr + tl.program_id(0) * 4
    g_start = tl.multiple_of(tl.load(grad_off_ptr + tl.load(row)) + tl.load(row + 1), ALIGN)
    flat0 = tl.multiple_of(tl.load(row + 2), ALIGN)
    count = tl.multiple_of(tl.load(row + 3), ALIGN)
    offs = tl.arange(0, BLOCK)
    mask = offs < count
    flat = flat0 + offs
    t = tl.load(step_ptr)
    g = tl.load(grad_ptr + g_start + offs, mask=mask, other=0.0).to(tl.float32)
    p = tl.load(master_ptr + flat, mask=mask, other=0.0)
    m = tl.load(m_ptr + flat, mask=mask, other=0.0)
    v = tl.load(v_ptr + flat, mask=mask, other=0.0)
    p = p * (1.0 - lr * weight_decay)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    bias1 = 1.0 - tl.exp2(t * log2_beta1)
    bias2 = 1.0 - tl.exp2(t * log2_beta2)
    p = p - (lr / bias1) * m / (tl.sqrt(v) / tl.sqrt(bias2) + eps)
    tl.store(master_ptr + flat, p, mask=mask)
    tl.store(m_ptr + flat, m, mask=mask)
    tl.store(v_ptr + flat, v, mask=mask)
    tl.store(param_ptr + flat, p.to(param_ptr.dtype.element_ty), mask=mask)


ADAMW_BLOCK = 2048  # elements per program
ADAMW_WARPS = 8


def adamw_chunk_block() -> int:
    """Elements per AdamW program (large under the interpreter, whose cost is per program)."""
    return 65536 if INTERPRET else ADAMW_BLOCK


def adamw_step(master, grad_base, grad_offsets, chunks, align, m, v, param, step, lr, beta1, beta2, eps, weight_decay):
    """All parameters in one launch: flat fp32 master/m/v and low-precision parameter buffers; grad_base the first
    gradient, grad_offsets (int64, each gradient's distance from it in elements) and chunks (int64 (n_chunks, 4), see
    tt_adamw) on the device; step a 1-element fp32 device tensor (graph-capturable: nothing is read back)."""
    _launch(tt_adamw, (chunks.shape[0],), master, grad_base, grad_offsets, chunks, m, v, param, step, lr, beta1, beta2,
            math.log2(beta1), math.log2(beta2), eps, weight_decay, ALIGN=align, BLOCK=adamw_chunk_block(),
            num_warps=ADAMW_WARPS if not INTERPRET else 1)
