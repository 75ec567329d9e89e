"""One identity for a kernel across the profilers' spellings of its name: the kernel filter of a second pass is
built from it, and the second pass's kernels are joined back to the first pass's by it.

The same kernel is spelled differently by CUPTI / rocprofv3 and by Nsight Compute (benchmarks/wrapper/README.md,
section 1; real pairs in tests/fixtures/gpu_runs/counts_*.json):
  CUPTI  `void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, ...)`
  ncu    `void <unnamed>::softmax_warp_forward<float, float, float, 10, 1, 0>(T2 *, const T1 *, ...)`
  CUPTI  `void at::native::elementwise_kernel<128, 2, ...{lambda(int)#1}>(int, ...)`
  ncu    `void at::elementwise_kernel<128, 2, ...[lambda(int) (instance 1)]>(int, T3)`
ncu drops some namespaces, writes `<unnamed>`, 1/0 for bools, `[lambda(int) (instance 1)]` for `{lambda(int)#1}` and
template parameters (`T1`) in parameter lists. What both keep: the function's own name and the identifiers and
numbers inside its template arguments. The key is exactly that: (function, set of argument tokens), with
qualifiers, bools, lambda words, `const`/`void` and `T<n>` normalised away. Parameters are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from madengine_rocprof.wrapper.rocprof_csv import truncate_name

_ANONYMOUS = re.compile(r"\(anonymous namespace\)::|<unnamed>::")
_QUALIFIER = re.compile(r"(?<!\w)[A-Za-z_]\w*::")  # from a word's start only: linear (each word scanned once)
_TOKEN = re.compile(r"\d+[uUlL]*|[A-Za-z_]\w*")
_NOISE = {"const", "volatile", "void", "lambda", "instance", "struct", "class", "enum", "typename"}
_TEMPLATE_PARAM = re.compile(r"T\d+")
_BOOLS = {"true": "1", "false": "0"}
_WORD = "A-Za-z0-9_"
_SPECIAL = set("\\^$.|?*+()[]{}")


@dataclass(frozen=True)
class KernelKey:
    function: str  # the bare function name: `Kernel2`, `sm80_xmma_gemm_..._cublas`, `Cijk_...`
    args: frozenset[str]  # normalised tokens of its template arguments (empty when it has none)
    arity: int = 0  # how many template arguments (tells `f<float>` from `f<float, float>`)


def _template_args(name: str, function: str) -> str:
    """The text inside the function's own `<...>`, '' when it has none."""
    text = _ANONYMOUS.sub("", name)
    found = re.search(r"(?:^|[\s:*&])" + re.escape(function) + r"\s*<", text)
    if not found:
        return ""
    start = found.end() - 1
    depth = 0
    for i in range(start, len(text)):
        depth += {"<": 1, ">": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1 : i]
    return text[start + 1 :]


def _normal_token(token: str) -> str | None:
    token = _BOOLS.get(token, token)
    if token[0].isdigit():
        return token.rstrip("uUlL")
    if token in _NOISE or _TEMPLATE_PARAM.fullmatch(token):
        return None
    return token


def _arity(args: str) -> int:
    """Top-level template arguments: commas outside any bracket, plus one."""
    if not args.strip():
        return 0
    depth, commas = 0, 0
    for c in args:
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0:
            commas += 1
    return commas + 1


def kernel_key(name: str) -> KernelKey:
    function = truncate_name(name)
    args = _template_args(name, function)
    tokens = {_normal_token(t) for t in _TOKEN.findall(_QUALIFIER.sub("", args))}
    return KernelKey(function, frozenset(t for t in tokens if t), _arity(args))


# ---- the kernel filter ------------------------------------------------------------------------------------------


def regex_literal(text: str) -> str:
    """The text as a regular expression matching itself in std::regex (rocprofv3), ncu and Python: only the
    metacharacters every flavour shares are escaped."""
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def _token_regex(token: str) -> str:
    """A token as a whole word of a name in any spelling: numbers with an integer suffix, 0/1 also as false/true."""
    if token.isdigit():
        spelled = {"0": "(?:0|false)", "1": "(?:1|true)"}.get(token, token)
        return f"(?=.*[^{_WORD}]{spelled}[uUlL]*(?:[^{_WORD}]|$))"
    return f"(?=.*[^{_WORD}]{token}(?:[^{_WORD}]|$))"


def _separating_tokens(key: KernelKey, peers: list[KernelKey]) -> list[str]:
    """Few of the key's tokens that together rule out as many peers (same function, other arguments) as can be:
    each peer lacks at least one of them. Greedy; names (not numbers) and longer tokens first on ties."""
    left = [p for p in peers if p != key]
    chosen: list[str] = []
    while left:
        best = max(
            sorted(key.args),
            key=lambda t: (sum(t not in p.args for p in left), not t.isdigit(), len(t)),
            default=None,
        )
        if best is None or all(best in p.args for p in left):
            break  # the rest have every token of this kernel: the join tells them apart
        chosen.append(best)
        left = [p for p in left if best in p.args]
    return chosen


def filter_regex(targets: list[str], first_pass: Iterable[str]) -> str:
    """The profiler kernel filter (ncu `--kernel-name regex:` on demangled names; rocprofv3 `--kernel-include-regex`,
    std::regex_search on its own names) selecting the targets in either spelling: per target its function name as
    a whole identifier, plus lookaheads for the template-argument tokens that set it apart from the first pass's
    other instantiations of that function. Portable: only escapes, classes, groups, `^`/`$` and lookaheads."""
    keys = [kernel_key(n) for n in dict.fromkeys(first_pass)]
    alternatives = []
    for name in targets:
        key = kernel_key(name)
        peers = [k for k in keys if k.function == key.function]
        part = f"(?:^|[ :]){regex_literal(key.function)}(?=[<( ]|$)"
        part += "".join(_token_regex(t) for t in _separating_tokens(key, peers))
        alternatives.append(part)
    return "|".join(dict.fromkeys(alternatives))


# ---- the join ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    kernel: str | None  # the first-pass name, None when no single one fits
    how: str  # exact | key | function | ambiguous | absent
    candidates: tuple[str, ...] = ()


def match_name(name: str, first_pass: Iterable[str]) -> Match:
    """Which first-pass kernel a second-pass name is: the same name; else the one with the same key; else the only
    first-pass kernel of that function (reported as a function-only join). Several -> ambiguous, never a guess."""
    names = list(dict.fromkeys(first_pass))
    if name in names:
        return Match(name, "exact")
    key = kernel_key(name)
    same = [n for n in names if kernel_key(n) == key]
    if len(same) == 1:
        return Match(same[0], "key")
    if same:
        return Match(None, "ambiguous", tuple(same))
    function = [n for n in names if kernel_key(n).function == key.function]
    if len(function) == 1:
        return Match(function[0], "function")
    return Match(None, "ambiguous" if function else "absent", tuple(function))
