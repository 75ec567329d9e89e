"""The one TinyTransformer (tiny Llama) definition shared by all four versions.

Pre-norm decoder: RMSNorm, interleaved-pair RoPE (theta 10000), grouped-query causal attention (n_kv_heads =
n_heads // 2 by default), SwiGLU FFN (intermediate = 4 * hidden), no biases, tied embedding / lm_head, init N(0, 0.02).

The versions differ only in the Ops they plug in (how norm, RoPE, attention, SwiGLU, embedding run) and in whether the
projections are fused (one QKV and one gate/up Linear) or separate. Fused and separate layouts hold the same numbers:
reference_state()/load_reference_state()/reference_grads() convert to and from the separate (v1) layout, so every
version can start from v1's weights and be compared parameter by parameter.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import cast

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    vocab_size: int = 1000
    hidden_dim: int = 512
    num_layers: int = 8
    num_heads: int = 8
    num_kv_heads: int = 0          # 0 means num_heads // 2 (as in the public versions)
    ffn_mult: int = 4
    max_seq_len: int = 256
    eps: float = 1e-6
    rope_theta: float = 10000.0

    def __post_init__(self):
        if self.num_kv_heads <= 0:
            self.num_kv_heads = max(1, self.num_heads // 2)
        if self.hidden_dim % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(f"hidden_dim {self.hidden_dim} must divide by num_heads {self.num_heads}, and num_heads "
                             f"by num_kv_heads {self.num_kv_heads}")
        if (self.hidden_dim // self.num_heads) % 2:
            raise ValueError("head dimension must be even for RoPE")

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    @property
    def ffn_dim(self) -> int:
        return self.ffn_mult * self.hidden_dim

    def as_dict(self):
        return asdict(self)


# ------------------------------------------------------------------------------------------ eager reference ops
def eager_rmsnorm(x, w, eps):
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.to(xf.dtype)).to(x.dtype)


def eager_rope(x, cos, sin):
    """x: (B, S, h, D); rotate interleaved pairs (x[2i], x[2i+1]) by theta(s, i)."""
    xf = x.to(torch.promote_types(x.dtype, torch.float32)).unflatten(-1, (-1, 2))
    x0, x1 = xf[..., 0], xf[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2).to(x.dtype)


def explicit_attention(q, k, v):
    """v1: scores + additive causal mask + softmax + weighted sum, k/v expanded to all heads."""
    B, S, H, D = q.shape
    group = H // k.shape[2]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
    mask = torch.full((S, S), float("-inf"), device=q.device, dtype=scores.dtype).triu(1)
    probs = torch.softmax((scores + mask).float(), dim=-1).to(v.dtype)
    return (probs @ v).transpose(1, 2).reshape(B, S, H * D)


def sdpa_attention(q, k, v):
    """v2/v4: PyTorch's fused scaled_dot_product_attention (flash / memory-efficient backends on GPU)."""
    B, S, H, D = q.shape
    group = H // k.shape[2]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).reshape(B, S, H * D)


def eager_swiglu(gate_up):
    g, u = gate_up.chunk(2, dim=-1)
    return F.silu(g) * u


class _IndexAddEmbedding(torch.autograd.Function):
    """Embedding whose backward is one index_add_ (no sort, no host sync), so it can be captured in a CUDA graph.
    The output (the residual stream) is at least fp32 also for bf16 weights, unless fp32_out is False (then it has the
    weights' dtype); the gradient sums in fp32."""

    @staticmethod
    def forward(ctx, ids, weight, fp32_out=True):
        ctx.save_for_backward(ids)
        ctx.weight_shape, ctx.weight_dtype = weight.shape, weight.dtype
        out = weight.index_select(0, ids.reshape(-1)).view(ids.shape + (weight.shape[1],))
        return out.to(torch.promote_types(weight.dtype, torch.float32)) if fp32_out else out

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        acc = torch.promote_types(ctx.weight_dtype, torch.float32)
        dw = torch.zeros(ctx.weight_shape, dtype=acc, device=grad.device)
        dw.index_add_(0, ids.reshape(-1), grad.reshape(-1, grad.shape[-1]).to(acc))
        return None, dw.to(ctx.weight_dtype), None


class Ops:
    """How one version runs each building block. Defaults are the eager PyTorch (v1) choices."""

    fused_projections = False

    def norm(self, x, w, eps):
        return eager_rmsnorm(x, w, eps)

    def add_norm(self, h, branch, w, eps):
        h = h + branch
        return self.norm(h, w, eps), h

    def rope(self, x, cos, sin):
        return eager_rope(x, cos, sin)

    def attention(self, q, k, v):
        return explicit_attention(q, k, v)

    def swiglu(self, gate_up):
        return eager_swiglu(gate_up)

    def embedding(self, ids, weight):
        return F.embedding(ids, weight)

    def linear(self, layer: nn.Linear, x):
        """A fused projection (v2-v4); v1's separate projections call their Linear directly."""
        return layer(x)

    def packed_attention(self, qkv, cos, sin, n_heads):
        """qkv: (B, S, H + 2*Hkv, D) from the fused projection -> (B, S, H*D)."""
        hkv = (qkv.shape[2] - n_heads) // 2
        qk = self.rope(qkv[:, :, : n_heads + hkv], cos, sin)  # q and k rotated in one launch
        return self.attention(qk[:, :, :n_heads], qk[:, :, n_heads:], qkv[:, :, n_heads + hkv:])

    def swiglu_down(self, gate_up, w_down: nn.Linear):
        return w_down(self.swiglu(gate_up))

    def loss(self, logits, targets):
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ------------------------------------------------------------------------------------------------------- model
class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, fused: bool):
        super().__init__()
        self.cfg, self.fused = cfg, fused
        d, hd, h, hkv = cfg.hidden_dim, cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
        if fused:
            self.wqkv = nn.Linear(d, (h + 2 * hkv) * hd, bias=False)
        else:
            self.wq = nn.Linear(d, h * hd, bias=False)
            self.wk = nn.Linear(d, hkv * hd, bias=False)
            self.wv = nn.Linear(d, hkv * hd, bias=False)
        self.wo = nn.Linear(h * hd, d, bias=False)

    def forward(self, y, cos, sin, ops: Ops):
        B, S, _ = y.shape
        h, hkv, hd = self.cfg.num_heads, self.cfg.num_kv_heads, self.cfg.head_dim
        if self.fused:
            qkv = ops.linear(self.wqkv, y).view(B, S, h + 2 * hkv, hd)
            return ops.linear(self.wo, ops.packed_attention(qkv, cos, sin, h))
        q = ops.rope(self.wq(y).view(B, S, h, hd), cos, sin)
        k = ops.rope(self.wk(y).view(B, S, hkv, hd), cos, sin)
        v = self.wv(y).view(B, S, hkv, hd)
        return self.wo(ops.attention(q, k, v))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig, fused: bool):
        super().__init__()
        self.fused = fused
        d, f = cfg.hidden_dim, cfg.ffn_dim
        if fused:
            self.w_gate_up = nn.Linear(d, 2 * f, bias=False)
        else:
            self.w_gate = nn.Linear(d, f, bias=False)
            self.w_up = nn.Linear(d, f, bias=False)
        self.w_down = nn.Linear(f, d, bias=False)

    def forward(self, y, ops: Ops):
        if self.fused:
            return ops.swiglu_down(ops.linear(self.w_gate_up, y), self.w_down)
        return self.w_down(F.silu(self.w_gate(y)) * self.w_up(y))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, fused: bool):
        super().__init__()
        self.attn_norm = nn.Parameter(torch.ones(cfg.hidden_dim))
        self.attn = Attention(cfg, fused)
        self.ffn_norm = nn.Parameter(torch.ones(cfg.hidden_dim))
        self.ffn = FeedForward(cfg, fused)


class TinyLlama(nn.Module):
    rope_cos: torch.Tensor  # registered buffers (nn.Module resolves them at run time)
    rope_sin: torch.Tensor

    def __init__(self, cfg: ModelConfig, ops: Ops):
        super().__init__()
        self.cfg, self.ops = cfg, ops
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.hidden_dim)
        self.layers = nn.ModuleList(Block(cfg, ops.fused_projections) for _ in range(cfg.num_layers))
        self.norm = nn.Parameter(torch.ones(cfg.hidden_dim))
        half = cfg.head_dim // 2
        inv_freq = cfg.rope_theta ** (-torch.arange(half, dtype=torch.float64) * 2 / cfg.head_dim)
        angles = torch.arange(cfg.max_seq_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.register_buffer("rope_cos", angles.cos().float(), persistent=False)
        self.register_buffer("rope_sin", angles.sin().float(), persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, ids):
        S = ids.shape[1]
        ops, eps = self.ops, self.cfg.eps
        cos, sin = self.rope_cos[:S], self.rope_sin[:S]
        h = ops.embedding(ids, self.tok_emb.weight)
        # Each norm is fused with the residual add that precedes it: y = norm(h + branch), h = h + branch.
        layers = cast("list[Block]", self.layers)  # an nn.ModuleList of Blocks
        y = ops.norm(h, layers[0].attn_norm, eps)
        for i, layer in enumerate(layers):
            y, h = ops.add_norm(h, layer.attn(y, cos, sin, ops), layer.ffn_norm, eps)
            next_norm = layers[i + 1].attn_norm if i + 1 < len(layers) else self.norm
            y, h = ops.add_norm(h, layer.ffn(y, ops), next_norm, eps)
        return F.linear(y, self.tok_emb.weight)  # tied lm_head


# ------------------------------------------------------------------------------ layout conversion (fused <-> v1)
def _splits(cfg: ModelConfig):
    hd = cfg.head_dim
    return {
        "attn.wqkv.weight": (("attn.wq.weight", cfg.num_heads * hd), ("attn.wk.weight", cfg.num_kv_heads * hd),
                             ("attn.wv.weight", cfg.num_kv_heads * hd)),
        "ffn.w_gate_up.weight": (("ffn.w_gate.weight", cfg.ffn_dim), ("ffn.w_up.weight", cfg.ffn_dim)),
    }


def _to_reference(named, cfg):
    """{name: tensor} in any layout -> {v1 name: tensor}, splitting fused matrices along their output rows."""
    out = {}
    splits = _splits(cfg)
    for name, t in named:
        for fused_suffix, parts in splits.items():
            if name.endswith(fused_suffix):
                prefix = name[: -len(fused_suffix)]
                pieces = torch.split(t, [s for _, s in parts], dim=0) if t is not None else [None] * len(parts)
                for (part, _), piece in zip(parts, pieces, strict=True):
                    out[prefix + part] = piece
                break
        else:
            out[name] = t
    return out


def reference_state(model: TinyLlama):
    return _to_reference(((n, p.detach()) for n, p in model.named_parameters()), model.cfg)


def reference_grads(model: TinyLlama):
    return _to_reference(((n, p.grad) for n, p in model.named_parameters()), model.cfg)


@torch.no_grad()
def load_reference_state(model: TinyLlama, ref: dict):
    """Copy v1-layout tensors into any version's parameters (concatenating for fused projections)."""
    splits = _splits(model.cfg)
    for name, p in model.named_parameters():
        for fused_suffix, parts in splits.items():
            if name.endswith(fused_suffix):
                prefix = name[: -len(fused_suffix)]
                p.copy_(torch.cat([ref[prefix + part] for part, _ in parts], dim=0))
                break
        else:
            p.copy_(ref[name])


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def flops_per_step(cfg: ModelConfig, batch: int, seq: int) -> float:
    """Training FLOPs of one step, PaLM-style: 6 * N_matmul * tokens + 12 * layers * hidden * seq * tokens.
    N_matmul counts every weight used in a matrix product (layer projections + the tied lm_head), not the norms.
    The attention term counts the full (non-causal) score matrix, as the PaLM formula does."""
    d, hd = cfg.hidden_dim, cfg.head_dim
    per_layer = d * (cfg.num_heads + 2 * cfg.num_kv_heads) * hd + cfg.num_heads * hd * d + 3 * d * cfg.ffn_dim
    n_matmul = cfg.num_layers * per_layer + cfg.vocab_size * d
    tokens = batch * seq
    return 6.0 * n_matmul * tokens + 12.0 * cfg.num_layers * d * seq * tokens
