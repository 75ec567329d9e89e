"""Counter files: strict parsing, checks against the real counter_defs.yaml, pass limits and packing."""
from __future__ import annotations

import itertools
import re
from collections import Counter

import pytest
import yaml

from madengine_rocprof.errors import UserError, UserErrors
from madengine_rocprof.models import parse_counter_text
from madengine_rocprof.registry import (
    BUILTIN_COUNTERS_DIR,
    block_limits,
    check_counters,
    list_counter_profiles,
    load_catalog,
    pack_counters,
    register_counter_profile,
)
from madengine_rocprof.registry.counter_defs import fallback_table

ARCHS = ["gfx90a", "gfx942", "gfx1100"]
SHIPPED = ["compute_bound", "memory_bound", "communication_bound", "full_profile", "instruction_mix"]


def parse(text):
    return parse_counter_text(text, "t", "t.txt")


@pytest.mark.parametrize("line, needle", [
    ("pmc : SQ_WAVES", "IGNORED"), ("PMC: SQ_WAVES", "IGNORED"), ("Pmc: SQ_WAVES", "IGNORED"),
    ("#pmc: SQ_WAVES", "EMPTY extra pass"), ("# pmc: SQ_WAVES", "EMPTY extra pass"),
    ("range: 1:2", "legacy"), ("SQ_WAVES", "not a 'pmc:' line"), ("pmc:", "no counters"),
    ("pmc: SQ_WAVES SQ_WAVES", "already listed"), ("pmc: SQ-WAVES", "not a counter name"),
])
def test_rejected_lines(line, needle):
    with pytest.raises(UserErrors) as e:
        parse(f"# ok\npmc: GRBM_COUNT\n{line}\n")
    [err] = e.value.errors
    assert needle in err.what and err.line == 3 and err.fix


def test_parse_headers_and_passes():
    profile, lines = parse("# description: d\n# architectures: gfx90a, gfx942\n\npmc: A B\npmc: C\n")
    assert profile.passes == [["A", "B"], ["C"]] and profile.architectures == ["gfx90a", "gfx942"]
    assert profile.counters_by_arch() == {"gfx90a": ["A", "B", "C"], "gfx942": ["A", "B", "C"]}
    assert lines == {"A": 4, "B": 4, "C": 5}
    assert parse(profile.to_text())[0].passes == profile.passes


def test_empty_file_rejected():
    with pytest.raises(UserErrors, match="no 'pmc:' lines"):
        parse("# nothing\n")


def independent_events(defs_yaml, counter, arch):
    """Hardware events of a counter, read straight from the YAML (independent of the catalog code)."""
    table = {}
    for entry in defs_yaml["rocprofiler-sdk"]["counters"]:
        for d in entry["definitions"]:
            if arch in d["architectures"]:
                table[entry["name"]] = d
    out, todo = set(), [counter]
    while todo:
        d = table[todo.pop()]
        if "block" in d:
            out.add((d["block"], d.get("event")))
        else:
            todo += [t for t in re.findall(r"\b[A-Za-z_]\w*\b", d["expression"]) if t in table]
    return out


@pytest.fixture(scope="module")
def defs_yaml(rocprof_fixtures):
    return yaml.safe_load((rocprof_fixtures / "counter_defs.yaml").read_text())


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("arch", ARCHS)
def test_shipped_files_valid_on_real_counter_defs(name, arch, real_catalog, defs_yaml):
    profile = next(p for p in list_counter_profiles() if p.name == name)
    assert arch in profile.architectures
    result = check_counters(profile, arch, real_catalog)
    limits = block_limits(arch)
    for group, usage in zip(profile.passes, result.usage, strict=True):
        events = set().union(*(independent_events(defs_yaml, c, arch) for c in group))
        per_block = Counter(b for b, _ in events)
        assert usage == dict(per_block)
        assert all(n <= limits.get(b, 2) for b, n in per_block.items())


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_files_use_fewest_passes(name, real_catalog):
    profile = next(p for p in list_counter_profiles() if p.name == name)
    text = (BUILTIN_COUNTERS_DIR / f"{name}.txt").read_text()
    assert not re.search(r"^\s*#.*pmc\s*:", text, re.M | re.I)
    assert len(pack_counters(real_catalog, profile.counters, profile.architectures)) == len(profile.passes)
    # and no single pass could absorb all counters: fewer passes is impossible
    if len(profile.passes) > 1:
        from madengine_rocprof.registry.counter_check import fits
        assert not fits(real_catalog, profile.counters, profile.architectures)


def test_fallback_table_matches_real_definitions(defs_yaml):
    for arch, table in fallback_table().items():
        for counter, events in table.items():
            real = {(b, _name(defs_yaml, b, e, arch)) for b, e in independent_events(defs_yaml, counter, arch)}
            assert set(events) == real, (arch, counter)


def _name(defs_yaml, block, event, arch):
    for entry in defs_yaml["rocprofiler-sdk"]["counters"]:
        for d in entry["definitions"]:
            if arch in d["architectures"] and d.get("block") == block and d.get("event") == event:
                return entry["name"]


def test_fallback_used_without_rocm_and_says_so():
    catalog = load_catalog()
    assert "built-in table" in catalog.source and not catalog.complete
    for p in list_counter_profiles():
        for arch in ARCHS:
            check_counters(p, arch, catalog)


def test_metrics_path_env_preferred(monkeypatch, counter_defs):
    monkeypatch.setenv("ROCPROFILER_METRICS_PATH", str(counter_defs.parent))
    assert load_catalog().source == str(counter_defs)


def test_unknown_counter_refused_with_closest(real_catalog):
    profile, lines = parse("pmc: SQ_WAVES\npmc: SQ_WAIT_INST_VALU\n")
    with pytest.raises(UserErrors) as e:
        check_counters(profile, "gfx90a", real_catalog, lines, "t.txt")
    [err] = e.value.errors
    assert "SQ_WAIT_INST_VALU" in err.what and err.line == 2 and "SQ_WAIT_INST_" in (err.fix or "")


def test_counter_missing_on_one_arch(real_catalog):
    profile, _ = parse("pmc: TCC_HIT_sum\n")
    check_counters(profile, "gfx90a", real_catalog)
    with pytest.raises(UserErrors, match="does not exist on gfx1100"):
        check_counters(profile, "gfx1100", real_catalog)


def test_too_many_counters_for_one_pass(real_catalog):
    # 9 SQ hardware counters: limit is 8 on gfx942.
    sq = ["SQ_WAVES", "SQ_WAVE_CYCLES", "SQ_BUSY_CYCLES", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_INSTS_SMEM",
          "SQ_INSTS_LDS", "SQ_INSTS_FLAT", "SQ_INSTS_GDS"]
    profile, _ = parse("pmc: " + " ".join(sq) + "\n")
    with pytest.raises(UserErrors) as e:
        check_counters(profile, "gfx942", real_catalog)
    assert "needs 9 SQ" in e.value.errors[0].what and "allows 8" in e.value.errors[0].what
    packed = pack_counters(real_catalog, sq, ["gfx942"])
    assert len(packed) == 2 and sorted(itertools.chain(*packed)) == sorted(sq)


def test_derived_counters_count_their_events(real_catalog):
    # FETCH_SIZE (3 TCC events on gfx942) + WRITE_SIZE (2) exceed TCC's 4 although only 2 names are listed.
    profile, _ = parse("pmc: FETCH_SIZE WRITE_SIZE\n")
    with pytest.raises(UserErrors, match="TCC"):
        check_counters(profile, "gfx942", real_catalog)
    check_counters(profile, "gfx90a", real_catalog)  # 2 + 2 TCC events fit there


def test_packing_is_minimal_on_small_sets(real_catalog):
    """Greedy packing equals the brute-force optimum on a mix of SQ/TCC/GRBM counters."""
    from madengine_rocprof.registry.counter_check import fits
    counters = ["FETCH_SIZE", "WRITE_SIZE", "TCC_HIT_sum", "TCC_MISS_sum", "GRBM_COUNT", "GPU_UTIL", "SQ_WAVES"]
    arch = ["gfx942"]
    greedy = pack_counters(real_catalog, counters, arch)
    assert all(fits(real_catalog, g, arch) for g in greedy)
    best = None
    for k in range(1, len(counters) + 1):
        for labels in itertools.product(range(k), repeat=len(counters)):
            groups = [[c for c, label in zip(counters, labels, strict=True) if label == i] for i in range(k)]
            if all(g and fits(real_catalog, g, arch) for g in groups):
                best = k
                break
        if best:
            break
    assert len(greedy) == best


def test_register_counter_profile(tmp_path, isolated_home, real_catalog):
    src = tmp_path / "mine.txt"
    src.write_text("# architectures: gfx90a\npmc: TCC_HIT_sum TCC_MISS_sum\n")
    stored = register_counter_profile(src, catalog=real_catalog)
    assert stored == isolated_home / "counters" / "mine.txt" and stored.read_text() == src.read_text()
    from madengine_rocprof.registry import get_counter_profile
    assert get_counter_profile("mine").counters == ["TCC_HIT_sum", "TCC_MISS_sum"]
    bad = tmp_path / "bad.txt"
    bad.write_text("# architectures: gfx1100\npmc: TCC_HIT_sum\n")
    with pytest.raises(UserErrors):
        register_counter_profile(bad, catalog=real_catalog)
    assert not (isolated_home / "counters" / "bad.txt").exists()


def test_unknown_arch(real_catalog):
    profile, _ = parse("pmc: SQ_WAVES\n")
    with pytest.raises(UserError, match="gfx9999"):
        check_counters(profile, "gfx9999", real_catalog)


@pytest.mark.parametrize("with_rocm", [True, False])
def test_a_misspelled_counter_gets_did_you_mean(real_catalog, monkeypatch, with_rocm):
    """SQ_INSTS_VALUU: before, without ROCm the fix only said to install ROCm, with no suggestion."""
    if not with_rocm:
        monkeypatch.delenv("ROCPROFILER_METRICS_PATH", raising=False)
        monkeypatch.setenv("ROCM_PATH", "/nonexistent")
    catalog = real_catalog if with_rocm else load_catalog()
    profile, lines = parse("pmc: SQ_WAVES SQ_INSTS_VALUU\n")
    with pytest.raises(UserErrors) as e:
        check_counters(profile, "gfx942", catalog, lines, "t.txt")
    [err] = e.value.errors
    assert "SQ_INSTS_VALUU" in err.what and "did you mean SQ_INSTS_VALU?" in (err.fix or "")


@pytest.mark.parametrize(
    "argv, guess",
    [
        (["validate", "rocprofv3_compute_bond"], "rocprofv3_compute_bound"),
        (["validate", "memory_bond.txt"], "memory_bound"),
        (["run", "--tags", "tiny_llama_v1", "--additional-context-file", "rocprofv3_lightweigth"],
         "rocprofv3_lightweight"),
        (["paths", "--config", "rocprofv3_lightweigth"], "rocprofv3_lightweight"),
    ],
)
def test_a_misspelled_shipped_config_name_gets_did_you_mean(argv, guess, capsys, tmp_path, monkeypatch):
    from madengine_rocprof.cli import main

    monkeypatch.chdir(tmp_path)  # nothing of that name here: the name means a shipped file
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert guess in err and "did you mean" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()
