"""The kernel key, filter and join against real kernel names: CUPTI's spellings from the H100/H200 TinyTransformer
runs, and CUPTI/ncu spellings of the same kernels (one short run profiled by both, with equal dispatch counts per
kernel): real GPU outputs kept in tests/fixtures/gpu_runs (PROVENANCE.md there)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from madengine_rocprof.insights import escalate as esc
from madengine_rocprof.insights.kernel_match import Match, filter_regex, kernel_key, match_name

REPO = Path(__file__).resolve().parents[2]
GPU_RUNS = REPO / "tests/fixtures/gpu_runs"
COUNTS = [GPU_RUNS / name for name in ("counts_h200_cupti1.json", "counts_h100_run2.json")]
TT_RESULTS = [GPU_RUNS / f"tinytransformer_{d}.json" for d in ("h100", "h200")]
H200_TOPS = GPU_RUNS / "escalation_h200_run2.json"


def ncu_wrapped(include: str) -> str:
    """The wrapper's ncu pattern around an include filter (wrapper/nvidia.py ncu_argv)."""
    return f"^(?=.*(?:{include}))"


def spelling_pairs(path: Path) -> list[tuple[str, str, int]]:
    """(CUPTI name, ncu name, dispatches) of the kernels both profilers saw but spelled differently: each side's
    differing names, paired by the same function name and equal count where that pairs them one to one."""
    diff = json.loads(path.read_text())["differences"]
    cupti = {n: v["a"] for n, v in diff.items() if v["a"] and not v["b"]}
    ncu = {n: v["b"] for n, v in diff.items() if v["b"] and not v["a"]}
    assert len(cupti) == len(ncu) == 20
    return [(c, n, cupti[c]) for c in cupti for n in ncu if kernel_key(c) == kernel_key(n) and cupti[c] == ncu[n]]


def first_passes() -> list[list[str]]:
    """The kernel names of each real TinyTransformer run (CUPTI's spelling), per device, config and version."""
    runs = []
    for path in TT_RESULTS:
        for entry in json.loads(path.read_text())["results"].values():
            seen = ((entry.get("result") or {}).get("validation") or {}).get("kernels", {}).get("gpu_kernels_seen")
            if seen:
                runs.append(list(dict.fromkeys(seen)))
    assert len(runs) >= 8
    return runs


@pytest.mark.parametrize("path", COUNTS, ids=lambda p: p.parent.name)
def test_cupti_and_ncu_spellings_of_the_same_kernel_share_one_key(path):
    pairs = spelling_pairs(path)
    # every differing CUPTI name pairs with exactly one ncu name (20 kernels, 20 pairs, no name used twice)
    assert len(pairs) == 20
    assert len({c for c, _, _ in pairs}) == len({n for _, n, _ in pairs}) == 20
    cupti_names = [c for c, _, _ in pairs]
    for cupti, ncu, _ in pairs:
        assert cupti != ncu
        assert match_name(ncu, cupti_names) == esc.match_name(ncu, cupti_names)  # the join uses this matcher
        found = match_name(ncu, cupti_names)
        assert (found.kernel, found.how) == (cupti, "key")


@pytest.mark.parametrize("path", COUNTS, ids=lambda p: p.parent.name)
def test_filter_built_from_cupti_names_selects_the_ncu_spelling_and_no_other_instantiation(path):
    pairs = spelling_pairs(path)
    cupti_names = [c for c, _, _ in pairs]
    ncu_names = [n for _, n, _ in pairs]
    for cupti, ncu, _ in pairs:
        pattern = ncu_wrapped(filter_regex([cupti], cupti_names))
        assert re.search(pattern, ncu), (cupti, pattern)
        assert re.search(filter_regex([cupti], cupti_names), cupti)  # rocprofv3 spelling = the first pass's
        wrong = [n for n in ncu_names if n != ncu and re.search(pattern, n)]
        assert wrong == [], (cupti, wrong)


def test_real_first_passes_give_every_kernel_its_own_key_and_a_filter_that_selects_it():
    for names in first_passes():
        keys = [kernel_key(n) for n in names]
        assert len(set(keys)) == len(names)  # no two real kernels merge
        for name in names:
            assert match_name(name, names).how == "exact"
            pattern = filter_regex([name], names)
            selected = [n for n in names if re.search(pattern, n)]
            assert name in selected
            # anything else it selects is an instantiation of the same function whose argument tokens include all
            # of this one's (no token can rule it out); the join still tells them apart by their keys
            for other in selected:
                if other != name:
                    assert kernel_key(other).function == kernel_key(name).function, (name, other)
                    assert kernel_key(name).args < kernel_key(other).args, (name, other)


def test_h200_top_kernels_cutlass_instantiations_are_told_apart():
    """The five top kernels of the H200 check (2 cuBLAS xmma GEMMs, 3 instantiations of cutlass::Kernel2): one
    filter alternative each, matching the name as CUPTI wrote it and in ncu's parameter form `(T1::Params)`."""
    tops = [k["name"] for k in json.loads(H200_TOPS.read_text())["kernels"]]
    cutlass = [t for t in tops if "Kernel2<" in t]
    assert len(cutlass) == 3 and {kernel_key(t).function for t in cutlass} == {"Kernel2"}
    small = "cutlass_80_simt_sgemm_128x64_8x5_nt_align1"  # a real instantiation that is not a top kernel
    other_cutlass = f"void cutlass::Kernel2<{small}>({small}::Params)"
    pattern = filter_regex(tops, tops + [other_cutlass])
    for top in tops:
        ncu = re.sub(r"\((cutlass_80_\w+)::Params\)$", "(T1::Params)", top)
        assert re.search(ncu_wrapped(pattern), ncu) and re.search(pattern, top)
        found = match_name(ncu, tops + [other_cutlass])
        assert found.kernel == top and found.how == ("exact" if ncu == top else "key")
    assert not re.search(pattern, other_cutlass)
    assert not re.search(
        pattern, other_cutlass.replace("(cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)", "(T1::Params)")
    )


def test_an_ambiguous_name_is_reported_with_its_candidates_not_assigned():
    # two first-pass kernels that differ only by namespace: ncu's spelling (namespaces dropped) fits both
    a = "void ns_a::scale_kernel<float, 4>(float*, int)"
    b = "void ns_b::scale_kernel<float, 4>(float*, int)"
    found = match_name("void scale_kernel<float, 4>(T1 *, int)", [a, b, "other_kernel"])
    assert (found.kernel, found.how, found.candidates) == (None, "ambiguous", (a, b))
    # instantiations that differ in arguments the name keeps are told apart
    c = "void ns_a::scale_kernel<float, 8>(float*, int)"
    assert match_name("void scale_kernel<float, 8>(T1 *, int)", [a, c]).kernel == c
    # a name the first pass never had
    assert match_name("void unseen_kernel<float>(T1 *)", [a, c]) == Match(None, "absent")


def test_a_truncated_first_pass_joins_by_function_name_and_says_so():
    # a first pass made with rocprofv3 -T keeps only `Kernel2`; the second pass writes full names
    found = match_name(
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)", ["Kernel2", "other"]
    )
    assert (found.kernel, found.how) == ("Kernel2", "function")
    # and its filter (the bare function name) still selects the full names
    assert re.search(filter_regex(["Kernel2"], ["Kernel2", "other"]), "void cutlass::Kernel2<x>(T1::Params)")


def test_filter_tokens_match_bools_and_integer_suffixes_in_either_spelling():
    first = [
        "void k<float, 10, true>(float*)",
        "void k<float, 10, false>(float*)",
        "void k<float, 4096ul, true>(float*)",
    ]
    for name, ncu in zip(
        first, ["void k<float, 10, 1>(T1 *)", "void k<float, 10, 0>(T1 *)", "void k<float, 4096, 1>(T1 *)"], strict=True
    ):
        pattern = filter_regex([name], first)
        assert [n for n in first if re.search(pattern, n)] == [name]
        assert re.search(pattern, ncu)


def test_launch_budget_counts_the_other_instantiations_the_filter_selects():
    # 2 targets of 30 and 10 calls; the filter also selects 60 calls of a non-target instantiation: the rarest
    # target gets its 5 launches after 5 x (30 + 10 + 60) / 10 matching launches
    assert esc.launch_budget([30, 10], 5, others=60) == 50
    assert esc.launch_budget([30, 10], 5) == 20


def test_argument_count_tells_apart_instantiations_with_the_same_tokens():
    one, two = "void k<float>(float*)", "void k<float, float>(float*, float*)"
    assert kernel_key(one) != kernel_key(two)
    assert match_name("void k<float, float>(T1 *, T2 *)", [one, two]).kernel == two
    assert match_name("void k<float>(T1 *)", [one, two]).kernel == one


RUN3 = GPU_RUNS / "escalate_h200_run3"


def test_real_ncu_names_of_the_h200_check_are_selected_and_joined_to_their_top_kernels():
    """The H200 escalate check (run 3): the filter the plan sent to the real ncu 2025.3.1 and ncu's
    own spellings of the launches it profiled (--print-kernel-base demangled / function)."""
    plan = json.loads((RUN3 / "escalation_plan.json").read_text())
    tops = [t["name"] for t in plan["targets"]]
    [step] = plan["passes"]
    pattern = ncu_wrapped(step["kernel_include_regex"])
    demangled = (RUN3 / "ncu_names_demangled.txt").read_text().splitlines()
    functions = (RUN3 / "ncu_names_function.txt").read_text().splitlines()
    assert len(demangled) == 5 and any(n.endswith("(T1::Params)") for n in demangled)
    for name in demangled:
        assert re.search(pattern, name)
        found = match_name(name, tops)
        assert found.kernel in tops and found.how in ("exact", "key")
        assert kernel_key(name).function in functions  # ncu's function base is the key's function
    assert sorted(str(match_name(n, tops).kernel) for n in demangled) == sorted(tops)  # one each, none twice
    # and the three Kernel2 instantiations cannot be told apart by ncu's function base alone
    assert functions.count("Kernel2") == 1


def _kernel_names(csv_path: Path) -> list[str]:
    import csv

    with open(csv_path, newline="") as fh:
        return list(dict.fromkeys(row["Kernel_Name"] for row in csv.DictReader(fh)))


def test_real_rocprofv3_names_full_and_truncated():
    """rocprofv3's own names (tests/fixtures/rocprofv3/docs-data: the same run with and without -T). rocprofv3 runs
    std::regex_search on its formatted (possibly truncated) name: the filter selects each kernel either way, and a
    truncated first pass joins the full second-pass names by function name, marked as such."""
    data = REPO / "tests/fixtures/rocprofv3/docs-data"
    full, truncated = _kernel_names(data / "kernel_trace.csv"), _kernel_names(data / "kernel_trace_truncated.csv")
    assert len(full) == len(truncated) == 4
    for name in full:
        pattern = filter_regex([name], full)
        assert [n for n in full if re.search(pattern, n)] == [name]
        [short] = [t for t in truncated if re.search(pattern, t)]
        # a template instantiation's arguments are gone from the truncated name: joined by function, and said so
        assert match_name(name, truncated) == Match(short, "function" if kernel_key(name).args else "key")
        assert match_name(name, full) == Match(name, "exact")


def test_plan_lists_and_budgets_an_instantiation_the_filter_cannot_rule_out(tmp_path):
    """Two real ATen kernels (H200 v1 trace) whose argument tokens nest: the pow lambda #2 instantiation has no
    token the #1 one lacks, so escalating #2 also selects #1; the plan names it and the launch budget counts it."""
    seen = json.loads(TT_RESULTS[1].read_text())["results"]["B8_S128/v1"]["result"]["validation"]["kernels"]
    pow1, pow2 = sorted(n for n in seen["gpu_kernels_seen"] if "pow_tensor_scalar_kernel_impl" in n)
    assert "{lambda(float)#1}" in pow1 and "{lambda(float)#2}" in pow2
    assert kernel_key(pow2).args < kernel_key(pow1).args
    run = tmp_path / "first"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"model": "m", "context": {"tools": []}, "card": {"args": ""}}))
    target = esc.Target(pow2, "elementwise", "elementwise", 40, 4_000.0, 0.5, "memory_bound")
    plan = esc.plan_second_pass(run, [target], {pow2: 40, pow1: 120}, launches_per_kernel=5)
    [step] = plan["passes"]
    assert step["kernels"] == [pow2] and step["also_selected"] == [pow1]
    assert re.search(step["kernel_include_regex"], pow1)
    # the rarest chosen kernel gets its 5 launches after 5 x (40 + 120) / 40 matching ones
    assert step["env"][esc.ENV_LAUNCH_COUNT] == "20"
    assert match_name(pow1, [pow1, pow2]).kernel == pow1  # the join still tells them apart
