"""Issue 33, classes 4 and 7: one rule for every numeric option (cli/options.py over inputs.number), checked while
the command line is parsed: a bad value exits 2 before any input is read or any workload runs."""
from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from madengine_rocprof import inputs
from madengine_rocprof.cli import build_parser
from madengine_rocprof.cli import main as cli_main

from ..insights.insights_builders import write_run


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield parser.prog, action


def test_no_numeric_option_bypasses_the_rule():
    plain = [(prog, a.option_strings) for prog, a in _actions(build_parser()) if a.type in (int, float)]
    assert plain == []  # every numeric option goes through cli/options.number_option


BAD = ["nan", "NaN", "inf", "-inf", "1e400", "1_000", "٣", " ", "0x10", "1e", "--1", "1.5.2"]
CASES = [
    (["escalate", "{run}", "--timeout", "nan", "--dry-run"], "--timeout"),
    (["escalate", "{run}", "--timeout", "-1"], "--timeout"),
    (["escalate", "{run}", "--peak-tflops", "nan"], "--peak-tflops"),
    (["escalate", "{run}", "--peak-bandwidth", "0"], "--peak-bandwidth"),
    (["escalate", "{run}", "--peak-bandwidth", "-1"], "--peak-bandwidth"),
    (["escalate", "{run}", "--dry-run", "--top", "0"], "--top"),
    (["run", "--tags", "m", "--escalate", "--peak-tflops", "nan", "--output-dir", "{out}"], "--peak-tflops"),
    (["run", "--tags", "m", "--escalate", "--peak-bandwidth", "0", "--output-dir", "{out}"], "--peak-bandwidth"),
    (["run", "--tags", "m", "--escalate", "--escalate-top", "-2", "--output-dir", "{out}"], "--escalate-top"),
    (["report", "{run}", "--name-width", "0"], "--name-width"),
    (["report", "{run}", "--name-width", "-5"], "--name-width"),
    (["compare", "{run}", "{run}", "--name-width", "0"], "--name-width"),
    (["compare", "{run}", "{run}", "--threshold", "nan"], "--threshold"),
    (["compare", "{run}", "{run}", "--top", "2.5"], "--top"),
]


@pytest.mark.parametrize(("argv", "option"), CASES)
def test_a_bad_number_exits_2_before_anything_runs(tmp_path, capsys, argv, option):
    run = write_run(tmp_path / "first", step_times=[1.0, 2.0], kernels={"k": [1000, 2000]})
    out = tmp_path / "runs"
    before = sorted(p.name for p in tmp_path.iterdir())
    assert cli_main([a.format(run=run, out=out) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "give" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no first.escalate/, no runs/


@settings(max_examples=300, deadline=None)
@given(raw=st.one_of(st.sampled_from(BAD), st.text(max_size=12)),
       low=st.sampled_from([0, 1]), integer=st.booleans())
def test_the_rule_accepts_only_finite_decimal_numbers_in_range(raw, low, integer):
    try:
        value = inputs.number(raw, low=low, high=1000, integer=integer)
    except ValueError as err:
        assert "give" in str(err) and len(str(err)) < 200
        return
    assert raw.strip().isascii() and low <= value <= 1000
    assert float(raw) == value and (not integer or isinstance(value, int))
