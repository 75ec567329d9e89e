"""Split a kernel name as profilers print it into the parts that say what the kernel is.

A demangled CUDA/HIP kernel name is a C++ signature: `void ns::func<template args>(parameter types)`. What the kernel
does is in its qualified name and its template arguments (the functor, the tile, the element type); the parameter
types only say what it was handed, and often mention other code: fbgemm's `bounds_check_indices_kernel` takes an
`fbgemm_gpu::FixedDivisor`, so a rule that matched "gemm" in the whole signature called it a GEMM. The kernel
taxonomy (`categories.py`) therefore matches its rules on `key(name)`: the signature without the return type and the
parameter list. Names that are not C++ signatures (Tensile `Cijk_*`, Triton `triton_poi_*`, plain C kernels, CPU
operators such as `aten::mm`) come back unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPEN = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}
# a prefix that reads as a C++ return type: qualified or templated (`std::enable_if<...>::type`), or a builtin type
_RETURN_TYPE = re.compile(r"::|<|^((un)?signed |const )*(int|float|double|bool|char|long|short|auto|size_t)\b")


def _strip_trailers(text: str) -> str:
    """Drop what compilers and profilers append after the parameter list: ` const`, `[clone .kd]`, ROCm's `.kd`
    symbol suffix, in any order and number. From the end, one trailer at a time: linear, where an end-anchored
    regex rescans from every start (quadratic on ` const` x 20,000 + `x`)."""
    while True:
        if text.endswith("const") and len(text) > 5 and text[-6].isspace():
            text = text[:-5].rstrip()
        elif text.endswith(".kd"):
            text = text[:-3]
        elif text.endswith("]"):
            start = text.rfind("[clone ")
            if start < 0 or "]" in text[start:-1]:
                return text
            text = text[:start].rstrip()
        else:
            return text


@dataclass(frozen=True)
class KernelName:
    qualified: str  # namespaces and function name, without template arguments: `at::native::reduce_kernel`
    template_args: str  # the function's own template arguments, without the outer <>; "" when it has none

    @property
    def function(self) -> str:
        """The function's own name, without namespaces: `reduce_kernel`."""
        return _last_component(self.qualified)

    @property
    def key(self) -> str:
        """What the taxonomy matches on: the qualified name with its template arguments, no parameter list."""
        return f"{self.qualified}<{self.template_args}>" if self.template_args else self.qualified


def _matching_open(text: str, end: int) -> int:
    """Index of the bracket that opens the one closing at `end` (counting every bracket kind), or -1."""
    stack = []
    for i in range(end, -1, -1):
        ch = text[i]
        if ch in _CLOSE:
            # the `>` of `->` (Kineto's `Memcpy HtoD (Pageable -> Device)`) is no bracket; `operator>` is too rare
            # in kernel names to handle
            if ch == ">" and i > 0 and text[i - 1] == "-":
                continue
            stack.append(ch)
        elif ch in _OPEN and stack and _OPEN[ch] == stack[-1]:
            stack.pop()
            if not stack:
                return i
    return -1


def _top_level_split(text: str, sep: str) -> list[str]:
    """`text` split at `sep` where no bracket is open."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]" and not (ch == ">" and i > 0 and text[i - 1] == "-"):
            depth = max(depth - 1, 0)
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _last_component(qualified: str) -> str:
    return _top_level_split(qualified, "::")[-1]


def split_name(name: str) -> KernelName:
    """Qualified name and template arguments of a kernel name; the return type and parameter list are dropped.

    `void at::native::(anonymous namespace)::softmax_warp_forward<float, float, 8>(float*, float const*, int)` ->
    qualified `at::native::(anonymous namespace)::softmax_warp_forward`, template args `float, float, 8`.
    """
    text = " ".join(name.split())
    text = _strip_trailers(text)
    if text.startswith("void "):
        text = text[5:]
    # the parameter list: the bracket group that closes the name, when something precedes it
    signature = False
    if text.endswith(")"):
        start = _matching_open(text, len(text) - 1)
        if start > 0:
            text, signature = text[:start].rstrip(), True
    # a return type other than void (`std::enable_if<...>::type vllm::rms_norm_kernel<...>`): what precedes the
    # last space outside brackets, when it reads as a C++ type (`Memcpy HtoD` is a plain name and stays whole)
    if signature and " " in text:
        words = _top_level_split(text, " ")
        if len(words) > 1 and words[-1] and _RETURN_TYPE.search(" ".join(words[:-1])):
            text = words[-1]
    # the function's own template arguments: a <...> group that closes the remaining name
    if text.endswith(">"):
        start = _matching_open(text, len(text) - 1)
        if start > 0 and text[start] == "<":
            return KernelName(text[:start].rstrip(), text[start + 1 : -1].strip())
    return KernelName(text, "")


def key(name: str) -> str:
    """The part of a kernel name the taxonomy matches on (see `KernelName.key`)."""
    return split_name(name).key
