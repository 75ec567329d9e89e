"""One kernel taxonomy across AMD and NVIDIA: each kernel name gets a category, a role and a library.

- category: GEMM, convolution, attention, normalization, elementwise, reduction, optimizer, communication, memory
  copy, allocation/view (CPU operators that allocate or re-view tensors), or `unknown` when no rule matches (never
  guessed into another category);
- role: what the kernel does, in words that are the same on both vendors (`GEMM large tile (>=128x128)`,
  `attention bwd`, `norm fwd`, `allreduce`, ...), so runs from different GPUs compare role by role;
- library: who wrote it (Tensile/hipBLASLt `Cijk_*`, rocBLAS, CK, MIOpen, RCCL/NCCL, Triton, cuBLAS `sm90_xmma*`,
  cuBLASLt `nvjet*`, CUTLASS, cuDNN, flash-attn, FBGEMM, PyTorch ATen, ...), or `unknown`.

Built-in rules are regular expressions tried in order on `match_key(name)`: the kernel's qualified name and template
arguments, never its parameter types (kernel_names.py). First match wins, so order matters: communication and copies
first (an RCCL kernel may contain "reduce"), libraries' own families before the generic words they contain (FBGEMM's
embedding backward fuses AdaGrad; cuDNN's fused conv+ReLU says relu), the optimizer before elementwise
(multi_tensor_apply kernels are pointwise), attention before GEMM (flash-attention kernels mention gemm). Users add
rules in a JSON file (`configure(path)`, see docs/reports.md); user rules are tried before the built-ins, on the whole
name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports.kernel_names import key as kernel_key
from madengine_rocprof.reports.rule_columns import OrderedPatterns, first_match
from madengine_rocprof.reports.user_regex import SYNTAX_HELP, UserPattern, compile_user

CATEGORIES = (
    "GEMM",
    "convolution",
    "attention",
    "normalization",
    "elementwise",
    "reduction",
    "optimizer",
    "communication",
    "memory copy",
    "allocation/view",
    "unknown",
)
UNKNOWN = "unknown"
RULES_ENV = "MADENGINE_ROCPROF_KERNEL_RULES"
RULES_FILE_NAME = "kernel_rules.json"  # under $MADENGINE_ROCPROF_HOME: the registered rules
RULE_KEYS = ("match", "category", "role", "library")


@dataclass(frozen=True)
class KernelClass:
    category: str
    role: str
    library: str
    rule: str  # which rule matched: `built-in <id>` or `<file> rules[i]`; "" when none did


def _re(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)


def _lower_re(pattern: str) -> re.Pattern:
    """A built-in pattern, matched against the lower-cased key: 3-4x faster than re.IGNORECASE on long C++ names.
    Lower-casing a pattern is only safe without upper-case escapes (`\\D`, `\\S`, `\\W`, `\\B`, ...)."""
    if re.search(r"\\[A-Z]", pattern):
        raise ValueError(f"built-in kernel pattern with an upper-case escape: {pattern!r}")
    return re.compile(pattern.lower())


# ---- what the rules see ---------------------------------------------------------------------------------------
_AUTOGRAD_NODE = re.compile(r"^(?:autograd::engine::evaluate_function: )?([A-Z][A-Za-z0-9]*?)Backward\d*$")
_EVALUATE = "autograd::engine::evaluate_function: "


def match_key(name: str) -> str:
    """The text the built-in rules match: the kernel's qualified name and template arguments (no return type, no
    parameter types; see kernel_names.py). A CPU autograd node (`MmBackward0`, also wrapped in
    `autograd::engine::evaluate_function: `) becomes the operator it differentiates: `aten::mm backward`."""
    node = _AUTOGRAD_NODE.match(name)
    if node:
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", node.group(1)).lower()
        return f"aten::{snake} backward"
    if name.startswith(_EVALUATE):
        name = name[len(_EVALUATE) :]
    return kernel_key(name)


# ---- libraries ---------------------------------------------------------------------------------------------
LIBRARIES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (name, _lower_re(p))
    for name, p in (
        # RCCL keeps NCCL's kernel names (ncclDevKernel_*): the name cannot tell them apart
        ("RCCL/NCCL", r"nccl|rccl"),
        # the libraries built on others (their kernels may name CK or CUTLASS types in template arguments)
        ("AITER", r"\baiter::|^_ZN5aiter"),
        ("FBGEMM", r"fbgemm|^split_embedding|^bounds_check_indices|^permute_pooled_embs|^recat_copy"),
        ("vLLM", r"\bvllm::|^paged_attention_|^kernel_unified_attention"),
        ("FlashInfer", r"flashinfer"),
        ("TensorRT-LLM", r"tensorrt_llm|^fmhaSm\d+|\bmoe::dev::"),
        ("Tensile/hipBLASLt", r"^(custom_)?cijk_|tensile"),
        ("hipBLASLt", r"hipblaslt"),
        ("rocBLAS", r"rocblas"),
        ("CK", r"\bck(_tile)?::|device_gemm_xdl|kernel_gemm_xdl|\bck_|^_ZN(2ck|7ck_tile)\d"),
        (
            "MIOpen",
            r"miopen|^batched_transpose_|^transpose_(NCHW|CNHW|NHWC)|^SubTensorOp|^Im\d?d2Col|^naive_conv|"
            r"^gridwise_convolution|^igemm_",
        ),
        ("HIP runtime", r"__amd_rocclr_"),
        ("flash-attn", r"flash_(fwd|bwd)|pytorch_flash|\bflash::"),
        ("AOTriton", r"^(attn_fwd|bwd_kernel_(fuse|dk_dv|dq)|bwd_preprocess(_varlen)?)$"),
        (
            "cuDNN",
            r"cudnn|xmma_(fprop|dgrad|wgrad)|implicit_convolve|^(bn_fw|bn_bw)_|wgrad_alg\d|dgrad_engine|^fft2d_|"
            r"^tensorTransformGeneric|"
            r"winograd",
        ),
        ("cuBLASLt", r"nvjet|cublaslt|^epilogue::impl::"),
        (
            "cuBLAS",
            r"cublas|^scal_kernel<|^splitKreduce_kernel<|^magma_\w*gemm|^[sdhc]gemm_|internal::gemvx::|^sm\d+_xmma|"
            r"^(ampere|volta|turing|maxwell|hopper)_[a-z0-9]*gemm",
        ),
        ("CUTLASS", r"cutlass"),
        ("CUB/rocPRIM", r"\bcub::|\brocprim::"),
        ("Triton", r"^triton_"),
        ("PyTorch ATen", r"\bat::native::|\bat::cuda::|^aten::"),
    )
)


# ---- GEMM shape class --------------------------------------------------------------------------------------
# The macro tile a GEMM library picked says what problem shape it was picked for: Tensile `MT128x64x16`,
# cuBLAS `tilesize128x128x8`, nvjet `_tst_128x64_`, CUTLASS/cuBLAS `_128x128_16x4` / `sgemm_128x64_`, ...
# Quantifiers between two literals are bounded ({0,80}): an unbounded `\w*?` rescans the rest of the name from
# every occurrence of the first literal, quadratic in a crafted name (`nvjet_` x 20,000 took 40 s).
_TILE = (
    _re(r"MT(\d+)x(\d+)"),
    _re(r"tilesize(\d+)x(\d+)"),
    _re(r"nvjet_\w{0,80}?_(\d{1,6})x(\d{1,6})_"),
    _re(r"(?:gemm|gemv)_(\d+)x(\d+)"),
    _re(r"_(\d+)x(\d+)_\d+x\d+"),
    # CUTLASS with epilogue and type words: `s16816gemm_relu_bf16_128x64_64x6`
    _re(r"gemm_[a-z0-9_]{0,80}?_(\d{1,6})x(\d{1,6})_"),
    _re(r"_t(\d+)x(\d+)x\d+"),  # TensorRT-LLM's generated batched GEMMs: `bmm_..._t128x16x256u2`
    _re(r"matmul\w{0,120}?_(\d{1,6})x(\d{1,6})x\d+x\d+"),  # Triton matmul_ogs: `_matmul_ogs_NNT_..._128x128x128x1`
)


def gemm_shape(name: str) -> str:
    for pattern in _TILE:
        found = pattern.search(name)
        if found:
            m, n = int(found.group(1)), int(found.group(2))
            if m == 0 or n == 0:
                continue
            if max(m, n) >= 4 * min(m, n):
                return "GEMM skinny tile (aspect >=4)"
            if min(m, n) >= 128:
                return "GEMM large tile (>=128x128)"
            if max(m, n) <= 64:
                return "GEMM small tile (<=64x64)"
            return "GEMM medium tile"
    return "GEMM tile not in name"


# ---- built-in rules: (id, category, role or role function, pattern) -----------------------------------------
# They match `match_key(name)`: the function's qualified name and template arguments, never its parameter types.
_BWD = _re(r"bwd|backward|bprop|(?<!wino)grad|cutlassB|dgrad|wgrad|(?<![a-z])bw(?![a-z])|wrw")


def _direction(prefix: str):
    return lambda name: f"{prefix} bwd" if _BWD.search(name) else f"{prefix} fwd"


def _collective(name: str) -> str:
    for role, pattern in (
        ("allreduce", r"all_?reduce"),
        ("allgather", r"all_?gather"),
        ("reduce-scatter", r"reduce_?scatter"),
        ("all-to-all", r"all_?to_?all|all2all"),
        ("broadcast", r"broadcast"),
        ("send/recv", r"send|recv"),
    ):
        if re.search(pattern, name, re.IGNORECASE):
            return role
    return "collective (other)"


# The ops a Triton kernel generated by TorchInductor fuses are in its name (`triton_red_fused_add_mean_pow_rsqrt_0`);
# the kind (poi = pointwise, red/per = reduction, tem = template: a GEMM) says what the kernel is. A fused op named in
# a pointwise kernel (`triton_poi_fused_addmm_gelu_0`: addmm's bias add and the GELU) is not a GEMM.
_INDUCTOR_NORM = r"^triton_(red|per)_\w*(_norm_|_norm$|rsqrt)"
_INDUCTOR_SOFTMAX = r"^triton_(red|per)_\w*softmax"
_INDUCTOR_LOSS = r"^triton_(red|per)_\w*(nll_loss|cross_entropy|mse_loss)"
_ACTIVATION = r"silu|swiglu|gelu|relu|sigmoid|tanh|softplus|mish|hardswish|(?<![a-z])elu(?![a-z])"

_BUILTIN = (
    # communication and copies first: an NCCL kernel may say "reduce", a fill kernel is an elementwise kernel
    (
        "communication",
        "communication",
        _collective,
        r"nccl|rccl|(?<![a-z])all_?(reduce|gather|to_?all)|all2all|reduce_?scatter|send_?recv|c10d::|"
        r"record_param_comms|multimem_|cross_device_reduce|custom_all_?reduce",
    ),
    # MoE dispatch/combine: scatters and histograms around the expert GEMMs (they mention matmul, memset, softmax)
    (
        "moe_routing",
        "elementwise",
        "MoE routing",
        r"moe::dev::(routing|finalize)|moe_align|moe_sum|moe_permute|moe_unpermute|_combined_routing|"
        r"_sum_bitmatrix|_finalize_matmul_scatter|topk_softmax|expert_(index|offset)",
    ),
    # CPU operators are counted by their self time. A fill operator writes a constant into every element (TraceLens
    # files aten::fill_ and masked_fill_ under elementwise); the fill *kernels* below stay copies (memset-like work
    # HTA counts as memory). Factories (zeros, ones, full) only allocate: their fill is a child aten::fill_/zero_.
    ("fill_op", "elementwise", "fill", r"aten::(fill_|zero_|masked_fill_?|masked_fill_kernel)\b"),
    (
        "fill",
        "memory copy",
        "fill",
        r"memset|fillbuffer|__amd_rocclr_fill|(?<![a-z])fill_kernel|FillFunctor|masked_fill",
    ),
    ("concat", "memory copy", "concat", r"CatArrayBatchedCopy|(?<![a-z])(con)?cat_?kernel|aten::(cat|stack)\b"),
    (
        "cast",
        "memory copy",
        "dtype cast",
        r"(bfloat16|half|float|fp8|float\d+|int\d*)(to\w{1,40}?)?_copy_kernel|aten::(_to_copy|type_as)\b",
    ),
    # cuDNN and MIOpen convert between NCHW and NHWC around convolutions: a copy with a permutation
    (
        "layout",
        "memory copy",
        "layout transform",
        r"nchwToNhwc|nhwcToNchw|tensorTransformGeneric|batched_transpose_|transpose_(NCHW|CNHW|NHWC)\w{0,80}2|NCHW2|NHWC2|"
        r"nchw_to_nhwc|"
        r"nhwc_to_nchw",
    ),
    (
        "copy",
        "memory copy",
        "copy",
        r"memcpy|copybuffer|__amd_rocclr_copy|direct_copy_kernel|(^|::)copy_kernel|copy_device_to_device|"
        r"recat_copy|recat_embedding_grad_output|aten::(copy_|_foreach_copy_|to|clone|contiguous|_local_scalar_dense|item|pin_memory|_pin_memory|"
        r"copy_bucket_to_grad|flatten_dense_tensors|unflatten_dense_tensors)\b|copy_bucket_to_grad|"
        # the backward of slicing writes the gradient into a zeroed tensor; of a split, concatenates
        r"aten::(select|slice|split|split_with_sizes)(_backward| backward)",
    ),
    # HIP's stream memory operations (hipStreamWriteValue/WaitValue, batched) run as ROCclr blit kernels
    ("stream_memop", "memory copy", "stream memory op", r"__amd_rocclr_(streamOps|batchMemOp)"),
    # CPU operators that allocate or re-view a tensor: no data moves (the embedded tracer's CPU-only traces)
    (
        "allocation",
        "allocation/view",
        "allocation",
        r"aten::(empty|empty_like|empty_strided|new_empty|new_empty_strided|resize_|set_|record_stream|"
        r"lift_fresh|zeros|zeros_like|ones|ones_like|full|full_like|new_zeros|new_ones|new_full|scalar_tensor)\b|"
        r"__amd_rocclr_initHeap",
    ),
    (
        "view",
        "allocation/view",
        "view",
        r"aten::_?(view|reshape_alias|reshape|as_strided_?|unsafe_view|alias|detach_?|t|numpy_T|transpose|permute|"
        r"expand|expand_as|broadcast_to|broadcast_tensors|slice|select|narrow|unsqueeze_?|squeeze_?|split|"
        r"split_with_sizes|chunk|unbind|unflatten|flatten|movedim|unfold|resolve_conj|resolve_neg|result_type|promote_types|"
        r"is_nonzero|is_pinned|_has_compatible_shallow_copy_type)\b|^detach_?$",
    ),
    # An embedding backward sorts the indices, then sums the gradient rows of each run of equal indices: a segmented
    # reduction (ATen's compute_grad_weight / sum_and_scatter; FBGEMM's split_embedding_backward_codegen_* find the
    # long segments, sum them and apply the fused optimizer to the rows they wrote; SplitLookupFunction's autograd node)
    (
        "embedding_bwd",
        "reduction",
        "embedding bwd",
        r"compute_grad_weight|krn_partial|partials_per_segment|compute_num_of_partial_segments|sum_and_scatter|"
        r"embedding\w{0,200}?_backward|embedding backward|split_embedding_codegen_grad_indice|SplitLookupFunction",
    ),
    # the lookup: a gather of table rows (FBGEMM's `..._lookup_rowwise_adagrad_function` names the optimizer that its
    # backward will apply; the lookup itself is the forward)
    (
        "embedding",
        "elementwise",
        "embedding fwd",
        r"split_embedding|embedding_?(bag|forward|dense|renorm)|EmbeddingBag|aten::embedding|embedding_codegen",
    ),
    (
        "sparse_features",
        "elementwise",
        "index/gather/embedding",
        r"bounds_check_indices|permute_(2D|1D|indices|pooled|sparse|sequence)|bucketize_sparse|linearize_index|"
        r"jagged|to_dense_representation|PermutePooledEmbs|fast_gather|offsets_range|lengths_range",
    ),
    (
        "optimizer",
        "optimizer",
        "optimizer step",
        r"(?<![a-z])adam|fusedadam|\bsgd|lamb_|lion_|adagrad|rmsprop|optimizer",
    ),
    ("foreach", "optimizer", "multi-tensor (foreach)", r"multi_tensor_apply|_foreach_"),
    # log-softmax is the first half of a cross-entropy loss (PyTorch's cross_entropy is log_softmax + nll_loss; ATen's
    # kernel is SoftMax with a LogSoftMax epilogue): with the loss, not with attention's softmax
    ("log_softmax", "reduction", "loss", r"log_?softmax"),
    ("inductor_norm", "normalization", _direction("norm"), _INDUCTOR_NORM),
    ("inductor_softmax", "attention", _direction("softmax"), _INDUCTOR_SOFTMAX),
    ("inductor_loss", "reduction", "loss", _INDUCTOR_LOSS),
    ("inductor_gemm", "GEMM", gemm_shape, r"^triton_tem_"),
    ("inductor_reduction", "reduction", "reduction", r"^triton_(red|per)_"),
    ("inductor_activation", "elementwise", "activation", rf"^triton_poi_\w*({_ACTIVATION})"),
    ("inductor_pointwise", "elementwise", "elementwise", r"^triton_poi_"),
    # Inductor of PyTorch 2.0 named kernels by their signature only (`triton__0d1d2d3`): fused pointwise/reductions
    ("inductor_unnamed", "elementwise", "fused (ops not named)", r"^triton__\d"),
    ("softmax", "attention", _direction("softmax"), r"softmax"),
    ("rope", "attention", "rotary embedding", r"rotary|(^|[^a-z])rope"),
    (
        "kv_cache",
        "attention",
        "KV cache write",
        r"reshape_and_cache|store_kvcache|store_cache|concat_and_cache|kv_indices",
    ),
    # AOTriton (PyTorch's SDPA on ROCm): attn_fwd, then bwd_preprocess and bwd_kernel_fuse / _dk_dv / _dq
    ("aotriton_bwd", "attention", "attention bwd", r"^(bwd_kernel_(fuse|dk_dv|dq)|bwd_preprocess(_varlen)?)$"),
    # cuDNN's flash-attention backward runs helpers around its bprop kernel: dO.O row sums first, dQ conversion last
    ("attention_bwd_helper", "attention", "attention bwd", r"compute_dot_do_o|convert_dq_to"),
    (
        "attention",
        "attention",
        _direction("attention"),
        # FlashInfer's norm, sampling, activation and GEMM kernels are no attention: they fall through to those rules
        r"attn|attention|flash(?!infer::(norm|sampling|activation|quantization|gemm|group_gemm))|fmha|sdpa|^reduce_segments$|mha_(fwd|bwd|batch)|(?<![a-z])sage_(fwd|bwd|attn)",
    ),
    # ATen's generic reduction kernel: its functor (WelfordOps for var/std, NormTwoOps for vector norms) is no
    # normalization layer, and neither is the vector norm operator
    (
        "aten_reduce",
        "reduction",
        "reduction",
        r"at::native::reduce_kernel<|lpnorm_cleanup|aten::(linalg_vector_norm|linalg_norm|norm|var|std)\b",
    ),
    (
        "norm",
        "normalization",
        _direction("norm"),
        r"(rms|layer|batch|group|instance|_|\b)_?norm(?!al)|welford|GammaBeta|MIOpenBatchNorm|(?<![a-z])bn_(fw|bw)_|"
        r"RowwiseMoments|Compute(Internal|Fused|BackwardFused)\w{0,80}(Params|Gradients)|cuApply(Layer|RMS)Norm",
    ),
    # LAPACK-style factorisations and solves (cuSOLVER, MAGMA, rocSOLVER)
    (
        "solver",
        "GEMM",
        "dense solver (LAPACK)",
        r"getrf|getrs|potrf|potrs|geqrf|orgqr|ormqr|syevd|gesvd|trsm|trsv|lu_factor|linalg_(solve|inv|cholesky|qr|svd|eig)",
    ),
    ("splitk", "GEMM", "GEMM split-K reduce", r"splitKreduce|split_?k_?reduce|ReduceSplitK"),
    ("gemv", "GEMM", "GEMV", r"gemv"),
    (
        "conv",
        "convolution",
        _direction("convolution"),
        r"conv(olution)?([_\d]|\b)|implicit_convolve|xmma_(fprop|dgrad|wgrad)|(fprop|dgrad|wgrad)_|miopenConv|^igemm_(fwd|bwd|wrw)|"
        r"scudnn|winograd|fft2d_|dgrad_engine|wgrad_alg\d|cask_cudnn\w{0,80}::compute\w{0,80}Offsets|reduce_wgrad|Im\d?d2Col|"
        r"im2col|col2im|xdlops_bwd_(weight|data)|grouped_conv|depthwise",
    ),
    (
        "gemm",
        "GEMM",
        gemm_shape,
        r"(?<!fb)gemm|cijk_|\bmm\b|\b(add|b)?mm backward|matmul|addmm|bmm|aten::(mm|linear|baddbmm|einsum|tensordot)\b|"
        r"cutlass|epilogue::impl::|cublas|nvjet|hipblas|rocblas|tensile|xmma|wgmma|mfma|_mm_|dot_?kernel",
    ),
    (
        "quantize",
        "elementwise",
        "quantize/dequantize",
        r"quantiz|dequant|_quant(_|$)|qparam|FP8rowwise|hfp8|fp8_quant|\bquant_kernel",
    ),
    ("loss", "reduction", "loss", r"nll_loss|cross_?entropy|xent|mse_loss|mse_(backward_)?(cuda_)?kernel|l1_loss"),
    (
        "pooling",
        "reduction",
        _direction("pooling"),
        r"max_?pool|avg_?pool|adaptive_(avg|average|max)_?pool|average_pool|pooling|MaxPool\w{0,80}Backward",
    ),
    (
        "sort",
        "reduction",
        "sort/search",
        r"radix_?sort|sort_?kernel|bitonic|sortKV|segmented_sort|merge_?sort|argsort|searchsorted|bucketize",
    ),
    ("topk", "reduction", "top-k", r"topk|top_k|gatherTopK"),
    # select/partition kernels carry scan state types in their template arguments: before scan
    (
        "select",
        "reduction",
        "select/unique",
        r"DeviceSelect|partition_(config|impl|kernel)|select_if|DeviceCompact|unique_|nonzero",
    ),
    ("reduce_by_key", "reduction", "reduction", r"ReduceByKey|reduce_by_key"),
    (
        "scan",
        "reduction",
        "scan",
        r"DeviceScan|scan_impl|lookback_scan|ScanTileState|(inclusive|exclusive)_?scan|cumsum|cumprod|"
        r"scan_innermost|scan_outer",
    ),
    (
        "random",
        "elementwise",
        "random numbers/dropout",
        r"distribution_elementwise|normal_kernel|uniform_kernel|philox|curand|bernoulli|dropout|randperm|multinomial|"
        r"aten::(rand|randn|randint|normal_|uniform_|random_)\b",
    ),
    (
        "resize",
        "elementwise",
        "resize (upsample/pad)",
        r"upsample|interpolate|grid_sampler|constant_pad|reflection_pad|replication_pad|aten::pad\b",
    ),
    (
        "index",
        "elementwise",
        "index/gather/embedding",
        r"gather|scatter|index_?(select|put|add|copy|fill)|indexFunc|indexSelect|index_kernel|repeat_interleave|"
        r"aten::(index|_index_put_impl_|embedding|take)\b",
    ),
    (
        "reduction",
        "reduction",
        "reduction",
        r"reduce_kernel|reduction|DeviceReduce|ReduceByKey|reduce_by_key|reduce_config|\b(sum|mean|argmax|argmin|amax)_kernel|"
        r"aten::(sum|mean|max|min|argmax|argmin|amax|all|any|_grad_sum_to_size)\b|aten::(sum|mean|max) backward|"
        r"^_grad_sum_to_size$",
    ),
    (
        "activation",
        "elementwise",
        "activation",
        rf"{_ACTIVATION}|aten::(silu|gelu|relu|sigmoid|tanh|threshold_backward)\b",
    ),
    (
        "elementwise",
        "elementwise",
        "elementwise",
        r"elementwise|vectorized|unrolled|pointwise|^scal_kernel<|scalePackedTensor|triu|tril|transform_(config|impl)|"
        r"SubTensorOp|AccumulateGrad|"
        r"\b(add|mul|sub|div|exp|neg|pow|sqrt|rsqrt|where|mask|clamp|abs|log)|aten::(add|mul|sub|div|exp|neg|pow|sqrt|rsqrt|"
        r"where|masked_fill|triu|tril|abs|sgn|sign|clamp|clamp_min|log|log2|logit|logit_backward|logical_and|eq|ne|ge|gt|le|"
        r"lt|maximum|minimum|cos|sin|square|rsub|addcmul_|addcdiv_|lerp_|nan_to_num|arange|repeat|mul_out)\b",
    ),
)
RULES: tuple[tuple[str, str, object, re.Pattern], ...] = tuple(
    (rule_id, category, role, _lower_re(pattern)) for rule_id, category, role, pattern in _BUILTIN
)


@dataclass(frozen=True)
class UserRule:
    pattern: UserPattern
    category: str
    role: str
    library: str | None
    where: str  # `<file> rules[i]`


_user_rules: tuple[UserRule, ...] = ()


def _fail(what: str, file: str, where: str | None = None, fix: str | None = None) -> UserError:
    return UserError(what, file=file, where=where, fix=fix)


def load_rules(path: str | os.PathLike[str]) -> tuple[UserRule, ...]:
    """Read and validate a rules file: {"rules": [{"match": REGEX, "category": C, "role": R, "library": L}]}."""
    from madengine_rocprof import inputs
    from madengine_rocprof.models._common import closest

    file = str(path)
    data = inputs.load_json(path, "kernel rules file")
    example = '{"rules": [{"match": "my_fused_mlp", "category": "GEMM", "role": "fused MLP"}]}'
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise _fail('expected an object with a "rules" list', file, fix=f"write e.g. {example}")
    extra = sorted(set(data) - {"rules", "schema_version", "_comment"})
    if extra:
        raise _fail(f"unknown key '{extra[0]}'", file, fix='the top level holds "rules" (and optional "_comment")')
    rules = []
    for i, item in enumerate(data["rules"]):
        where = f"rules[{i}]"
        if not isinstance(item, dict):
            raise _fail("each rule is an object", file, where, fix=f"write e.g. {example}")
        for key in item:
            if key not in RULE_KEYS and key != "_comment":
                guess = closest(key, RULE_KEYS)
                raise _fail(
                    f"unknown key '{key}'",
                    file,
                    where,
                    fix=(f"did you mean '{guess}'? " if guess else "") + "keys: " + ", ".join(RULE_KEYS),
                )
        for key in RULE_KEYS:
            if key in item and not (isinstance(item[key], str) and item[key].strip()):
                raise _fail(f"'{key}' must be a non-empty string", file, f"{where}.{key}")
        if "match" not in item or "category" not in item:
            missing = "match" if "match" not in item else "category"
            raise _fail(f"'{missing}' is required", file, where, fix=f"write e.g. {example}")
        if item["category"] not in CATEGORIES or item["category"] == UNKNOWN:
            guess = closest(item["category"], CATEGORIES[:-1])
            raise _fail(
                f"unknown category '{item['category']}'",
                file,
                f"{where}.category",
                fix=(f"did you mean '{guess}'? " if guess else "")
                + "categories: "
                + ", ".join(CATEGORIES[:-1])
                + '; put your own grouping in "role"',
            )
        try:  # RE2: linear-time matching, so no rule can hang a report (reports/user_regex.py)
            pattern = compile_user(item["match"])
        except ValueError as err:
            raise _fail(
                f"invalid regular expression {item['match']!r}: {err}",
                file,
                f"{where}.match",
                fix=SYNTAX_HELP,
            ) from None
        rules.append(
            UserRule(
                pattern,
                item["category"],
                item.get("role") or item["category"],
                item.get("library"),
                f"{Path(file).name} {where}",
            )
        )
    return tuple(rules)


def rules_path(explicit: str | os.PathLike[str] | None) -> Path | None:
    """The rules file in force: the one given, else $MADENGINE_ROCPROF_KERNEL_RULES, else the registered one."""
    from madengine_rocprof.home import user_home  # not registry.store: that imports pydantic models (issue 33)

    if explicit:
        return Path(explicit)
    if os.environ.get(RULES_ENV):
        return Path(os.environ[RULES_ENV])
    registered = user_home() / RULES_FILE_NAME
    return registered if registered.is_file() else None


def configure(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """Load the user rules in force for this process (commands call it once); returns the file used."""
    global _user_rules
    path = rules_path(explicit)
    _user_rules = load_rules(path) if path else ()
    clear_cache()
    return path


def set_rules(rules: tuple[UserRule, ...]) -> None:
    global _user_rules
    _user_rules = tuple(rules)
    clear_cache()


# The built-in rules are linear in the name's length (quantifiers between literals bounded; tested on crafted
# names), but each still reads the name: a 120 KB crafted name costs ~0.3 s. The longest real kernel names (CK and
# CUTLASS templates) are a few KB.
MAX_RULE_TEXT = 16 * 1024

# The classes of names `classify_many` worked out (all at once, per pattern over the column of names), and the few
# distinct classes they share: a trace of 1M distinct kernel names has a few dozen (category, role, library, rule).
_known: dict[str, KernelClass] = {}
_interned: dict[tuple[str, str, str, str], KernelClass] = {}
_LIBRARY_PATTERNS = OrderedPatterns([pattern for _, pattern in LIBRARIES])
_RULE_PATTERNS = OrderedPatterns([pattern for _, _, _, pattern in RULES])


def clear_cache() -> None:
    """Forget every class worked out (the rules in force changed)."""
    _known.clear()
    _interned.clear()
    _classify_one.cache_clear()


def classify(kernel_name: str) -> KernelClass:
    """Category, role and library of a kernel (or CPU operator) name. User rules search the whole name as
    documented; the built-in rules match `match_key(name)`, so parameter types never decide.
    For many names at once, `classify_many` is the fast way (and makes later calls for them a look-up)."""
    known = _known.get(kernel_name)
    return known if known is not None else _classify_one(kernel_name)


def _rule_text(kernel_name: str) -> tuple[str, str]:
    """What the built-in rules read (`match_key`, cut to MAX_RULE_TEXT) and the words that say it was cut."""
    key = match_key(kernel_name)
    if len(key) > MAX_RULE_TEXT:  # no real kernel is named so long: the rules read its first part, and say so
        return key[:MAX_RULE_TEXT], f" (on the first {MAX_RULE_TEXT:,} characters of a {len(key):,}-character name)"
    return key, ""


def _user_rule_of(kernel_name: str) -> UserRule | None:
    for rule in _user_rules:
        if rule.pattern.search(kernel_name):
            return rule
    return None


def _class_of(key: str, cut: str, library: str, rule_index: int, user: UserRule | None) -> KernelClass:
    if user is not None:
        fields = (user.category, user.role, user.library or library, user.where)
    elif rule_index < 0:
        fields = (UNKNOWN, UNKNOWN, library, cut.strip())
    else:
        rule_id, category, role, _ = RULES[rule_index]
        fields = (category, role(key) if callable(role) else str(role), library, f"built-in {rule_id}{cut}")
    found = _interned.get(fields)
    if found is None:
        found = _interned[fields] = KernelClass(*fields)
    return found


def _library_name(index: int) -> str:
    return LIBRARIES[index][0] if index >= 0 else UNKNOWN


@lru_cache(maxsize=65536)
def _classify_one(kernel_name: str) -> KernelClass:
    key, cut = _rule_text(kernel_name)
    lower = key.lower()
    library = _library_name(first_match(lower, _LIBRARY_PATTERNS.patterns))
    user = _user_rule_of(kernel_name)
    rule_index = -1 if user is not None else first_match(lower, _RULE_PATTERNS.patterns)
    return _class_of(key, cut, library, rule_index, user)


def classify_many(kernel_names: Iterable[str]) -> list[KernelClass]:
    """`classify` of each name, in order. The distinct names not seen before are classified together: each built-in
    pattern runs once over all of them as a column operation (rule_columns.py), not once per name in Python, so a
    trace of 1M distinct kernel names classifies in seconds; every name's class is then a look-up."""
    names = list(kernel_names)
    known = _known
    new = [name for name in names if name not in known]
    if new:
        new = list(dict.fromkeys(new))
        keys = list(map(match_key, new))
        cuts = {i: _rule_text(new[i]) for i, key in enumerate(keys) if len(key) > MAX_RULE_TEXT}  # rare
        for i, (key, _) in cuts.items():
            keys[i] = key
        libraries = _LIBRARY_PATTERNS.first_matches(keys, lower=True)
        users = [_user_rule_of(name) for name in new] if _user_rules else [None] * len(new)
        by_rules = [i for i, user in enumerate(users) if user is None]  # a user rule decides the others
        rule_index = [-1] * len(new)
        ruled = _RULE_PATTERNS.first_matches(keys if len(by_rules) == len(new) else [keys[i] for i in by_rules],
                                             lower=True)
        for i, first in zip(by_rules, ruled, strict=True):
            rule_index[i] = first
        # a rule with a fixed role gives every name it takes one class per library: worked out once
        fixed: dict[tuple[int, int], KernelClass] = {}
        for i, name in enumerate(new):
            key, cut = keys[i], cuts[i][1] if i in cuts else ""
            rule, library = rule_index[i], libraries[i]
            if users[i] is None and not cut and (rule < 0 or not callable(RULES[rule][2])):
                found = fixed.get((rule, library))
                if found is None:
                    found = fixed[rule, library] = _class_of(key, cut, _library_name(library), rule, None)
            else:
                found = _class_of(key, cut, _library_name(library), rule, users[i])
            known[name] = found
    return [known[name] for name in names]


# transfers a DMA/copy engine runs, as profilers name them: Kineto `Memcpy HtoD (Pinned -> Device)` / `Memset (Device)`,
# Nsight `[CUDA memcpy HtoD]` / `[CUDA memset]`, rocprofv3 `MEMORY_COPY_HOST_TO_DEVICE`
_COPY_ENGINE = re.compile(r"^(Memcpy|Memset)\b|^\[CUDA mem(cpy|set)|^MEMORY_COPY", re.IGNORECASE)


def runs_on_copy_engine(name: str) -> bool:
    """True for a copy-engine transfer; False for kernels, including the memory-copy kernels that run on the compute
    units (ATen FillFunctor, CatArrayBatchedCopy, direct_copy_kernel_cuda, ROCclr blits), which Holistic Trace
    Analysis counts as compute."""
    return bool(_COPY_ENGINE.search(name.strip()))


def categorize(kernel_name: str) -> str:
    return classify(kernel_name).category


def role_of(kernel_name: str) -> str:
    return classify(kernel_name).role
