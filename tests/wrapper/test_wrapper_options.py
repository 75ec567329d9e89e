"""The `--` rule and the rocprofv3 option vocabulary."""
from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from madengine_rocprof.errors import UserError
from madengine_rocprof.wrapper import options as opts


def test_split_happens_at_the_first_double_dash_only():
    before, app = opts.split_dashdash(["--kernel-trace", "--", "python3", "x.py", "--", "--flag"])
    assert before == ["--kernel-trace"]
    assert app == ["python3", "x.py", "--", "--flag"]


@pytest.mark.parametrize("argv, app_start", [
    (["--hip-trace", "./app"], 1),                        # the upstream failure: bool swallows the app
    (["--kernel-trace", "yes", "python3", "x.py"], 2),     # a truth word is the bool's value, the app follows
    (["-d", "out", "python3", "x.py"], 2),
    (["--pmc", "SQ_WAVES", "GRBM_GUI_ACTIVE", "./app", "-n", "3"], 3),
    (["bash", "run.sh"], 0),
])
def test_missing_double_dash_is_exit_2_and_shows_the_fixed_command(argv, app_start):
    with pytest.raises(UserError) as info:
        opts.parse(argv, prog="W")
    err = info.value
    assert err.exit_code == 2
    fixed = shlex.split(err.fix)
    assert fixed[0] == "W"
    assert fixed[1:] == argv[:app_start] + ["--"] + argv[app_start:]


def test_bool_values_and_false_words():
    parsed = opts.parse(["--kernel-trace", "--hsa-trace=no", "--stats", "off", "--", "app"])
    assert parsed.on("--kernel-trace")
    assert not parsed.on("--hsa-trace")
    assert not parsed.on("--stats")
    assert parsed.app == ["app"]


def test_invalid_truth_value_is_a_clear_error():
    with pytest.raises(UserError, match="invalid truth value `maybe`"):
        opts.parse(["--kernel-trace=maybe", "--", "app"])


def test_unknown_option_names_the_closest_one():
    with pytest.raises(UserError, match="did you mean `--kernel-trace`"):
        opts.parse(["--kernel-trac", "--", "app"])
    with pytest.raises(UserError, match="unknown rocprofv3 option `--perfetto-trace-filename`"):
        opts.parse(["--perfetto-trace-filename", "x.pftrace", "--", "app"])


def test_short_forms_map_to_long_names_and_values():
    parsed = opts.parse(["-d", "o", "-i", "c.txt", "-f", "csv", "json", "-T", "--pmc", "A", "B", "--", "app"])
    assert parsed.values("--output-directory") == ["o"]
    assert parsed.values("--output-format") == ["csv", "json"]
    assert parsed.values("--pmc") == ["A", "B"]
    assert parsed.on("--truncate-kernels")


def test_wrapper_options_are_separated_from_profiler_options():
    parsed = opts.parse(["--profiler", "embedded", "--drop-unsupported", "--kernel-trace", "--", "app"])
    assert parsed.wrapper == {"profiler": "embedded", "drop_unsupported": True}
    assert [o.name for o in parsed.options] == ["--kernel-trace"]


BOOLS = [s.long for s in opts.SPECS if s.kind == opts.BOOL]
VALUES = [s.long for s in opts.SPECS if s.kind == opts.VALUE]
MULTIS = [s.long for s in opts.SPECS if s.kind == opts.MULTI]
word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789./", min_size=1, max_size=8)
option = st.one_of(
    st.builds(lambda n, v: opts.Opt(n, v), st.sampled_from(BOOLS), st.sampled_from([None, "yes", "no", "on"])),
    st.builds(lambda n, v: opts.Opt(n, v), st.sampled_from(VALUES), word),
    st.builds(lambda n, v: opts.Opt(n, v), st.sampled_from(MULTIS), st.lists(word, min_size=1, max_size=3)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(option, max_size=6), st.lists(st.one_of(word, st.just("--"), st.just("--yes")), min_size=1, max_size=5))
def test_render_then_parse_round_trips_and_never_touches_the_app(options, app):
    parsed = opts.parse(opts.render(options) + ["--"] + app)
    assert parsed.app == app
    assert [(o.name, o.value) for o in parsed.options] == [(o.name, o.value) for o in options]
