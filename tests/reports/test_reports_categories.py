"""Kernel taxonomy: categories, roles and libraries on names from ROCm and CUDA PyTorch training traces, Triton,
RCCL/NCCL and the embedded CPU tracer; the real H100/H200 names in tests/fixtures/gpu_runs; user rules files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import categories
from madengine_rocprof.reports.categories import CATEGORIES, categorize, classify, configure, load_rules

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def builtin_rules_only(monkeypatch, tmp_path):
    monkeypatch.delenv(categories.RULES_ENV, raising=False)
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "home"))
    categories.set_rules(())
    yield
    categories.set_rules(())


@pytest.mark.parametrize(
    "name, category, role, library",
    [
        # AMD: Tensile/hipBLASLt, rocBLAS, CK, MIOpen, RCCL, ROCclr, Triton
        (
            "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K1",
            "GEMM",
            "GEMM large tile (>=128x128)",
            "Tensile/hipBLASLt",
        ),
        (
            "Custom_Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x1",
            "GEMM",
            "GEMM large tile (>=128x128)",
            "Tensile/hipBLASLt",
        ),
        ("Cijk_Ailk_Bjlk_HHS_BH_MT64x32x64_MI16x16x16x1_SN", "GEMM", "GEMM small tile (<=64x64)", "Tensile/hipBLASLt"),
        ("Cijk_Ailk_Bljk_SB_MT256x32x16_MI32x32x2x1", "GEMM", "GEMM skinny tile (aspect >=4)", "Tensile/hipBLASLt"),
        ("void rocblas_gemvt_kernel<256, float>(int, int, float, long, float const*)", "GEMM", "GEMV", "rocBLAS"),
        (
            "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<...>>(...)",
            "GEMM",
            "GEMM tile not in name",
            "CK",
        ),
        ("ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVS<...>>", "attention", "attention fwd", "CK"),
        ("ck_tile::FmhaBwdDQDKDVKernel<...>", "attention", "attention bwd", "CK"),
        ("MIOpenBatchNormFwdTrainSpatial", "normalization", "norm fwd", "MIOpen"),
        ("miopenSp3AsmConv_v21_1_3_gfx9_fp32_stride1", "convolution", "convolution fwd", "MIOpen"),
        (
            "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
            "communication",
            "collective (other)",
            "RCCL/NCCL",
        ),
        ("rccl_main_kernel_AllGather", "communication", "allgather", "RCCL/NCCL"),
        ("__amd_rocclr_copyBuffer", "memory copy", "copy", "HIP runtime"),
        ("__amd_rocclr_fillBufferAligned", "memory copy", "fill", "HIP runtime"),
        # the other blit kernels ROCclr names (rocclr/device/rocm/rocblit.cpp, BlitName), as rocprofv3 writes them
        ("__amd_rocclr_copyBufferRectAligned.kd", "memory copy", "copy", "HIP runtime"),
        ("__amd_rocclr_copyImageToBuffer", "memory copy", "copy", "HIP runtime"),
        ("__amd_rocclr_fillBufferAligned2D", "memory copy", "fill", "HIP runtime"),
        ("__amd_rocclr_fillImage", "memory copy", "fill", "HIP runtime"),
        ("__amd_rocclr_streamOpsWrite.kd", "memory copy", "stream memory op", "HIP runtime"),
        ("__amd_rocclr_streamOpsWait", "memory copy", "stream memory op", "HIP runtime"),
        ("__amd_rocclr_batchMemOp", "memory copy", "stream memory op", "HIP runtime"),
        ("__amd_rocclr_initHeap", "allocation/view", "allocation", "HIP runtime"),
        ("triton_poi_fused_add_mul_silu_0", "elementwise", "activation", "Triton"),
        ("triton_red_fused_sum_1", "reduction", "reduction", "Triton"),
        ("triton_tem_fused_mm_3", "GEMM", "GEMM tile not in name", "Triton"),
        ("_attn_fwd_kernel", "attention", "attention fwd", "unknown"),
        ("_rmsnorm_fwd_kernel", "normalization", "norm fwd", "unknown"),
        # NVIDIA: cuBLAS, cuBLASLt (nvjet), CUTLASS, cuDNN, flash-attn, NCCL
        ("ampere_sgemm_128x64_tn", "GEMM", "GEMM medium tile", "cuBLAS"),
        (
            "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "GEMM",
            "GEMM large tile (>=128x128)",
            "cuBLAS",
        ),
        ("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", "GEMM", "GEMM medium tile", "cuBLASLt"),
        # tiles behind epilogue and type words (names from TraceLens's and HTA's public traces)
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x6_tn_align8>(Params)",
            "GEMM",
            "GEMM medium tile",
            "CUTLASS",
        ),
        ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "GEMM", "GEMM skinny tile (aspect >=4)", "unknown"),
        # an int8 GEMM is no convolution (MIOpen's implicit-GEMM convolutions are `igemm_fwd/bwd/wrw_*`)
        ("volta_igemm_int8_128x128_ldg4_nt", "GEMM", "GEMM large tile (>=128x128)", "cuBLAS"),
        ("igemm_wrw_gtcx2_nhwc_bf16_bx0_ex1_bt64x64x64_wt32x32x8", "convolution", "convolution bwd", "MIOpen"),
        # FlashInfer's non-attention kernels go by what they are; "prefill" holds no fill
        ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "normalization", "norm fwd",
         "FlashInfer"),
        ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u>(float*)", "reduction", "top-k",
         "FlashInfer"),
        ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<1>(Params)", "attention", "attention fwd", "FlashInfer"),
        ("_fwd_prefill_kernel", "unknown", "unknown", "unknown"),
        (
            "void cublasLt::splitKreduce_kernel<32, 16, int, float>(cublasLt::cublasSplitKParams<float>)",
            "GEMM",
            "GEMM split-K reduce",
            "cuBLASLt",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x256_32x4_nt_align4>(Params)",
            "GEMM",
            "GEMM skinny tile (aspect >=4)",
            "CUTLASS",
        ),
        (
            "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0",
            "attention",
            "attention bwd",
            "cuDNN",
        ),
        (
            "void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*)",
            "attention",
            "attention bwd",
            "cuDNN",
        ),
        (
            "sm80_xmma_fprop_implicit_gemm_indexed_f32f32_tf32f32_f32_nhwckrsc_nchw_cudnn",
            "convolution",
            "convolution fwd",
            "cuDNN",
        ),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>(Flash_fwd_params)",
            "attention",
            "attention fwd",
            "flash-attn",
        ),
        (
            "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(Flash_bwd_params)",
            "attention",
            "attention bwd",
            "flash-attn",
        ),
        (
            "fmha_cutlassB_f32_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<...>::Params)",
            "attention",
            "attention bwd",
            "CUTLASS",
        ),
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "communication",
            "allreduce",
            "RCCL/NCCL",
        ),
        ("ncclKernel_ReduceScatter_RING_LL_Sum_bf16", "communication", "reduce-scatter", "RCCL/NCCL"),
        # PyTorch ATen (both vendors) and the CPU tracer's operator names
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float>(float*, float const*, int)",
            "attention",
            "softmax fwd",
            "PyTorch ATen",
        ),
        (
            "void (anonymous namespace)::softmax_warp_backward<float, float, float, 10, true, false>(float*)",
            "attention",
            "softmax bwd",
            "unknown",
        ),
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)",
            "normalization",
            "norm fwd",
            "PyTorch ATen",
        ),
        (
            "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float, 32u>(long)",
            "normalization",
            "norm bwd",
            "PyTorch ATen",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)",
            "elementwise",
            "elementwise",
            "PyTorch ATen",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int)",
            "memory copy",
            "fill",
            "PyTorch ATen",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps>>(...)",
            "reduction",
            "reduction",
            "PyTorch ATen",
        ),
        (
            "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>"
            "(float*)",
            "reduction",
            "loss",
            "PyTorch ATen",
        ),
        (
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
            "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::"
            "FusedAdamMathFunctor<float, 4>>(...)",
            "optimizer",
            "optimizer step",
            "PyTorch ATen",
        ),
        (
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<1>, "
            "BinaryOpScalarFunctor<float>>",
            "optimizer",
            "multi-tensor (foreach)",
            "PyTorch ATen",
        ),
        (
            "void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int)",
            "elementwise",
            "index/gather/embedding",
            "PyTorch ATen",
        ),
        ("aten::addmm", "GEMM", "GEMM tile not in name", "PyTorch ATen"),
        ("aten::native_layer_norm", "normalization", "norm fwd", "PyTorch ATen"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention", "attention fwd", "PyTorch ATen"),
        ("aten::copy_", "memory copy", "copy", "PyTorch ATen"),
        ("autograd::engine::evaluate_function: MmBackward0", "GEMM", "GEMM tile not in name", "PyTorch ATen"),
        # this project's own Triton kernels (TinyTransformer v3/v4)
        ("tt_attn_bwd_dkdv", "attention", "attention bwd", "unknown"),
        ("tt_rope", "attention", "rotary embedding", "unknown"),
        ("tt_swiglu_fwd", "elementwise", "activation", "unknown"),
        ("tt_xent_bwd", "reduction", "loss", "unknown"),
        # never guessed: unknown stays unknown
        # random init is no normalization
        ("void at::native::normal_kernel<float>(...)", "elementwise", "random numbers/dropout", "PyTorch ATen"),
        ("property_lookup_kernel", "unknown", "unknown", "unknown"),  # "rope" inside a word
        ("my_secret_fused_kernel_v7", "unknown", "unknown", "unknown"),
    ],
)
def test_classify(name, category, role, library):
    found = classify(name)
    assert (found.category, found.role, found.library) == (category, role, library)
    assert categorize(name) == category


def test_every_rule_category_is_a_listed_category():
    assert {c for _, c, _, _ in categories.RULES} | {"unknown"} == set(CATEGORIES)


def test_real_fixture_kernels_are_all_classified(rocprof_fixtures):
    """The rocprofv3 sample outputs (HIP vector-op kernels) from the rocprofiler-sdk repositories."""
    names = set()
    for rel in ("docs-data/kernel_trace.csv", "docs-data-2024/kernel_trace.csv", "docs-data/counter_collection.csv"):
        with open(rocprof_fixtures / rel, newline="") as fh:
            names |= {row["Kernel_Name"] for row in csv.DictReader(fh)}
    assert len(names) == 4
    expected = {
        "addition": "elementwise",
        "subtract": "elementwise",
        "multiply": "elementwise",
        "divide": "elementwise",
    }
    for name in names:
        word = next(w for w in expected if w in name)
        assert categorize(name) == expected[word], name


def _kernels_seen(value) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(set(v) if k == "gpu_kernels_seen" else _kernels_seen(v) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_kernels_seen(v) for v in value)) if value else set()
    return set()


def _real_kernel_names() -> list[str]:
    """Kernels of the real GPU runs in tests/fixtures/gpu_runs: the H100 v1-v4 report, and the H100/H200 benchmark
    results (torch 2.11, cuBLAS/cuBLASLt, cuDNN SDPA, this project's Triton kernels)."""
    gpu_runs = REPO / "tests" / "fixtures" / "gpu_runs"
    report = json.loads((gpu_runs / "report_h100_v1_v4.json").read_text())
    names = {k["name"] for run in report["runs"] for k in run["kernels"]}
    for device in ("h100", "h200"):
        names |= _kernels_seen(json.loads((gpu_runs / f"tinytransformer_{device}.json").read_text()))
    return sorted(names)


def test_real_gpu_kernels_none_unknown_and_gemms_found_by_library():
    """Every kernel of the real H100/H200 runs is classified; names a GEMM library wrote are GEMMs."""
    names = _real_kernel_names()
    assert len(names) > 120
    assert [n for n in names if categorize(n) == "unknown"] == []
    gemm_libraries = {"cuBLAS", "cuBLASLt"}
    for name in names:
        found = classify(name)
        if found.library in gemm_libraries:
            assert found.category == "GEMM", name
        if name.startswith("nvjet_") or "xmma_gemm" in name or "sgemm" in name or "s1688gemm" in name:
            assert found.role.startswith("GEMM "), name
        if name.startswith("tt_attn_bwd") or "cutlassB" in name or "sdpa" in name and "bprop" in name:
            assert found.role == "attention bwd", name
        if "sdpa" in name and "fprop" in name:
            assert (found.role, found.library) == ("attention fwd", "cuDNN"), name
    roles = {classify(n).role for n in names}
    assert {
        "GEMM large tile (>=128x128)",
        "GEMM medium tile",
        "GEMM small tile (<=64x64)",
        "attention fwd",
        "attention bwd",
        "norm fwd",
        "norm bwd",
        "optimizer step",
        "loss",
    } <= roles


# ---- user rules ------------------------------------------------------------------------------------------


def _rules(tmp_path, data, name="rules.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_user_rules_come_first_and_name_their_group(tmp_path):
    path = _rules(
        tmp_path,
        {
            "rules": [
                {"match": "my_secret_fused", "category": "GEMM", "role": "fused MLP", "library": "in-house"},
                {"match": "^nvjet_", "category": "GEMM", "role": "Hopper GEMM"},
            ]
        },
    )
    assert configure(path) == path
    assert classify("my_secret_fused_kernel_v7") == categories.KernelClass(
        "GEMM", "fused MLP", "in-house", "rules.json rules[0]"
    )
    hopper = classify("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT")
    assert (hopper.role, hopper.library) == ("Hopper GEMM", "cuBLASLt")  # library kept from the built-ins
    assert categorize("property_lookup_kernel") == "unknown"


def test_rules_from_the_environment_and_the_registered_file(tmp_path, monkeypatch):
    path = _rules(tmp_path, {"rules": [{"match": "lookup", "category": "elementwise"}]})
    monkeypatch.setenv(categories.RULES_ENV, str(path))
    assert configure() == path and classify("property_lookup_kernel").role == "elementwise"
    monkeypatch.delenv(categories.RULES_ENV)
    assert configure() is None and categorize("property_lookup_kernel") == "unknown"
    code = main(["kernels", "register", str(path)])
    assert code == 0
    assert configure() == tmp_path / "home" / "kernel_rules.json"
    assert categorize("property_lookup_kernel") == "elementwise"


@pytest.mark.parametrize(
    "data, where, what",
    [
        ("{not json", None, "invalid JSON"),
        ({"rule": []}, None, '"rules" list'),
        ({"rules": [], "extra": 1}, None, "unknown key 'extra'"),
        ({"rules": ["gemm"]}, "rules[0]", "each rule is an object"),
        ({"rules": [{"match": "x"}]}, "rules[0]", "'category' is required"),
        ({"rules": [{"category": "GEMM"}]}, "rules[0]", "'match' is required"),
        ({"rules": [{"match": "x", "category": "gemm"}]}, "rules[0].category", "unknown category 'gemm'"),
        ({"rules": [{"match": "x", "category": "unknown"}]}, "rules[0].category", "unknown category"),
        ({"rules": [{"match": "x", "category": "GEMM", "rol": "y"}]}, "rules[0]", "unknown key 'rol'"),
        ({"rules": [{"match": "(x", "category": "GEMM"}]}, "rules[0].match", "invalid regular expression"),
        ({"rules": [{"match": "", "category": "GEMM"}]}, "rules[0].match", "non-empty string"),
    ],
)
def test_bad_rules_files_say_where_and_how_to_fix(tmp_path, data, where, what):
    path = _rules(tmp_path, data)
    with pytest.raises(UserError) as err:
        load_rules(path)
    assert what in err.value.what
    assert err.value.file == str(path) and err.value.where == where


def test_bad_rules_file_fails_the_command_and_writes_nothing(tmp_path, capsys):
    path = _rules(tmp_path, {"rules": [{"match": "x", "category": "gemm"}]})
    assert main(["kernels", "register", str(path)]) == 2
    err = capsys.readouterr().err
    assert "rules[0].category: unknown category 'gemm'" in err and "did you mean 'GEMM'" in err
    assert not (tmp_path / "home" / "kernel_rules.json").exists()
    assert main(["kernels", "check", str(path)]) == 2


def test_kernels_classify_prints_each_name(capsys, tmp_path):
    assert main(["kernels", "classify", "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NTT", "mystery_kernel", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "name": "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NTT",
            "category": "GEMM",
            "role": "GEMM small tile (<=64x64)",
            "library": "cuBLASLt",
            "rule": "built-in gemm",
            "matched_on": "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NTT",
        },
        {
            "name": "mystery_kernel",
            "category": "unknown",
            "role": "unknown",
            "library": "unknown",
            "rule": "",
            "matched_on": "mystery_kernel",
        },
    ]


def test_kernels_classify_says_what_the_rules_matched_on(capsys):
    name = (
        "void fbgemm_gpu::bounds_check_indices_kernel_v1<long, false>(at::GenericPackedTensorAccessor<long, 1ul, "
        "at::RestrictPtrTraits, long>, fbgemm_gpu::FixedDivisor)"
    )
    assert main(["kernels", "classify", name, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["matched_on"] == "fbgemm_gpu::bounds_check_indices_kernel_v1<long, false>"
    assert (row["category"], row["role"], row["library"]) == ("elementwise", "index/gather/embedding", "FBGEMM")


@pytest.mark.parametrize(
    "name, shown",
    [
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul>>"
            "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
            "vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, array<…>>",
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, float const*, int)",
            "cunn_SoftMaxForward<…>",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
            "at::native::MeanOps<float, float>>>(...)",
            "reduce_kernel<512, 1, ReduceOp<float, MeanOps<…>>>",
        ),
        ("subtract_kernel(float*, float const*, float const*, int, int)", "subtract_kernel"),
        ("aten::mm", "aten::mm"),
        ("Cijk_Alik_Bljk_SB_MT128x128x16", "Cijk_Alik_Bljk_SB_MT128x128x16"),
    ],
)
def test_display_name_drops_namespaces_and_arguments(name, shown):
    from madengine_rocprof.reports.formatting import display_name

    assert display_name(name) == shown


def test_builtin_patterns_are_matched_lower_cased_so_upper_case_escapes_are_refused():
    """The built-ins run on the lower-cased key (faster than re.IGNORECASE); `\\D` would become `\\d` there."""
    with pytest.raises(ValueError, match="upper-case escape"):
        categories._lower_re(r"foo\D+")
    assert categories._lower_re(r"FillFunctor|nchwToNhwc").search("at::native::fillfunctor<float>")
    assert classify("AT::NATIVE::VECTORIZED_ELEMENTWISE_KERNEL<4, AT::NATIVE::FILLFUNCTOR<FLOAT>>").role == "fill"
