"""Issue 25 item 3 for rocprofiler-sdk's counter_defs.yaml (`counters check --counter-defs`, `validate
--counter-defs`, $ROCPROFILER_METRICS_PATH): the one input kind the fuzz suite did not generate.

Seeds: a small file of the real file's shape, and the real file (tests/fixtures/rocprofv3/counter_defs.yaml) cut at
a random place. Contract: exit 0 or 2, never a traceback or the internal-error handler, never a hang (YAML aliases
can stand for billions of entries: refused); a refusal names the YAML file. Where the YAML still parses to the
seed's counters, the check's verdict is the seed's. Same profile (fixed seed, deadline) as test_reliability_fuzz.py.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .contract_helpers import REPO, assert_contract, cli, cli_subprocess
from .test_reliability_fuzz import FUZZ, _Home, _write, mutated_text

REAL = REPO / "tests" / "fixtures" / "rocprofv3" / "counter_defs.yaml"
SEED = """rocprofiler-sdk:
  counters-schema-version: 1
  counters:
  - name: SQ_WAVES
    description: 'Count number of waves sent to SQs.'
    properties: []
    definitions:
    - architectures:
      - gfx942
      - gfx90a
      block: SQ
      event: 4
  - name: GRBM_COUNT
    description: Tie High - Count Number of Clocks
    properties: []
    definitions:
    - architectures:
      - gfx942
      block: GRBM
      event: 0
  - name: WAVE_RATE
    description: 'Unit: waves per clock'
    properties: []
    definitions:
    - architectures:
      - gfx942
      expression: reduce(SQ_WAVES,sum)/reduce(GRBM_COUNT,max)
"""
COUNTERS = "pmc: SQ_WAVES GRBM_COUNT\n"


def _check(tmp: Path, defs: Path) -> tuple[int, str]:
    counters = _write(tmp / "counters.txt", COUNTERS)
    code, _, err = cli("counters", "check", counters, "--arch", "gfx942", "--counter-defs", defs)
    assert_contract(code, err, allowed=(0, 2))
    if code == 2:
        assert defs.name in err, err  # the counter file is valid: a refusal is about the definitions
    return code, err


@FUZZ
@given(text=mutated_text(SEED, re.compile(r"[A-Za-z0-9_]+")))
def test_fuzz_counter_defs(text):
    with _Home() as tmp:
        _check(tmp, _write(tmp / "counter_defs.yaml", text))


_REAL_TEXT = REAL.read_text()


@FUZZ
@given(cut=st.integers(0, len(_REAL_TEXT)), insert=st.sampled_from(["", "\x00", "- ", ": ", "*a", "&a ", "[", "\t",
                                                                     "'", "!!python/object:os.system ", "\ufeff"]))
def test_fuzz_real_counter_defs_cut_and_spliced(cut, insert):
    with _Home() as tmp:
        _check(tmp, _write(tmp / "counter_defs.yaml", _REAL_TEXT[:cut] + insert + _REAL_TEXT[cut:cut + 400]))


def test_the_seeds_pass(tmp_path):
    assert _check(tmp_path, _write(tmp_path / "seed.yaml", SEED))[0] == 0
    assert _check(tmp_path, REAL)[0] == 0


ALIAS_BOMB = """a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
rocprofiler-sdk:
  counters:
""" + "".join(f"""  - &e{i} {{name: C{i}, definitions: [{{architectures: *d, block: SQ}}]}}\n""" for i in range(3)) + \
    "".join(f"  - {{name: D{i}, definitions: [{{architectures: *d, expression: C0}}, *e0]}}\n" for i in range(300))


@pytest.mark.parametrize("label, text, place", [
    ("aliases standing for millions of entries", ALIAS_BOMB, ":2:"),
    ("nested deeper than the parser recurses", "rocprofiler-sdk: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ("counters a mapping", "rocprofiler-sdk:\n  counters: {a: 1}\n", "rocprofiler-sdk.counters"),
    ("an entry a string", "rocprofiler-sdk:\n  counters: [SQ_WAVES]\n", "counters[0]"),
    ("a name a number", "rocprofiler-sdk:\n  counters: [{name: 12}]\n", "counters[0].name"),
    ("a name missing", "rocprofiler-sdk:\n  counters: [{description: x}]\n", "'name' is missing"),
    ("architectures a string", "rocprofiler-sdk:\n  counters: [{name: A, definitions: [{architectures: gfx942}]}]\n",
     "architectures"),
    ("a block a list", "rocprofiler-sdk:\n  counters: [{name: A, definitions: [{architectures: [gfx942], "
                       "block: [SQ]}]}]\n", "block"),
    ("definitions a string", "rocprofiler-sdk:\n  counters: [{name: A, definitions: x}]\n", "definitions"),
    ("one counter defined twice, differently", "rocprofiler-sdk:\n  counters:\n"
     "  - {name: A, definitions: [{architectures: [gfx942], block: SQ}]}\n"
     "  - {name: A, definitions: [{architectures: [gfx942], block: TA}]}\n", "defined twice"),
    ("a name that is no identifier", "rocprofiler-sdk:\n  counters: [{name: 'A B', definitions: []}]\n",
     "identifier"),
    ("a python tag", "rocprofiler-sdk: !!python/object/apply:os.system ['true']\n", "counter_defs.yaml"),
    ("not UTF-8", "rocprofiler-sdk:\n  counters: [{name: A\udcff}]\n", "UTF-8"),
])
def test_counter_defs_found_by_fuzzing_are_exit_2(tmp_path, label, text, place):
    """Each of these was a traceback (TypeError, AttributeError, KeyError, RecursionError) or, for the aliases, a
    walk over billions of entries, before the definitions were typed (registry/counter_defs.py, SHAPE)."""
    defs = tmp_path / "counter_defs.yaml"
    defs.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    counters = _write(tmp_path / "counters.txt", COUNTERS)
    code, _, err = cli_subprocess("counters", "check", counters, "--arch", "gfx942", "--counter-defs", defs,
                                  timeout=60)
    assert_contract(code, err, allowed=(2,))
    assert "counter_defs.yaml" in err and place in err, (label, err)


def test_the_environment_s_counter_defs_is_checked_too(tmp_path):
    """$ROCPROFILER_METRICS_PATH goes through the same parser as --counter-defs."""
    defs = _write(tmp_path / "counter_defs.yaml", "rocprofiler-sdk:\n  counters: [SQ_WAVES]\n")
    counters = _write(tmp_path / "counters.txt", COUNTERS)
    old = os.environ.get("ROCPROFILER_METRICS_PATH")
    os.environ["ROCPROFILER_METRICS_PATH"] = str(defs)
    try:
        code, _, err = cli("counters", "check", counters, "--arch", "gfx942")
    finally:
        if old is None:
            os.environ.pop("ROCPROFILER_METRICS_PATH")
        else:
            os.environ["ROCPROFILER_METRICS_PATH"] = old
    assert_contract(code, err, allowed=(2,))
    assert "counter_defs.yaml" in err and "counters[0]" in err, err


@pytest.mark.parametrize("kind", ["symlink loop", "fifo", "directory", "dev/zero"])
def test_counter_defs_that_is_no_regular_file_is_exit_2(tmp_path, kind):
    """A symlink loop given as --counter-defs reached the internal-error handler (pathlib's RuntimeError)."""
    defs = tmp_path / "counter_defs.yaml"
    if kind == "symlink loop":
        defs.symlink_to(defs)
    elif kind == "fifo":
        os.mkfifo(defs)
    elif kind == "directory":
        defs.mkdir()
    else:
        defs.symlink_to("/dev/zero")
    counters = _write(tmp_path / "counters.txt", COUNTERS)
    code, _, err = cli_subprocess("counters", "check", counters, "--arch", "gfx942", "--counter-defs", defs,
                                  timeout=60)
    assert_contract(code, err, allowed=(2,))
    assert "counter_defs.yaml" in err, err
