"""The kernel taxonomy on real PyTorch profiler traces recorded by others: AMD's TraceLens (H100, B200, MI300, MI210,
inference engines) and Meta's Holistic Trace Analysis test traces (A100/V100, NCCL, FBGEMM, MI250).

The fixtures hold every distinct kernel name of each trace with its calls and total time (tests/fixtures/
kernel_names/, PROVENANCE.md there). Each test here failed on the taxonomy before it matched on the function name and
template arguments only and knew these families."""

from __future__ import annotations

import gzip
import json
import re
from functools import cache
from pathlib import Path

import pytest

from madengine_rocprof.reports import categories
from madengine_rocprof.reports.categories import CATEGORIES, classify, runs_on_copy_engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_names"


@pytest.fixture(autouse=True)
def builtin_rules_only():
    categories.set_rules(())
    yield
    categories.set_rules(())


@cache
def _traces() -> tuple[tuple[str, dict], ...]:
    found = []
    for path in sorted(FIXTURES.glob("*.json.gz")):
        data = json.loads(gzip.decompress(path.read_bytes()))
        found += [(f"{path.name}:{trace['path']}", trace) for trace in data.get("traces", ())]
    return tuple(found)


def _gpu_traces():
    return [pytest.param(trace, id=label) for label, trace in _traces() if trace["kernels"]]


def _all_kernels() -> dict[str, int]:
    names: dict[str, int] = {}
    for _, trace in _traces():
        for name, _calls, total_ns in trace["kernels"]:
            names[name] = names.get(name, 0) + total_ns
    return names


def _named(pattern: str) -> list[str]:
    found = sorted(n for n in _all_kernels() if re.search(pattern, n))
    assert found, f"no kernel in the fixtures matches {pattern!r}"
    return found


def test_fixtures_cover_both_vendors_and_many_traces():
    labels = [label for label, _ in _traces()]
    assert len(_gpu_traces()) >= 30
    assert any("/mi300/" in label for label in labels) and any("/h100/" in label for label in labels)
    names = _all_kernels()
    assert len(names) > 900
    assert any(n.startswith("Cijk_") for n in names) and any(n.startswith("nvjet_") for n in names)


@pytest.mark.parametrize("trace", _gpu_traces())
def test_unknown_is_at_most_2_percent_of_kernel_time(trace):
    total = sum(ns for _, _, ns in trace["kernels"])
    unknown = {name: ns for name, _, ns in trace["kernels"] if classify(name).category == "unknown"}
    assert sum(unknown.values()) <= 0.02 * total, sorted(unknown, key=lambda n: -unknown[n])[:5]


# what a GEMM or convolution library writes in a kernel's own name (not in its parameter types)
_MATMUL_HEAD = re.compile(
    r"(?<!fb)gemm|cijk_|nvjet|matmul|cutlass|xmma|wgmma|mfma|\bmm\b|bmm_|triton_tem_|conv|scudnn|winograd|fft2d|"
    r"wgrad|dgrad|fprop|epilogue|magma|sdpa|splitk|gemv",
    re.IGNORECASE,
)


def _head(name: str) -> str:
    """The name up to its parameter list, computed independently of kernel_names.py: up to the first `(` that does
    open `(anonymous namespace)` or a parenthesised template argument (`enable_if<!(false), void>`)."""
    return re.split(r"(?<![<!(])\((?!anonymous namespace\))", name, maxsplit=1)[0]


@pytest.mark.parametrize("trace", _gpu_traces())
def test_gemm_time_is_not_inflated_by_parameter_types(trace):
    """Every kernel counted as GEMM names a GEMM library or a matmul before its parameter list, so the GEMM share
    of a trace is at most the share of such kernels (fbgemm's kernels took 43% of one trace's GEMM time)."""
    gemm = [name for name, _, _ in trace["kernels"] if classify(name).category == "GEMM"]
    assert [name for name in gemm if not _MATMUL_HEAD.search(_head(name))] == []


def test_fbgemm_fixed_divisor_is_no_gemm():
    """bounds_check_indices' only "gemm" is its `fbgemm_gpu::FixedDivisor` parameter."""
    (name,) = [n for n in _named(r"bounds_check_indices") if "FixedDivisor" in n][:1]
    found = classify(name)
    assert (found.category, found.role, found.library) == ("elementwise", "index/gather/embedding", "FBGEMM")
    for name in _named(r"split_embedding_codegen_forward|permute_2D_|_FP8_quantize|_FP8rowwise_to_float"):
        assert classify(name).category == "elementwise", name
    for name in _named(r"split_embedding_backward_codegen_rowwise_adagrad"):  # a segmented sum of gradient rows
        assert (classify(name).category, classify(name).role) == ("reduction", "embedding bwd"), name


@pytest.mark.parametrize(
    "pattern, category, role",
    [
        (r"cudnn::bn_fw_tr_1C11", "normalization", "norm fwd"),
        (r"cudnn::bn_bw_1C11", "normalization", "norm bwd"),
        (r"nchwToNhwcKernel|nhwcToNchwKernel|^batched_transpose_|^transpose_NCHW2", "memory copy", "layout transform"),
        (r"max_pool_forward_nchw|adaptive_average_pool<", "reduction", "pooling fwd"),
        (r"max_pool_backward_nchw", "reduction", "pooling bwd"),
        (r"RowwiseMomentsCUDAKernel|ComputeFusedParamsCUDAKernel", "normalization", "norm fwd"),
        (r"ComputeInternalGradientsCUDAKernel|cuComputePartGradGammaBeta", "normalization", "norm bwd"),
        (r"cub::DeviceRadixSort", "reduction", "sort/search"),
        (r"cub::DeviceScan|rocprim::.*scan_impl", "reduction", "scan"),
        (r"cub::DeviceReduceByKeyKernel", "reduction", "reduction"),
        (r"^triton__\d", "elementwise", "fused (ops not named)"),
        (r"^triton_poi_fused_addmm_gelu", "elementwise", "activation"),
        (r"^triton_red_fused\w*_mean_mul_pow_rsqrt", "normalization", "norm fwd"),
        (r"fused_dropout_kernel|distribution_elementwise_grid_stride_kernel", "elementwise", "random numbers/dropout"),
        (r"scudnn_128x64_relu|winograd\w*Forward|fft2d_r2c|sm80_xmma_fprop", "convolution", "convolution fwd"),
        (r"dgrad_engine|wgrad_alg0_engine|sm80_xmma_wgrad|igemm_wrw_", "convolution", "convolution bwd"),
        (r"CatArrayBatchedCopy", "memory copy", "concat"),
        (r"direct_copy_kernel_cuda", "memory copy", "copy"),
        (r"FillFunctor", "memory copy", "fill"),
        (r"vllm::reshape_and_cache_flash_kernel", "attention", "KV cache write"),
        (r"type_specialized_broadcast_kernel_launcher", "elementwise", "elementwise"),
        (r"_finalize_matmul_scatter|moe::dev::routing", "elementwise", "MoE routing"),
    ],
)
def test_real_families_classify_as_expected(pattern, category, role):
    for name in _named(pattern):
        found = classify(name)
        assert (found.category, found.role) == (category, role), name


def test_copies_are_memory_copies_on_the_copy_engine():
    names = {name for _, trace in _traces() for name, _, _ in trace["copies"]}
    assert {n.split(" ")[0] for n in names} == {"Memcpy", "Memset"}
    assert {n: classify(n).category for n in names} == dict.fromkeys(names, "memory copy")
    assert all(runs_on_copy_engine(n) for n in names)


def test_sm_resident_copy_kernels_are_copies_but_no_copy_engine_transfers():
    """HTA counts these as compute; they keep the memory copy category so a report can name them."""
    kernels = _named(r"FillFunctor|CatArrayBatchedCopy|direct_copy_kernel_cuda|nchwToNhwc|batched_transpose_")
    assert {classify(n).category for n in kernels} == {"memory copy"}
    assert not any(runs_on_copy_engine(n) for n in kernels)
    assert not runs_on_copy_engine("__amd_rocclr_copyBuffer") and runs_on_copy_engine("[CUDA memcpy HtoD]")
    assert runs_on_copy_engine("MEMORY_COPY_HOST_TO_DEVICE")


def test_amd_libraries_from_real_rocm_traces():
    """MI350/MI300/MI210/MI250 names: Tensile/hipBLASLt, CK (also mangled), MIOpen, vLLM/AITER kernels, AOTriton,
    ROCclr blits, RCCL, rocPRIM."""
    expected = {
        r"^Cijk_": ("GEMM", "Tensile/hipBLASLt"),
        r"^_ZN2ck16tensor_operation6device\w*grouped_conv_fwd": ("convolution", "CK"),
        r"^igemm_fwd_gtcx": ("convolution", "MIOpen"),
        r"^MIOpenBatchNorm": ("normalization", "MIOpen"),
        r"^_ZN7ck_tile6kentry\w*Rmsnorm2dFwd": ("normalization", "CK"),
        r"^_ZN5aiter24add_rmsnorm_quant": ("normalization", "AITER"),
        r"^void paged_attention_ll4mi_QKV": ("attention", "vLLM"),
        # a rocprofv3 JSON recorded on MI350 (gfx950): ROCclr blits, AOTriton attention, RCCL, rocPRIM
        r"^__amd_rocclr_copyBuffer$": ("memory copy", "HIP runtime"),
        r"^__amd_rocclr_fillBufferAligned$": ("memory copy", "HIP runtime"),
        r"^(attn_fwd|bwd_kernel_fuse)$": ("attention", "AOTriton"),
        r"^ncclDevKernel_Generic_1\(": ("communication", "RCCL/NCCL"),
        r"rocprim::ROCPRIM_\w+::detail::(radix_sort|partition_kernel|lookback_scan)": ("reduction", "CUB/rocPRIM"),
    }
    for pattern, (category, library) in expected.items():
        for name in _named(pattern):
            found = classify(name)
            assert (found.category, found.library) == (category, library), name
    tiles = {classify(n).role for n in _named(r"^Cijk_")}
    assert {"GEMM large tile (>=128x128)", "GEMM small tile (<=64x64)", "GEMM medium tile"} <= tiles


# ---- CPU operators (the embedded tracer without a GPU, and the cpu_op events of the traces above) -------------


def _cpu_ops() -> set[str]:
    return {name for _, trace in _traces() for name in trace["cpu_ops"]} | set(_more_cpu_ops())


@cache
def _more_cpu_ops() -> dict[str, list[str]]:
    """Operator name -> sources: the Kineto fixtures' cpu_op names and our tracer's CPU rows of a quickstart run."""
    data = json.loads((FIXTURES / "cpu_ops.json").read_text())
    found: dict[str, list[str]] = {}
    for source, names in data["sources"].items():
        for name in names:
            found.setdefault(name, []).append(source)
    return found


# Each operator family's category, by one rule: an operator is counted by what its self time computes.
#   - matrix products are GEMM, convolutions convolution;
#   - attention is the attention operators and the softmax of attention scores;
#   - log-softmax is the first half of a cross-entropy (cross_entropy = log_softmax + nll_loss): reduction, "loss";
#   - a fill writes a constant into each element: elementwise; a factory (zeros, ones, full) only allocates, its fill
#     is a child fill_/zero_ counted there: allocation/view;
#   - copies, casts and concatenations move data: memory copy; views and reshapes move none: allocation/view;
#   - an embedding lookup gathers rows: elementwise (index/gather); its backward sums the gradient rows of equal
#     indices (FBGEMM's also applies the fused optimizer to them): reduction;
#   - the foreach ops run the multi-tensor optimizer: optimizer; pointwise math: elementwise; sums and means:
#     reduction; norms: normalization.
_CPU_FAMILIES = [
    ("matrix products", r"^(aten::)?(mm|bmm|addmm|baddbmm|matmul|linear|einsum)$|^(autograd::engine::evaluate_"
     r"function: )?(Mm|Bmm|Addmm)Backward0$", "GEMM", None),
    ("convolutions", r"^aten::(_?convolution|conv2d|cudnn_convolution|miopen_convolution)$|ConvolutionBackward0$",
     "convolution", None),
    ("attention", r"^aten::\w*(scaled_dot_product|flash_attention)|^aten::_?softmax$|^aten::_softmax_backward_data$|"
     r"(^|: )SoftmaxBackward0$", "attention", None),
    ("log-softmax (the loss)", r"(?i)log_?softmax", "reduction", "loss"),
    ("losses", r"nll_loss|cross_entropy|mse_loss", "reduction", "loss"),
    ("fills", r"^aten::(fill_|zero_|masked_fill_?)$", "elementwise", "fill"),
    ("factories", r"^aten::(zeros|zeros_like|ones|ones_like|full|full_like|new_zeros|scalar_tensor|empty|"
     r"empty_like|empty_strided)$", "allocation/view", "allocation"),
    ("copies", r"^aten::(copy_|clone|contiguous|to|_to_copy|cat|stack)$", "memory copy", None),
    ("views", r"^aten::(view|reshape|_reshape_alias|t|transpose|permute|expand|unsqueeze|squeeze|slice|select|split|"
     r"chunk|as_strided|_unsafe_view|detach|alias|unbind)$", "allocation/view", "view"),
    ("embedding lookup", r"^aten::embedding$|split_embedding_codegen_lookup", "elementwise", None),
    ("embedding backward", r"embedding\w*_backward|EmbeddingBackward0|SplitLookupFunction", "reduction",
     "embedding bwd"),
    ("foreach optimizer", r"^aten::_foreach_(?!copy_)", "optimizer", None),
    ("pointwise math", r"^aten::(add|mul|sub|div|sqrt|rsqrt|exp|neg|pow|addcmul|addcdiv|lerp|clamp|where|abs)_?$",
     "elementwise", "elementwise"),
    ("reductions", r"^aten::(sum|mean|max|min|amax|argmax)$", "reduction", "reduction"),
    ("norms", r"^aten::(layer_norm|native_layer_norm|batch_norm|native_batch_norm|group_norm|rms_norm|_fused_rms_norm)"
     r"$|(LayerNorm|BatchNorm|RmsNorm)Backward0$", "normalization", None),
]


@pytest.mark.parametrize("family, pattern, category, role", _CPU_FAMILIES, ids=[f[0] for f in _CPU_FAMILIES])
def test_operator_families_of_real_traces_follow_the_rule(family, pattern, category, role):
    """Every operator of a family, over the operators of the kernel-name traces, the Kineto fixtures (TraceLens,
    HTA, ours from an H200) and a quickstart run on a CPU, lands in the family's category."""
    members = sorted(op for op in _cpu_ops() if re.search(pattern, op))
    assert members, f"no operator of the fixtures is one of the {family}"
    wrong = {op: (classify(op).category, classify(op).role) for op in members
             if classify(op).category != category or (role and classify(op).role != role)}
    assert not wrong, f"{family}: expected {category}/{role or '*'}: {wrong}"


def test_the_quickstart_operators_are_all_classified_and_the_loss_is_no_attention():
    quickstart = [op for op, sources in _more_cpu_ops().items() if any("quickstart" in s for s in sources)]
    assert len(quickstart) > 100
    ops = [op for op in quickstart if op.startswith(("aten::", "autograd::"))]
    assert [op for op in ops if classify(op).category == "unknown"] == []
    attention = sorted(op for op in quickstart if classify(op).category == "attention")
    assert attention and not [op for op in attention if "log_softmax" in op.lower() or "LogSoftmax" in op]


def test_every_aten_operator_of_the_traces_is_classified():
    ops = sorted(op for op in _cpu_ops() if op.startswith("aten::"))
    assert len(ops) > 200
    assert [op for op in ops if classify(op).category == "unknown"] == []


@pytest.mark.parametrize(
    "op, category, role",
    [
        ("aten::empty", "allocation/view", "allocation"),
        ("aten::empty_strided", "allocation/view", "allocation"),
        ("aten::resize_", "allocation/view", "allocation"),
        ("aten::view", "allocation/view", "view"),
        ("aten::t", "allocation/view", "view"),
        ("aten::copy_", "memory copy", "copy"),
        ("aten::to", "memory copy", "copy"),
        ("aten::_to_copy", "memory copy", "dtype cast"),
        ("aten::zero_", "elementwise", "fill"),
        ("aten::linear", "GEMM", "GEMM tile not in name"),
        ("aten::matmul", "GEMM", "GEMM tile not in name"),
        ("aten::mm", "GEMM", "GEMM tile not in name"),
        ("MmBackward0", "GEMM", "GEMM tile not in name"),
        ("autograd::engine::evaluate_function: MmBackward0", "GEMM", "GEMM tile not in name"),
        ("NativeLayerNormBackward0", "normalization", "norm bwd"),
        ("autograd::engine::evaluate_function: ConvolutionBackward0", "convolution", "convolution bwd"),
        ("SoftmaxBackward0", "attention", "softmax bwd"),
        ("ViewBackward0", "allocation/view", "view"),
        ("aten::linalg_vector_norm", "reduction", "reduction"),  # a vector norm, no normalization layer
        ("aten::dropout", "elementwise", "random numbers/dropout"),
    ],
)
def test_cpu_operators(op, category, role):
    found = classify(op)
    assert (found.category, found.role) == (category, role)


def test_categories_and_rules_agree_and_every_user_knows_each_category():
    from madengine_rocprof.insights.escalate import NOT_ESCALATED, PROFILE_FOR_CATEGORY
    from madengine_rocprof.reports.svg import CATEGORY_COLORS

    assert {c for _, c, _, _ in categories.RULES} | {"unknown"} == set(CATEGORIES)
    assert CATEGORIES[-1] == "unknown"
    # escalation picks a counter profile or says why not, for every category; the charts colour each one
    assert set(PROFILE_FOR_CATEGORY) | set(NOT_ESCALATED) == set(CATEGORIES)
    assert not set(PROFILE_FOR_CATEGORY) & set(NOT_ESCALATED)
    assert set(CATEGORY_COLORS) == set(CATEGORIES) and len(set(CATEGORY_COLORS.values())) == len(CATEGORIES)


# ---- against an independent categorisation: TraceLens's reference reports of the same traces -------------------
# TraceLens files each kernel under the category of the CPU operator that launched it. Where that category names a
# family, ours must agree on the kernel time, allowing what such an operator legitimately launches besides its main
# kernel: layout transforms and copies around a convolution (cuDNN runs 1x1 convolutions as CUTLASS GEMMs), a copy
# inside addmm, the copies TraceLens files under elementwise (aten::copy_), a loss kernel under elementwise.
_TRACELENS_FAMILY = {
    "GEMM": {"GEMM", "memory copy"},
    "CONV_fwd": {"convolution", "memory copy", "GEMM"},
    "CONV_bwd": {"convolution", "memory copy", "GEMM"},
    "NORM_fwd": {"normalization"},
    "NORM_bwd": {"normalization"},
    "BN_fwd": {"normalization"},
    "BN_bwd": {"normalization"},
    "SDPA_fwd": {"attention"},
    "SDPA_bwd": {"attention"},
    "reduce": {"reduction"},
    "elementwise": {"elementwise", "memory copy", "reduction"},
}


def _tracelens_rows() -> list[tuple[str, str, str, float]]:
    data = json.loads(gzip.decompress((FIXTURES / "tracelens_categories.json.gz").read_bytes()))
    return [(s["path"], cat, name, float(us)) for s in data["summaries"] for cat, _op, name, us in s["rows"]]


def test_categories_agree_with_tracelens_reference_reports():
    rows = _tracelens_rows()
    assert {cat for _, cat, _, _ in rows} >= {"GEMM", "CONV_fwd", "NORM_fwd", "SDPA_fwd", "reduce", "elementwise"}
    for family, ours in _TRACELENS_FAMILY.items():
        members = [(name, us) for _, cat, name, us in rows if cat == family]
        total = sum(us for _, us in members)
        outside = {name: us for name, us in members if classify(name).category not in ours}
        assert sum(outside.values()) <= 1e-3 * total, (family, sorted(outside, key=lambda n: -outside[n])[:3])
    # the main kernel of each family is ours too: most of the time lands in the family's own category
    main = {"GEMM": "GEMM", "CONV_fwd": "convolution", "NORM_fwd": "normalization", "SDPA_fwd": "attention"}
    for family, category in main.items():
        times = [(classify(name).category, us) for _, cat, name, us in rows if cat == family]
        assert sum(us for c, us in times if c == category) >= 0.7 * sum(us for _, us in times), family


def test_no_kernel_of_the_tracelens_reports_is_unknown():
    """The reports also cover traces stored upstream as LFS pointers only (Wan2.1 on H100)."""
    rows = _tracelens_rows()
    total = sum(us for *_, us in rows)
    unknown = {name: us for _, _, name, us in rows if classify(name).category == "unknown"}
    assert sum(unknown.values()) <= 0.001 * total, sorted(unknown, key=lambda n: -unknown[n])[:5]
