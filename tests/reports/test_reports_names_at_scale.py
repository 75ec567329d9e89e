"""Per-kernel-name work at scale: a trace of many distinct kernel names (Triton autotuning, templated kernels) is
classified a pattern at a time over the column of names, each name once, with the same answers as the per-name path.

The costs are checked by counting calls (a spy on the per-name classifier, on the patterns' `search`), never by
timing: the report of 1M distinct names took minutes when each name ran ~75 Python regexes, 2-3 times over."""

from __future__ import annotations

import csv
import functools
import gzip
import io
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from madengine_rocprof.cli import main
from madengine_rocprof.reports import categories, json_indented, kernel_names
from madengine_rocprof.reports.rule_columns import OrderedPatterns, column_pattern

from ..insights.insights_builders import HEADER_7
from .test_reports_categories import builtin_rules_only  # noqa: F401 (autouse: the built-in rules, no user file)

REPO = Path(__file__).resolve().parents[2]
FIXTURE_NAMES = REPO / "tests" / "fixtures" / "kernel_names"


def _fixture_names() -> list[str]:
    """Every real kernel and operator name the fixtures hold (HTA, TraceLens, rocprofv3 traces, CPU operators)."""
    names: set[str] = set()

    def walk(value):
        if isinstance(value, str):
            names.add(value)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)

    for path in sorted(FIXTURE_NAMES.glob("*.json*")):
        with (gzip.open(path, "rt") if path.suffix == ".gz" else open(path)) as fh:
            data = json.load(fh)
        walk(data.get("traces", data.get("sources")))
    assert len(names) > 1000
    return sorted(names)


# variants that sit on the edges where the column engine and Python's `re` could part: lookarounds the column
# engine drops (`fbgemm`, `normal`, `flashinfer::norm`, `winograd`), word boundaries, non-ASCII and line breaks
EDGES = [
    "fbgemm_gpu::gemm_kernel", "void fb_gemm<int>(int)", "normal_kernel", "layer_norm_kernel", "layernormal",
    "flashinfer::norm::RMSNormKernel", "flashinfer::attention", "winograd_grad", "conv_bw", "conv_bwd", "xbw",
    "triton_poi_fused_elu_0", "triton_poi_fused_relu_0", "triton_poi_fused_gelu_elu_1", "sage_fwd", "passage_fwd",
    "all_reduce", "tall_reduce", "adam_step", "madam_step", "fill_kernel", "refill_kernel", "concat_kernel",
    "xcat_kernel", "gemm\u00e9_kernel", "\u0130nstance_norm", "norm\nal", "nccl\nKernel", "MmBackward0",
    "autograd::engine::evaluate_function: AddmmBackward0", "Memcpy HtoD (Pageable -> Device)", "", "  ",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN", "x" * 20_000,
]


def _slow_path(name: str) -> categories.KernelClass:
    return categories._classify_one.__wrapped__(name)


def test_classify_many_agrees_with_the_per_name_path_on_every_fixture_name_and_edge():
    names = _fixture_names() + EDGES
    names += [n + suffix for n in names[:3000] for suffix in ("_7", "\u00e4")]  # counters, a non-ASCII letter
    categories.clear_cache()
    many = categories.classify_many(names)
    assert many == [_slow_path(n) for n in names]
    assert {c.category for c in many} >= set(categories.CATEGORIES) - {"unknown"}  # every rule family reached
    # the classes are shared: a few hundred distinct ones for thousands of names
    assert len({id(c) for c in many}) == len(set(many)) < len(names) / 10


def test_classify_many_takes_the_user_rules_first(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"match": "^my_fused", "category": "GEMM", "role": "fused MLP"}]}))
    categories.configure(rules)
    names = ["my_fused_mlp_3", "my_fused_norm", "layer_norm_kernel", "other"]
    assert categories.classify_many(names) == [_slow_path(n) for n in names]
    assert [c.role for c in categories.classify_many(names)][:2] == ["fused MLP", "fused MLP"]


class _CountingPattern:
    """An re.Pattern that counts its per-text searches."""

    def __init__(self, pattern: str) -> None:
        self._re = re.compile(pattern)
        self.pattern, self.flags, self.searches = pattern, self._re.flags, 0

    def search(self, text):
        self.searches += 1
        return self._re.search(text)


def test_patterns_run_as_columns_python_only_confirms_lookaround_candidates():
    names = [f"triton_poi_fused_add_mul_{i}" for i in range(100_000)]
    names += [f"nvjet_tst_{i}x64_h_bz_NTT" for i in range(50_000)]
    names += [f"fbgemm_{i}" for i in range(25_000)] + [f"gemm_{i}" for i in range(25_000)]
    exact = _CountingPattern(r"^triton_poi_")
    lookaround = _CountingPattern(r"(?<!fb)gemm")
    plain = _CountingPattern(r"nvjet")
    found = OrderedPatterns([exact, lookaround, plain]).first_matches(names)  # type: ignore[list-item]
    assert found == [0] * 100_000 + [2] * 50_000 + [-1] * 25_000 + [1] * 25_000
    # one pass per pattern over 200k names: no per-name search for exact patterns, and the lookaround one only for the
    # 50k names its superset (`gemm`) took
    assert (exact.searches, plain.searches) == (0, 0)
    assert lookaround.searches == 50_000


def test_lower_casing_in_the_column_is_pythons_lower():
    pattern = _CountingPattern(r"^nvjet|\u0131|i\u0307")
    texts = ["NVJET_x", "nvJet", "I", "\u0130x", "xnvjet"]  # the Turkish dotted capital I lower-cases to 2 characters
    assert OrderedPatterns([pattern]).first_matches(texts, lower=True) == [  # type: ignore[list-item]
        0 if pattern._re.search(t.lower()) else -1 for t in texts] == [0, 0, -1, 0, -1]


def test_text_the_column_engine_could_read_differently_goes_to_python():
    pattern = _CountingPattern(r"\bnorm\b")
    texts = ["a norm b", "\u00e9norm", "x\nnorm", "normal"]
    assert OrderedPatterns([pattern]).first_matches(texts) == [0, -1, 0, -1]  # type: ignore[list-item]
    assert pattern.searches == 2  # the non-ASCII text and the one with a line break


def test_column_pattern_drops_lookarounds_and_spells_classes_in_ascii():
    assert column_pattern(r"(?<![a-z])adam|x") == ("adam|x", False)
    assert column_pattern(r"flash(?!infer::(norm|gemm))") == ("flash", False)
    assert column_pattern(r"\bmm\b|[\w.]\d") == (r"(?-u:\b)mm(?-u:\b)|[0-9A-Za-z_.][0-9]", True)
    assert column_pattern(r"a\(b[(?!]c") == (r"a\(b[(?!]c", True)  # escaped and in-class brackets stay
    # every built-in pattern is usable by the column engine (a syntax polars refuses would raise here)
    for patterns in (categories._RULE_PATTERNS, categories._LIBRARY_PATTERNS):
        assert len(patterns.first_matches(["a", "b"])) == 2


def _report_trace(path: Path, names: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(HEADER_7)
        t = 1_000_000
        for i, name in enumerate(names, start=1):
            writer.writerow(["KERNEL_DISPATCH", "Agent 4", 1, 1, 7, i, i, name, i, t, t + 1_000 + i % 7])
            t += 2_000


def test_a_report_classifies_each_distinct_name_once_as_columns(tmp_path, monkeypatch):
    stems = ["triton_poi_fused_add_mul_{}", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT_{}",
             "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
             "std::array<char*, {}ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
             "ncclDevKernel_AllReduce_Sum_f32_RING_LL_{}(ncclDevKernelArgsStorage<4096ul>)"]
    names = [stems[i % 4].format(i) for i in range(4_000)]
    _report_trace(tmp_path / "run" / "node" / "7_kernel_trace.csv", names + names[:100])
    categories.clear_cache()
    per_name, keys, passes = [], [], []
    real_key, real_first = categories.match_key, OrderedPatterns.first_matches

    @functools.lru_cache(maxsize=0)  # a cache_clear, as the real one has
    def per_name_spy(name):
        per_name.append(name)
        return _slow_path(name)

    def key_spy(name):
        keys.append(name)
        return real_key(name)

    def passes_spy(self, texts, lower=False):
        passes.append(len(texts))
        return real_first(self, texts, lower)

    monkeypatch.setattr(categories, "_classify_one", per_name_spy)
    monkeypatch.setattr(categories, "match_key", key_spy)
    monkeypatch.setattr(OrderedPatterns, "first_matches", passes_spy)
    assert main(["report", str(tmp_path / "run"), "--json", str(tmp_path / "r.json"), "-q"]) == 0
    assert per_name == []  # no name went the per-name way
    assert sorted(keys) == sorted(names)  # each distinct name split once
    assert passes == [4_000, 4_000]  # the library patterns and the rules, once each, over all names
    rows = json.loads((tmp_path / "r.json").read_text())["runs"][0]["kernels"]
    assert len(rows) == 4_000  # the JSON still lists every kernel
    monkeypatch.undo()
    for row in rows:
        expected = _slow_path(row["name"])
        assert (row["category"], row["role"], row["library"]) == (expected.category, expected.role, expected.library)


# ---- kernel_names: the bracket scans, against the character-by-character reference -----------------------------
def _reference_matching_open(text: str, end: int) -> int:
    pairs = {"<": ">", "(": ")", "{": "}", "[": "]"}
    stack = []
    for i in range(end, -1, -1):
        ch = text[i]
        if ch in pairs.values():
            if ch == ">" and i > 0 and text[i - 1] == "-":
                continue
            stack.append(ch)
        elif ch in pairs and stack and pairs[ch] == stack[-1]:
            stack.pop()
            if not stack:
                return i
    return -1


def _reference_top_level_split(text: str, sep: str) -> list[str]:
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


def _check_scans(text: str) -> None:
    for end in range(len(text)):
        if text[end] in ">)}]":
            assert kernel_names._matching_open(text, end) == _reference_matching_open(text, end), (text, end)
    for sep in (" ", "::"):
        assert kernel_names._top_level_split(text, sep) == _reference_top_level_split(text, sep), text
    words = _reference_top_level_split(text, " ")
    expected = len(text) - len(words[-1]) - 1 if len(words) > 1 else -1
    assert kernel_names._last_top_level_space(text) == expected, text


def test_bracket_scans_match_the_reference_on_fixture_names():
    for name in _fixture_names()[:3000] + EDGES[:-1]:
        _check_scans(" ".join(name.split()))


def _nested(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["a", " ", "::", "->", "int", "-", "x y", ""])
    if depth == 0:
        return leaf
    inner = _nested(depth - 1)
    group = st.tuples(st.sampled_from(["<>", "()", "{}", "[]", "<)", "(]"]), st.lists(inner, max_size=3)).map(
        lambda t: t[0][0] + "".join(t[1]) + t[0][1])
    return st.lists(st.one_of(leaf, group), max_size=4).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_nested(6), st.text(alphabet="<>(){}[]: -ab", max_size=40)))
def test_bracket_scans_match_the_reference_on_nested_and_broken_names(text):
    """Deeper than the regex's nesting (6 > 4: the step-by-step fallback) and mismatched brackets included."""
    _check_scans(text)


# ---- json_indented: json.dump(indent=1) byte for byte --------------------------------------------------------
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(max_size=8))
_ROW_KEYS = ["name", "category", "calls", "share"]
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=4), children, max_size=4),
        st.lists(st.fixed_dictionaries({k: _SCALARS for k in _ROW_KEYS}), min_size=1, max_size=6),  # kernel rows
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_json_text_is_json_dump_indent_1_byte_for_byte(value):
    out = io.StringIO()
    json_indented.dump(value, out)
    assert out.getvalue() == json.dumps(value, indent=1, default=str, allow_nan=False)


def test_json_text_in_row_batches_non_string_keys_and_refused_floats(monkeypatch):
    monkeypatch.setattr(json_indented, "_ROWS_AT_ONCE", 3)  # rows split over batches, one batch mixed
    value = {"rows": [{"a": i, "b": f"n{{}}{i}\u00e9", "c": i / 3} for i in range(7)] + [{"a": [1]}, {}],
             1: {2.5: None, True: Path("/x")}, "t": (1, 2)}
    out = io.StringIO()
    json_indented.dump(value, out)
    assert out.getvalue() == json.dumps(value, indent=1, default=str, allow_nan=False)
    for bad in ([{"a": math.nan}] * 3, {"x": math.inf}):
        with pytest.raises(ValueError, match="Out of range float"):
            json_indented.dump(bad, io.StringIO())


def test_json_text_is_written_in_pieces_of_about_a_mebibyte():
    """A report listing 1M kernels is ~500 MB of JSON: never held whole (it doubled the report's peak memory)."""
    value = {"kernels": [{"name": f"triton_poi_fused_{i}" * 4, "calls": i, "share": i / 7} for i in range(40_000)]}
    writes: list[int] = []
    text: list[str] = []

    class Sink:
        def write(self, piece: str) -> None:
            writes.append(len(piece))
            text.append(piece)

    json_indented.dump(value, Sink())  # type: ignore[arg-type]
    assert "".join(text) == json.dumps(value, indent=1, default=str, allow_nan=False)
    assert sum(writes) > 5 * 2**20 and len(writes) > 4 and max(writes) < 2 * 2**20
