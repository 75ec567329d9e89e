"""Put a kernel name in one category: GEMM, attention, normalization, elementwise, communication, memory copy, other.

Rules are regular expressions tried in order, first match wins. They cover rocBLAS/hipBLASLt/Tensile
(`Cijk_...`), CUTLASS/cuBLAS, Triton (`triton_poi_...`, `_attn_fwd`), PyTorch ATen kernels and the
`aten::` op names the embedded tracer records on CPU. Order matters: communication and copies first
(an RCCL kernel may contain "reduce"), attention before GEMM (flash-attention kernels mention gemm).
"""
from __future__ import annotations

import re
from functools import lru_cache

CATEGORIES = ("GEMM", "attention", "normalization", "elementwise", "communication", "memory copy", "other")

RULES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        (
            "communication",
            r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|send_?recv|c10d::",
        ),
        (
            "memory copy",
            r"memcpy|memset|copybuffer|fillbuffer|copy_?kernel|__amd_rocclr_(copy|fill)|aten::(copy_|_to_copy|to|clone|contiguous|fill_|zero_|zeros|empty)\b|\bfill_kernel|cat_?kernel|aten::cat\b",
        ),
        ("attention", r"attn|attention|flash|fmha|sdpa|softmax|rotary|(^|[^a-z])rope"),
        ("normalization", r"(rms|layer|batch|group|instance|_|\b)norm(?!al)|welford"),
        (
            "GEMM",
            r"gemm|gemv|cijk_|\bmm\b|\b(add|b)?mmbackward|matmul|addmm|bmm|aten::(mm|linear|baddbmm)\b|cutlass|cublas|nvjet|hipblas|rocblas|tensile|xmma|wgmma|mfma|_mm_|splitk|dot_?kernel|triton_tem_fused_(mm|addmm|bmm)",
        ),
        (
            "elementwise",
            r"elementwise|vectorized|unrolled|pointwise|triton_poi|\b(add|mul|sub|div|silu|gelu|relu|sigmoid|tanh|exp|neg|pow|sqrt|rsqrt|where|mask|dropout|embedding)|aten::(add|mul|sub|div|silu|gelu|relu|sigmoid|tanh|exp|neg|pow|sqrt|rsqrt|where|masked_fill|dropout|embedding|triu|ones_like|t\b|view|reshape|transpose|permute|expand|slice|select|unsqueeze|split|chunk)",
        ),
    )
)


@lru_cache(maxsize=65536)
def categorize(kernel_name: str) -> str:
    for category, pattern in RULES:
        if pattern.search(kernel_name):
            return category
    return "other"
