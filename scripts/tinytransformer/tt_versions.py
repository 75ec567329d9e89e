"""The four implementations (v1..v4): which Ops each plugs into the one model, its training defaults, and the
operators / kernels it claims, which the kernel gate checks against a profiler trace."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import tt_model
from tt_model import Ops


class FusedTorchOps(Ops):
    """v2: PyTorch fusions only: fused projections, F.rms_norm, scaled_dot_product_attention."""

    fused_projections = True

    def norm(self, x, w, eps):
        if x.dtype != w.dtype:  # F.rms_norm wants one dtype
            return F.rms_norm(x.float(), (x.shape[-1],), w.float(), eps).to(x.dtype)
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    def attention(self, q, k, v):
        return tt_model.sdpa_attention(q, k, v)


class TritonOps(Ops):
    """v3: Triton RMSNorm, RoPE, SwiGLU and causal flash attention, each with a Triton backward."""

    fused_projections = True

    def __init__(self):
        import tt_kernels  # imported here: importing triton must follow the TRITON_INTERPRET decision
        self.k = tt_kernels

    def norm(self, x, w, eps):
        return self.k.rmsnorm(x, w, eps)

    def rope(self, x, cos, sin):
        return self.k.rope(x, cos, sin)

    def attention(self, q, k, v):
        B, S, H, D = q.shape
        return self.k.flash_attention(q, k, v).view(B, S, H * D)

    def swiglu(self, gate_up):
        return self.k.swiglu(gate_up)


class FastOps(TritonOps):
    """v4: residual add fused into the Triton RMSNorm, the residual stream in the parameters' dtype (bf16 with bf16
    parameters; tt_kernels.RESIDUAL_FP32); RoPE fused with our Triton flash attention on the packed QKV (or PyTorch
    SDPA with --attention sdpa); SwiGLU fused with the down projection (activation recomputed in the backward); Triton
    cross-entropy on bf16 logits; a graph-capturable embedding backward; at small batches the projections' weight
    gradients on a side stream (tt_kernels.WGRAD_SIDE_STREAM)."""

    def __init__(self, attention: str = "triton"):
        super().__init__()
        self.attention_impl = attention

    def add_norm(self, h, branch, w, eps):
        return self.k.add_rmsnorm(h, branch, w, eps)

    def attention(self, q, k, v):
        if self.attention_impl == "triton":
            return super().attention(q, k, v)
        return tt_model.sdpa_attention(q, k, v)

    def packed_attention(self, qkv, cos, sin, n_heads):
        if self.attention_impl != "triton":
            return super().packed_attention(qkv, cos, sin, n_heads)
        B, S = qkv.shape[:2]
        return self.k.rope_attention(qkv, cos, sin, n_heads).view(B, S, -1)

    def swiglu_down(self, gate_up, w_down):
        return self.k.swiglu_down(gate_up, w_down.weight)

    def loss(self, logits, targets):
        return self.k.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def embedding(self, ids, weight):
        return tt_model._IndexAddEmbedding.apply(ids, weight, self.k.RESIDUAL_FP32)

    def linear(self, layer, x):
        return self.k.linear(x, layer.weight)


TRITON_FWD_BWD = ("tt_rmsnorm_fwd", "tt_rmsnorm_bwd", "tt_rope", "tt_swiglu_fwd", "tt_swiglu_bwd")
TRITON_ATTN = ("tt_attn_fwd", "tt_attn_bwd_delta", "tt_attn_bwd_dkdv", "tt_attn_bwd_dq")


@dataclass
class VersionSpec:
    name: str
    description: str
    cuda_dtype: str                   # default --dtype on a GPU (on the CPU every version defaults to fp32)
    cuda_graphs: bool                 # capture the whole training step in one CUDA graph (GPU, single process)
    fused_adam: bool                  # torch.optim.AdamW(fused=True) on the GPU
    bf16_params: bool = False         # with --dtype bf16: bf16 parameters, fp32 master weights, Triton AdamW kernel
    tf32: bool = False                # fp32 matmuls on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32)
    triton_kernels: tuple = ()        # Triton kernels that must run
    required_ops: tuple = ()          # aten operators that must run
    forbidden_ops: tuple = ()         # aten operators that must not run (what the version replaced)
    gpu_kernel_substrings: tuple = field(default_factory=tuple)  # on a GPU, device kernels that must appear

    def make_ops(self, attention: str = "") -> Ops:
        if self.name == "v1":
            return Ops()
        if self.name == "v2":
            return FusedTorchOps()
        if self.name == "v3":
            return TritonOps()
        return FastOps(attention or "triton")


VERSIONS = {
    "v1": VersionSpec("v1", "eager PyTorch baseline: explicit masked attention, unfused projections",
                      cuda_dtype="fp32", cuda_graphs=False, fused_adam=False,
                      required_ops=("aten::softmax",),
                      forbidden_ops=("aten::scaled_dot_product_attention",)),
    "v2": VersionSpec("v2", "PyTorch fusions: one QKV and one gate/up projection, F.rms_norm, "
                            "scaled_dot_product_attention",
                      cuda_dtype="fp32", cuda_graphs=False, fused_adam=False, tf32=True,
                      required_ops=("aten::scaled_dot_product_attention", "aten::rms_norm"),
                      forbidden_ops=("aten::softmax",)),
    "v3": VersionSpec("v3", "Triton RMSNorm, RoPE, SwiGLU and causal flash attention, each with a Triton backward",
                      cuda_dtype="fp32", cuda_graphs=False, fused_adam=False, tf32=True,
                      triton_kernels=TRITON_FWD_BWD + TRITON_ATTN,
                      forbidden_ops=("aten::softmax", "aten::scaled_dot_product_attention", "aten::silu",
                                     "aten::rsqrt", "aten::rms_norm")),
    "v4": VersionSpec("v4", "bf16 parameters and residual stream, fp32 master weights (one-kernel AdamW); Triton "
                            "residual+RMSNorm, RoPE+flash attention, SwiGLU+down (recompute), cross-entropy; whole "
                            "training step in one CUDA graph",
                      cuda_dtype="bf16", cuda_graphs=True, fused_adam=True, bf16_params=True,
                      triton_kernels=TRITON_FWD_BWD + ("tt_xent_fwd", "tt_xent_bwd"),
                      forbidden_ops=("aten::softmax", "aten::silu", "aten::rsqrt", "aten::rms_norm",
                                     "aten::embedding_dense_backward", "aten::log_softmax", "aten::nll_loss")),
}


def expected_for(spec: VersionSpec, device: torch.device, dtype: str, attention: str):
    """(triton kernels, required ops, forbidden ops, GPU kernel substrings) for this run's settings."""
    triton_kernels = list(spec.triton_kernels)
    required = list(spec.required_ops)
    gpu = list(spec.gpu_kernel_substrings)
    forbidden = list(spec.forbidden_ops)
    if spec.name == "v4":
        if attention != "sdpa":
            triton_kernels += TRITON_ATTN
        else:
            required.append("aten::scaled_dot_product_attention")
            if device.type == "cuda" and dtype in ("bf16", "fp16"):
                gpu.append("flash")  # SDPA must pick its FlashAttention backend, not the math fallback
        if spec.bf16_params and dtype == "bf16":
            triton_kernels.append("tt_adamw")  # AdamW on the fp32 master weights
            forbidden.append("aten::_fused_adamw_")
        elif device.type == "cuda":
            required.append("aten::_fused_adamw_")
    return triton_kernels, required, forbidden, gpu
