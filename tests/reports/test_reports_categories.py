"""Kernel categories on names seen in ROCm/CUDA PyTorch training traces, Triton, RCCL and the embedded CPU tracer."""
from __future__ import annotations

import pytest

from madengine_rocprof.reports.categories import CATEGORIES, categorize


@pytest.mark.parametrize(
    "name, category",
    [
        ("Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K1", "GEMM"),
        ("Custom_Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x1", "GEMM"),
        ("ampere_sgemm_128x64_tn", "GEMM"),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "GEMM"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(Params)", "GEMM"),
        ("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", "GEMM"),  # cuBLASLt Hopper GEMM (torch 2.11 on H200)
        ("aten::addmm", "GEMM"),
        ("aten::mm", "GEMM"),
        ("_attn_fwd_kernel", "attention"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>(Flash_fwd_params)", "attention"),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float>(float*, float const*, int)",
            "attention",
        ),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("ck_tile::FmhaFwdKernel<...>", "attention"),
        ("_rmsnorm_fwd_kernel", "normalization"),
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)",
            "normalization",
        ),
        ("aten::native_layer_norm", "normalization"),
        ("aten::rms_norm", "normalization"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)", "elementwise"),
        ("triton_poi_fused_add_mul_silu_0", "elementwise"),
        ("aten::silu", "elementwise"),
        ("aten::mul", "elementwise"),
        ("addition_kernel", "elementwise"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
        ("rccl_main_kernel", "communication"),
        ("__amd_rocclr_copyBuffer", "memory copy"),
        ("__amd_rocclr_fillBufferAligned", "memory copy"),
        ("aten::copy_", "memory copy"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps>>(...)", "other"),
        ("void at::native::normal_kernel<float>(...)", "other"),  # random init: "normal", not a norm
        ("property_lookup_kernel", "other"),  # contains "rope" inside a word
        ("autograd::engine::evaluate_function: MmBackward0", "GEMM"),
        ("AddmmBackward0", "GEMM"),
    ],
)
def test_categorize(name, category):
    assert categorize(name) == category


def test_every_rule_category_is_a_listed_category():
    from madengine_rocprof.reports.categories import RULES

    assert {c for c, _ in RULES} | {"other"} == set(CATEGORIES)


@pytest.mark.parametrize(
    "name, shown",
    [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>>"
         "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
         "vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, array<…>>"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, float const*, int)",
         "cunn_SoftMaxForward<…>"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>(...)",
         "reduce_kernel<512, 1, ReduceOp<float, MeanOps<…>>>"),
        ("subtract_kernel(float*, float const*, float const*, int, int)", "subtract_kernel"),
        ("aten::mm", "aten::mm"),
        ("Cijk_Alik_Bljk_SB_MT128x128x16", "Cijk_Alik_Bljk_SB_MT128x128x16"),
    ],
)
def test_display_name_drops_namespaces_and_arguments(name, shown):
    from madengine_rocprof.reports.formatting import display_name

    assert display_name(name) == shown
