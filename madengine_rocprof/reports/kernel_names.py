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


# Only brackets (and separators) change the scans' state. The scans walk the list of those characters (found by a
# regex, in C) instead of every character of the name in Python: 5x faster on the long template names of real traces,
# where a trace of 1M distinct kernel names took most of its report time here.
_BRACKET_CHARS = r"<>(){}\[\]"
_BRACKETS = re.compile(f"[{_BRACKET_CHARS}]")
_OPENERS, _CLOSERS = r"[<({\[]", r"[>)}\]]"
_SPLIT_AT = {sep: re.compile(f"[{_BRACKET_CHARS}]|" + re.escape(sep)) for sep in (" ", "::")}


def _no_arrows(text: str) -> str:
    """`text` with the `>` of each `->` made a plain character (same length): Kineto's `Memcpy HtoD (Pageable ->
    Device)` has no bracket there. (`operator>` is too rare in kernel names to handle.)"""
    return text.replace("->", "-~") if "->" in text else text


def _balanced(depth: int, reverse: bool, same_kind: bool) -> str:
    """A regex for text whose brackets nest properly, at most `depth` deep: plain runs and whole groups.
    `reverse`: for reversed text (a group starts with its closer); `same_kind`: a group closes with its own kind (the
    stack of `_matching_open`), else with any closer (the depth count of `_top_level_split`)."""
    plain = f"[^{_BRACKET_CHARS}]++"
    if depth == 0:
        return f"(?:{plain})?+"
    inner = _balanced(depth - 1, reverse, same_kind)
    pairs = [(re.escape(o), re.escape(c)) for o, c in _OPEN.items()]
    if same_kind:
        groups = [f"{c}{inner}{o}" if reverse else f"{o}{inner}{c}" for o, c in pairs]
    else:
        groups = [f"{_CLOSERS}{inner}{_OPENERS}" if reverse else f"{_OPENERS}{inner}{_CLOSERS}"]
    return f"(?:{plain}|{'|'.join(groups)})*+"


# The usual name nests a few brackets deep, properly: a regex (possessive, so linear) finds the group that closes it
# or its top-level words in one C call; other names go the step-by-step way below, which gives the same answer.
_NEST = 4
_GROUP_BACKWARDS = {c: re.compile(re.escape(c) + _balanced(_NEST, True, True) + re.escape(o)) for o, c in _OPEN.items()}
# a word of `_top_level_split(text, " ")`: outside brackets a closer is a plain character (the depth stays 0)
_TOP_WORD = re.compile(r"(?:[^ <({\[]++|" + _OPENERS + _balanced(_NEST - 1, False, False) + _CLOSERS + ")*+")


def _last_top_level_space(text: str) -> int:
    """Index of the last space of `text` outside brackets, -1 when none (`_top_level_split(text, " ")`)."""
    scan, last, at = _no_arrows(text), -1, 0
    while True:
        word = _TOP_WORD.match(scan, at)  # always matches (maybe empty)
        at = word.end() if word else at
        if at == len(scan):
            return last
        if scan[at] != " ":  # nested deeper than the regex, or a group never closed: step by step
            words = _top_level_split(text, " ")
            return len(text) - len(words[-1]) - 1 if len(words) > 1 else -1
        last, at = at, at + 1


def _matching_open(text: str, end: int) -> int:
    """Index of the bracket that opens the one closing at `end` (counting every bracket kind), or -1."""
    scan = _no_arrows(text[: end + 1])
    group = _GROUP_BACKWARDS[scan[end]].match(scan[::-1]) if scan[end] in _CLOSE else None
    if group:
        return end + 1 - group.end()
    brackets = _BRACKETS.findall(scan)
    stack = []
    for back, ch in enumerate(reversed(brackets)):
        if ch in _CLOSE:
            stack.append(ch)
        elif stack and _OPEN[ch] == stack[-1]:
            stack.pop()
            if not stack:
                nth = len(brackets) - 1 - back  # the match is the nth bracket of `scan`: after nth + 1 plain runs
                return sum(map(len, _BRACKETS.split(scan, nth + 1)[: nth + 1])) + nth
    return -1


def _top_level_split(text: str, sep: str) -> list[str]:
    """`text` split at `sep` (" " or "::") where no bracket is open."""
    parts, depth, start = [], 0, 0
    scan = _no_arrows(text)
    for found in _SPLIT_AT[sep].finditer(scan):
        ch = found.group()
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth = max(depth - 1, 0)
        elif depth == 0:
            parts.append(text[start : found.start()])
            start = found.end()
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
        space = _last_top_level_space(text)  # the words before it, joined by spaces, are text[:space]
        if space >= 0 and space + 1 < len(text) and _RETURN_TYPE.search(text[:space]):
            text = text[space + 1 :]
    # the function's own template arguments: a <...> group that closes the remaining name
    if text.endswith(">"):
        start = _matching_open(text, len(text) - 1)
        if start > 0 and text[start] == "<":
            return KernelName(text[:start].rstrip(), text[start + 1 : -1].strip())
    return KernelName(text, "")


# a name with no bracket and no white space (Triton `triton_poi_fused_add_0`, `nvjet_*`, Tensile `Cijk_*`): no
# return type, parameter list or template arguments to take off, only a `.kd` suffix
_PLAIN_NAME = re.compile(r"[^\s<>(){}\[\]]*")


def key(name: str) -> str:
    """The part of a kernel name the taxonomy matches on (see `KernelName.key`)."""
    if _PLAIN_NAME.fullmatch(name):
        return _strip_trailers(name)
    return split_name(name).key
