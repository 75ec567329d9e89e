"""The kernel-name splitter: a demangled signature -> qualified name + template arguments, parameter list dropped."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from madengine_rocprof.reports.kernel_names import key, split_name


@pytest.mark.parametrize(
    "name, qualified, template_args",
    [
        # the fbgemm case: the only "gemm" is a parameter type, which the key leaves out
        (
            "void fbgemm_gpu::bounds_check_indices_kernel_v1<long, false>(at::GenericPackedTensorAccessor<long, 1ul, "
            "at::RestrictPtrTraits, long>, long, fbgemm_gpu::FixedDivisor)",
            "fbgemm_gpu::bounds_check_indices_kernel_v1",
            "long, false",
        ),
        (
            "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 8, false>"
            "(float*, float const*, int, int, int, bool const*, int, bool)",
            "at::native::(anonymous namespace)::softmax_warp_forward",
            "float, float, float, 8, false",
        ),
        # a lambda inside the template arguments: nested <>, () and {} of its own
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase&)::"
            "{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float, "
            "std::array<char*, 2ul>)",
            "at::native::vectorized_elementwise_kernel",
            "4, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::"
            "{lambda(float)#1}, std::array<char*, 2ul>",
        ),
        # a return type other than void
        (
            "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
            "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, int)",
            "vllm::fused_add_rms_norm_kernel",
            "c10::BFloat16, 8",
        ),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x256_32x4_nt_align4>(Params)", "cutlass::Kernel2",
         "cutlass_80_tensorop_s1688gemm_64x256_32x4_nt_align4"),
        ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_Generic_4", ""),
        ("subtract_kernel(float*, float const*, float const*, int, int)", "subtract_kernel", ""),
        ("void foo<int>(int) [clone .kd]", "foo", "int"),
        ("Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN", "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN", ""),
        ("triton_poi_fused_addmm_gelu_view_15", "triton_poi_fused_addmm_gelu_view_15", ""),
        ("triton__0d1d2d3d4d5d", "triton__0d1d2d3d4d5d", ""),
        ("aten::mm", "aten::mm", ""),
        ("autograd::engine::evaluate_function: MmBackward0", "autograd::engine::evaluate_function: MmBackward0", ""),
        # Kineto's copy names: `->` is no bracket, the words stay
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD", ""),
        ("Memset (Device)", "Memset", ""),
        # a name that is entirely parenthesised is kept, and so are names that are not signatures at all
        ("(anonymous namespace)::foo", "(anonymous namespace)::foo", ""),
        ("(unnamed)", "(unnamed)", ""),
        ("", "", ""),
    ],
)
def test_split_name(name, qualified, template_args):
    parts = split_name(name)
    assert (parts.qualified, parts.template_args) == (qualified, template_args)
    assert parts.key == (f"{qualified}<{template_args}>" if template_args else qualified)


def test_function_is_the_last_component_outside_brackets():
    assert split_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)").function == (
        "cunn_SoftMaxForward"
    )
    assert split_name("void ck_tile::kentry<1, ck_tile::Foo<a::b>>(x)").function == "kentry"


def test_whitespace_is_normalised():
    assert key("void  foo<int,\n  float>(int)") == "foo<int, float>"


_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda s: s != "void")
_qualified = st.lists(_ident, min_size=1, max_size=4).map("::".join)


@st.composite
def _type(draw, depth=2):
    """A C++ type as compilers print it: a qualified name, maybe with template arguments, pointer or reference."""
    name = draw(_qualified)
    if depth and draw(st.booleans()):
        args = draw(st.lists(_type(depth=depth - 1) | st.integers(0, 512).map(str), min_size=1, max_size=3))
        name += "<" + ", ".join(args) + ">"
    return name + draw(st.sampled_from(["", "*", " const*", "&", " const&"]))


@settings(max_examples=100, deadline=None)
@given(_qualified, st.lists(_type() | st.integers(0, 512).map(str), max_size=4), st.lists(_type(), max_size=5))
def test_generated_signatures_split_back_into_their_parts(qualified, template_args, parameters):
    """Any `void name<args>(params)` built from the grammar splits back into name and args, whatever the params say."""
    args = ", ".join(template_args)
    name = f"void {qualified}{f'<{args}>' if args else ''}({', '.join(parameters)})"
    parts = split_name(name)
    assert (parts.qualified, parts.template_args) == (qualified, args)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60))
def test_any_text_splits_without_error(text):
    parts = split_name(text)
    assert isinstance(parts.key, str)
