"""FLOPs and bytes moved by one PyTorch operator call, from the shapes the profiler recorded (`record_shapes=True`).

`cost(name, dims, types, strides, concrete)` takes the operator's name and its `Input Dims`, `Input type`,
`Input Strides` and `Concrete Inputs` args (already decoded from JSON) and returns a `Cost`, or None when the
operator has no model or its args do not fit the model (an unknown schema is never guessed at).

The models follow TraceLens's perf model (AMD-AGI/TraceLens, TraceLens/PerfModel/perf_model.py) where it has one,
so the two agree on the same trace; docs/reports.md ('Efficiency') lists where and why they differ:
- GEMM (mm, addmm, bmm, baddbmm, linear, matmul, _scaled_mm): 2*M*N*K (+M*N for the added matrix); bytes: A, B
  and the output once each, in A's element size (+N elements of bias, per batch);
- attention (the flash / efficient / cuDNN / composite SDPA ops, forward and backward): 4*B*Hq*Nq*Nkv*d forward
  (two matmuls), backward five matmuls (the recomputed scores plus four gradients) and the GQA head reduction;
  causal halves them (the convention of FlashAttention's papers and TraceLens); bytes: Q, K, V and O (forward),
  Q, K, V, dO read and dQ, dK, dV written (backward), in the inputs' element size;
- convolution forward and backward (input grad + weight grad + bias grad);
- layer norm, RMS norm, softmax / log-softmax, cross-entropy, and elementwise and reduction families, which are
  bytes-bound: each input read and each output written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

# PyTorch's dtype names in `Input type` -> (our dtype name, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {
    "double": ("fp64", 8), "float": ("fp32", 4), "c10::half": ("fp16", 2), "c10::bfloat16": ("bf16", 2),
    "c10::float8_e4m3fn": ("fp8", 1), "c10::float8_e4m3fnuz": ("fp8", 1), "c10::float8_e5m2": ("fp8", 1),
    "c10::float8_e5m2fnuz": ("fp8", 1), "long int": ("int64", 8), "int": ("int32", 4), "short int": ("int16", 2),
    "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1),
    "scalar": ("fp32", 4),  # a Python number argument: TraceLens counts it as one 4-byte element
}


MAX_COUNT = 10**30


@dataclass(frozen=True)
class Cost:
    family: str  # gemm, attention, conv, norm, softmax, cross_entropy, elementwise, reduce
    flops: int
    bytes: int
    dtype: str  # the compute dtype (fp32, bf16, fp16, fp8, ...)
    unit: str  # "matrix" (tensor / matrix cores) or "vector"


class _Misfit(Exception):
    """The args do not have the shape this operator's model expects."""


def _dtype(types: list, i: int) -> tuple[str, int]:
    name = types[i] if i < len(types) else None
    if not isinstance(name, str) or name.lower() not in DTYPES:
        raise _Misfit
    return DTYPES[name.lower()]


def _shape(dims: list, i: int) -> tuple[int, ...]:
    shape = dims[i] if i < len(dims) else None
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise _Misfit
    return tuple(shape)


def _present(dims: list, i: int) -> bool:
    """An optional tensor argument was given (Kineto writes [] for None and for a scalar)."""
    return i < len(dims) and isinstance(dims[i], list) and len(dims[i]) > 0


def _ints(text: Any, n: int) -> tuple[int, ...]:
    """A concrete list argument such as '[1, 1]' (one value stands for all n dimensions)."""
    if not isinstance(text, str) or not text.strip():
        raise _Misfit
    values = tuple(int(v) for v in text.strip().strip("[]()").split(",") if v.strip())
    if len(values) == 1:
        values *= n
    if len(values) != n:
        raise _Misfit
    return values


def _flag(concrete: list, i: int) -> bool:
    value = concrete[i] if i < len(concrete) else ""
    return isinstance(value, str) and value.strip().lower() == "true"


# ---- GEMM ------------------------------------------------------------------------------------------------------


def _gemm(flops: int, elems: int, dtype: tuple[str, int]) -> Cost:
    return Cost("gemm", flops, elems * dtype[1], dtype[0], "matrix")


def _mm(dims, types, strides, concrete) -> Cost:
    (m, k), (k2, n) = _shape(dims, 0), _shape(dims, 1)
    if k != k2:
        raise _Misfit
    return _gemm(2 * m * n * k, m * k + k * n + m * n, _dtype(types, 0))


def _addmm(dims, types, strides, concrete) -> Cost:
    (m, k), (k2, n) = _shape(dims, 1), _shape(dims, 2)
    if k != k2:
        raise _Misfit
    return _gemm(2 * m * n * k + m * n, m * k + k * n + m * n + n, _dtype(types, 1))


def _bmm(dims, types, strides, concrete) -> Cost:
    (b, m, k), (b2, k2, n) = _shape(dims, 0), _shape(dims, 1)
    if k != k2 or b != b2:
        raise _Misfit
    return _gemm(b * 2 * m * n * k, b * (m * k + k * n + m * n), _dtype(types, 0))


def _baddbmm(dims, types, strides, concrete) -> Cost:
    (b, m, k), (b2, k2, n) = _shape(dims, 1), _shape(dims, 2)
    if k != k2 or b != b2:
        raise _Misfit
    return _gemm(b * (2 * m * n * k + m * n), b * (m * k + k * n + m * n + n), _dtype(types, 1))


def _linear(dims, types, strides, concrete) -> Cost:
    x, (n, k) = _shape(dims, 0), _shape(dims, 1)
    if not x or x[-1] != k:
        raise _Misfit
    m = prod(x[:-1])
    bias = _present(dims, 2)
    return _gemm(2 * m * n * k + (m * n if bias else 0), m * k + k * n + m * n + (n if bias else 0),
                 _dtype(types, 0))


def _matmul(dims, types, strides, concrete) -> Cost:
    a, b = _shape(dims, 0), _shape(dims, 1)
    if not a or not b:
        raise _Misfit
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    (m, k), (k2, n) = a2[-2:], b2[-2:]
    if k != k2:
        raise _Misfit
    batch = _broadcast(a2[:-2], b2[:-2])
    nb = prod(batch)
    return _gemm(nb * 2 * m * n * k, prod(a) + prod(b) + nb * m * n, _dtype(types, 0))


def _scaled_mm(dims, types, strides, concrete) -> Cost:
    (m, k), (k2, n) = _shape(dims, 0), _shape(dims, 1)
    if k != k2:
        raise _Misfit
    dtype = _dtype(types, 0)
    out = 2 if dtype[1] == 1 else dtype[1]  # fp8 in, 16-bit out (TraceLens's assumption; the out dtype is an arg)
    bias = _present(dims, 4)
    return Cost("gemm", 2 * m * n * k + (m * n if bias else 0), (m * k + k * n) * dtype[1] + m * n * out,
                dtype[0], "matrix")


# ---- attention -------------------------------------------------------------------------------------------------


def _sdpa_dims(dims: list, first: int) -> tuple[int, int, int, int, int, int, int]:
    """B, Hq, Nq, Hkv, Nkv, d_qk, d_v from q, k, v laid out (B, H, N, d)."""
    (b, hq, nq, dq), (b2, hk, nk, dk), (b3, hv, nv, dv) = (_shape(dims, first + i) for i in range(3))
    if b != b2 or b != b3 or hk != hv or nk != nv or dq != dk or hk == 0 or hq % hk:
        raise _Misfit
    return b, hq, nq, hk, nk, dq, dv


def _causal_pairs(nq: int, nkv: int) -> tuple[int, int]:
    """(numerator, denominator) of the share of (query, key) pairs a causal mask keeps: one half where Nq == Nkv
    (TraceLens's and FlashAttention's convention), else the exact count of torch's top-left aligned mask."""
    if nq == nkv:
        return 1, 2
    kept = sum(min(i + 1, nkv) for i in range(nq)) if nq <= 65536 else nq * nkv // 2
    return kept, nq * nkv


def _attention(causal_at: int, first: int = 0):
    def model(dims, types, strides, concrete) -> Cost:
        b, hq, nq, hk, nk, dq, dv = _sdpa_dims(dims, first)
        flops = b * hq * 2 * nq * nk * (dq + dv)
        if _flag(concrete, causal_at):
            num, den = _causal_pairs(nq, nk)
            flops = flops * num // den
        dtype = _dtype(types, first)
        elems = b * nq * hq * dq + b * nk * hk * dq + b * nk * hk * dv + b * nq * hq * dv
        return Cost("attention", flops, elems * dtype[1], dtype[0], "matrix")
    return model


def _attention_bwd(causal_at: int, first: int = 1):
    def model(dims, types, strides, concrete) -> Cost:
        b, hq, nq, hk, nk, dq, dv = _sdpa_dims(dims, first)
        group = hq // hk - 1  # GQA: the K and V gradients are summed over the query heads sharing a KV head
        flops = b * hq * 2 * nq * nk * (dq + dv + dv + dq + dq)  # recomputed scores, dV, dP, dQ, dK
        flops += b * nk * dv * group + b * nk * dq * group
        if _flag(concrete, causal_at):
            num, den = _causal_pairs(nq, nk)
            flops = flops * num // den
        dtype = _dtype(types, first)
        q, k, v, o = b * nq * hq * dq, b * nk * hk * dq, b * nk * hk * dv, b * nq * hq * dv
        return Cost("attention", flops, (2 * (q + k + v) + o) * dtype[1], dtype[0], "matrix")
    return model


# ---- convolution -----------------------------------------------------------------------------------------------


def _conv_geometry(dims, concrete, first: int, at: int):
    x, w = _shape(dims, first), _shape(dims, first + 1)
    nd = len(x) - 2
    if nd < 1 or len(w) != len(x):
        raise _Misfit
    stride, padding, dilation = (_ints(concrete[at + i], nd) for i in range(3))
    transposed = _flag(concrete, at + 3)
    out_pad = _ints(concrete[at + 4], nd) if transposed else (0,) * nd
    if transposed:
        spatial = tuple((x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w[2 + i] - 1) + out_pad[i] + 1
                        for i in range(nd))
        out = (x[0], w[1] * int(concrete[at + 5]), *spatial)
    else:
        spatial = tuple((x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
                        for i in range(nd))
        out = (x[0], w[0], *spatial)
    if min(out) <= 0:
        raise _Misfit
    return x, w, out, transposed


def _conv_flops(x, w, out, transposed: bool) -> int:
    # each output element of a direct convolution is a dot product over w[1:] (input channels per group x kernel);
    # a transposed convolution scatters each input element over w[1:] instead
    return 2 * prod(w[1:]) * (prod(x) if transposed else prod(out))


def _conv(dims, types, strides, concrete) -> Cost:
    x, w, out, transposed = _conv_geometry(dims, concrete, 0, 3)
    bias = _present(dims, 2)
    dtype = _dtype(types, 0)
    flops = _conv_flops(x, w, out, transposed) + (prod(out) if bias else 0)
    elems = prod(x) + prod(w) + prod(out) + (out[1] if bias else 0)
    return Cost("conv", flops, elems * dtype[1], dtype[0], "matrix")


def _t(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[1], shape[0], *shape[2:])


def _conv_bwd(dims, types, strides, concrete) -> Cost:
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, ...)
    x, w, out, transposed = _conv_geometry(dims, concrete, 1, 4)
    bias = _present(dims, 3)
    dtype = _dtype(types, 1)
    input_grad = _conv_flops(out, w, x, not transposed)
    weight_grad = _conv_flops(_t(out), _t(x), _t(w), False) if transposed else _conv_flops(_t(x), _t(out), _t(w), False)
    flops = input_grad + weight_grad + (prod(out) if bias else 0)
    elems = (prod(out) + prod(w) + prod(x)) + (prod(out) + prod(x) + prod(w)) + (prod(out) + out[1] if bias else 0)
    return Cost("conv", flops, elems * dtype[1], dtype[0], "matrix")


# ---- normalization, softmax, cross-entropy ---------------------------------------------------------------------


def _normalized(concrete: list) -> int:
    text = concrete[1] if len(concrete) > 1 else ""
    if not isinstance(text, str) or not text.strip("[] "):
        raise _Misfit
    return prod(int(v) for v in text.strip("[] ").split(",") if v.strip())


def _layer_norm_fwd(dims, types, strides, concrete) -> Cost:
    # TraceLens's model (it counts training-mode statistics even in inference): 5 FLOPs per element and 6 per
    # channel; bytes: input read, output written, four per-channel tensors plus the weight and bias given
    n, channels = prod(_shape(dims, 0)), _normalized(concrete)
    if not channels or n % channels:
        raise _Misfit
    dtype = _dtype(types, 0)
    weights = 4 + (1 + (1 if _present(dims, 3) else 0) if _present(dims, 2) else 0)
    return Cost("norm", 5 * n + 6 * channels, 2 * n * dtype[1] + weights * channels * dtype[1], dtype[0], "vector")


def _layer_norm_bwd(dims, types, strides, concrete) -> Cost:
    # native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    # grad_out and input read, grad_input written, the per-row statistics read, weight read, dweight/dbias written
    n, dtype = prod(_shape(dims, 0)), _dtype(types, 0)
    channels = prod(_shape(dims, 5)) if _present(dims, 5) else 0
    rows = prod(_shape(dims, 3)) if _present(dims, 3) else 0
    return Cost("norm", 8 * n, 3 * n * dtype[1] + 2 * rows * 4 + 3 * channels * dtype[1], dtype[0], "vector")


def _rms_norm(dims, types, strides, concrete) -> Cost:
    n, channels = prod(_shape(dims, 0)), _normalized(concrete)
    if not channels or n % channels:
        raise _Misfit
    dtype = _dtype(types, 0)
    affine = _present(dims, 2)
    flops = n // channels * (2 * channels + 2) + n * (2 if affine else 1)
    return Cost("norm", flops, 2 * n * dtype[1] + (channels * dtype[1] if affine else 0), dtype[0], "vector")


def _rms_norm_bwd(dims, types, strides, concrete) -> Cost:
    # _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)
    n, dtype = prod(_shape(dims, 0)), _dtype(types, 0)
    channels = prod(_shape(dims, 4)) if _present(dims, 4) else 0
    rows = prod(_shape(dims, 3)) if _present(dims, 3) else 0
    return Cost("norm", 6 * n, 3 * n * dtype[1] + rows * 4 + 2 * channels * dtype[1], dtype[0], "vector")


def _softmax(dims, types, strides, concrete) -> Cost:
    n, dtype = prod(_shape(dims, 0)), _dtype(types, 0)
    return Cost("softmax", 3 * n, 2 * n * dtype[1], dtype[0], "vector")


def _softmax_bwd(dims, types, strides, concrete) -> Cost:
    # (grad_output, output, dim, input_dtype): both read, grad_input written
    n, dtype = prod(_shape(dims, 0)), _dtype(types, 0)
    return Cost("softmax", 3 * n, 3 * n * dtype[1], dtype[0], "vector")


def _cross_entropy(dims, types, strides, concrete) -> Cost:
    # cross_entropy_loss(logits (N, C, ...), target, weight, reduction, ...): the fused ideal, logits read once,
    # targets read, the loss written (one value per sample with reduction='none', else one)
    x, t = _shape(dims, 0), _shape(dims, 1)
    if len(x) < 1:
        raise _Misfit
    dtype, target = _dtype(types, 0), _dtype(types, 1)
    n = prod(x)
    samples = prod(t)
    reduction = concrete[3].strip() if len(concrete) > 3 and isinstance(concrete[3], str) else ""
    out = samples if reduction == "0" else 1
    return Cost("cross_entropy", 3 * n + 2 * samples, n * dtype[1] + samples * target[1] + out * dtype[1],
                dtype[0], "vector")


def _nll_loss_bwd(dims, types, strides, concrete) -> Cost:
    # nll_loss_backward(grad_output, self, target, ...): grad_input (self's shape) written, targets read
    x, dtype = _shape(dims, 1), _dtype(types, 1)
    t = prod(_shape(dims, 2))
    return Cost("cross_entropy", t, prod(x) * dtype[1] + t * _dtype(types, 2)[1], dtype[0], "vector")


# ---- elementwise and reductions --------------------------------------------------------------------------------


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and x != 1 and y != 1:
            raise _Misfit
        out.append(max(x, y) if x and y else 0)
    return tuple(out)


def _unary(dims, types, strides, concrete) -> Cost:
    """One input read, one output written (in its own dtype when the op has an output tensor argument)."""
    n, dtype = prod(_shape(dims, 0)), _dtype(types, 0)
    out = _dtype(types, 1) if _present(dims, 1) else dtype
    return Cost("elementwise", n, n * dtype[1] + n * out[1], dtype[0], "vector")


def _binary(dims, types, strides, concrete) -> Cost:
    a, b = _shape(dims, 0), _shape(dims, 1)
    ta, tb = _dtype(types, 0), _dtype(types, 1)
    out = _broadcast(a, b)
    if _present(dims, 2) and len(types) > 2 and isinstance(types[2], str) and types[2].lower() in DTYPES:
        to = DTYPES[types[2].lower()][1]
    else:
        to = max(ta[1], tb[1]) if a and b else ta[1]
    n = prod(out)
    return Cost("elementwise", n, prod(a) * ta[1] + prod(b) * tb[1] + n * to, ta[0], "vector")


def _write_only(dims, types, strides, concrete) -> Cost:
    n, dtype = prod(_shape(dims, 0)), _dtype(types, 0)
    return Cost("elementwise", 0, n * dtype[1], dtype[0], "vector")


def _reduce(dims, types, strides, concrete) -> Cost:
    """Input read once; the output (the input without the reduced dims) written once."""
    x, dtype = _shape(dims, 0), _dtype(types, 0)
    n = prod(x)
    out = 1
    text = concrete[1] if len(concrete) > 1 and isinstance(concrete[1], str) else ""
    if text.strip("[] "):
        try:
            axes = {int(v) % len(x) for v in text.strip("[] ").split(",") if v.strip()} if x else set()
        except ValueError:
            raise _Misfit from None
        out = prod(d for i, d in enumerate(x) if i not in axes)
    return Cost("reduce", n, n * dtype[1] + out * dtype[1], dtype[0], "vector")


def _cumulative(dims, types, strides, concrete) -> Cost:
    n, dtype = prod(_shape(dims, 0)), _dtype(types, 0)
    return Cost("reduce", n, 2 * n * dtype[1], dtype[0], "vector")


UNARY = ("copy_", "clone", "_to_copy", "neg", "abs", "exp", "exp2", "log", "log1p", "sqrt", "rsqrt", "reciprocal",
         "sigmoid", "tanh", "relu", "gelu", "silu", "mish", "erf", "sin", "cos", "pow", "clamp", "clamp_min",
         "clamp_max", "sign", "floor", "ceil", "round", "leaky_relu", "hardtanh", "elu", "softplus", "native_dropout",
         "relu_", "gelu_", "silu_", "sigmoid_", "tanh_", "clamp_", "clamp_min_", "clamp_max_", "exp_", "neg_",
         "sqrt_", "rsqrt_", "pow_", "contiguous", "triu", "tril", "nan_to_num")
BINARY = ("add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "maximum", "minimum", "rsub", "eq", "ne",
          "lt", "le", "gt", "ge", "remainder", "fmod", "atan2", "where", "masked_fill", "masked_fill_",
          "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "threshold_backward",
          "native_dropout_backward", "hardtanh_backward", "leaky_relu_backward", "lerp_", "addcmul_", "addcdiv_")
REDUCE = ("sum", "mean", "amax", "amin", "max", "min", "norm", "linalg_vector_norm", "var", "std", "logsumexp",
          "prod", "any", "all", "argmax", "argmin")

MODELS = {
    "aten::mm": _mm, "aten::addmm": _addmm, "aten::bmm": _bmm, "aten::baddbmm": _baddbmm, "aten::linear": _linear,
    "aten::matmul": _matmul, "aten::_scaled_mm": _scaled_mm,
    # (query, key, value, ...) with the is_causal flag's position in the schema
    "aten::scaled_dot_product_attention": _attention(5),
    "aten::_scaled_dot_product_flash_attention": _attention(4),
    "aten::_scaled_dot_product_efficient_attention": _attention(6),
    "aten::_scaled_dot_product_cudnn_attention": _attention(6),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _attention(4),
    # backward: (grad_out, query, key, value, ...)
    "aten::_scaled_dot_product_flash_attention_backward": _attention_bwd(11),
    "aten::_scaled_dot_product_efficient_attention_backward": _attention_bwd(11),
    "aten::_scaled_dot_product_cudnn_attention_backward": _attention_bwd(14),
    "aten::convolution": _conv, "aten::_convolution": _conv, "aten::convolution_backward": _conv_bwd,
    "aten::layer_norm": _layer_norm_fwd, "aten::native_layer_norm": _layer_norm_fwd,
    "aten::native_layer_norm_backward": _layer_norm_bwd,
    "aten::rms_norm": _rms_norm, "aten::_fused_rms_norm": _rms_norm, "aten::_fused_rms_norm_backward": _rms_norm_bwd,
    "aten::softmax": _softmax, "aten::_softmax": _softmax, "aten::log_softmax": _softmax,
    "aten::_log_softmax": _softmax, "aten::_softmax_backward_data": _softmax_bwd,
    "aten::_log_softmax_backward_data": _softmax_bwd,
    "aten::cross_entropy_loss": _cross_entropy, "aten::nll_loss_backward": _nll_loss_bwd,
    "aten::fill_": _write_only, "aten::zero_": _write_only,
    "aten::cumsum": _cumulative, "aten::cumprod": _cumulative,
    **{f"aten::{op}": _unary for op in UNARY},
    **{f"aten::{op}": _binary for op in BINARY},
    **{f"aten::{op}": _reduce for op in REDUCE},
}
# composite operators that own the kernels of everything they call (their model is of the whole, fused)
COMPOSITES = frozenset({"aten::cross_entropy_loss"})


def has_model(name: str) -> bool:
    return name in MODELS


def cost(name: str, dims: Any, types: Any, strides: Any, concrete: Any) -> Cost | None:
    """The operator call's FLOPs and bytes; None when the op has no model or its args do not fit it."""
    model = MODELS.get(name)
    if model is None or not isinstance(dims, list) or not isinstance(types, list):
        return None
    try:
        found = model(dims, types, strides if isinstance(strides, list) else [],
                      concrete if isinstance(concrete, list) else [])
    except (_Misfit, ValueError, TypeError, IndexError, ZeroDivisionError, AttributeError):
        return None
    # the project's bound on any number it reports (docs/architecture.md): beyond it the shapes are not a real
    # tensor's, and the rates computed from them would overflow a float
    return found if found.flops <= MAX_COUNT and found.bytes <= MAX_COUNT else None
