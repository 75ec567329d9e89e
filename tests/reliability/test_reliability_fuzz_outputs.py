"""Issue 33's second red-team pass, generated cases over the classes this pass closed (the counts per class are in
docs/architecture.md, 'Red-team passes'):

- class 1 (outputs never replace inputs): random output paths around a run folder (its files, the folder, a new file
  inside, links to either, `..` ways in and out, hard links, devices) for every output option of `report`;
- class 6 (all outputs or none): random sets of outputs of which one cannot be written;
- class 7 (one numeric-option rule): random text for every numeric option of every command;
- class 8 (bounded, escaped messages): random huge and hostile values through the error printer and the Markdown
  escaper.
Class 2 (linear rules) is generated in test_reliability_linear_rules.py (over 1,000 crafted names, one per built-in
pattern and word). Fixed seeds (derandomized), sized to take a few seconds on 2 cores."""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.cli import build_parser
from madengine_rocprof.cli import main as cli_main
from madengine_rocprof.errors import UserError, UserErrors
from madengine_rocprof.reports.markdown import escape

from ..insights.insights_builders import write_run

FUZZ = settings(derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("outputs")
    run = write_run(root / "run", step_times=[1.0, 1.2, 1.1], kernels={"gemm_kernel": [900, 950], "add": [10, 12]})
    (root / "out").mkdir()
    (root / "file_link").symlink_to(run / "workload_result.json")
    (root / "dir_link").symlink_to(run)
    os.link(run / "workload_result.json", root / "hard_link.json")
    return root, run


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# (path relative to the world's root, whether it names or lies inside the run folder, an input)
TARGETS = [
    ("run/workload_result.json", True), ("run/profiler/node0/4242_kernel_trace.csv", True), ("run/new.json", True),
    ("run/profiler/new.json", True), ("run/profiler/../x.json", True), ("out/../run/y.json", True),
    ("file_link", True), ("dir_link/z.json", True), ("hard_link.json", True), ("run/../out/ok.json", False),
    ("out/ok.json", False), ("out/deeper/ok.json", False), ("outside.json", False),
]
OPTIONS = ["--json", "--markdown", "--html"]
CLASS_1: list[int] = []


@settings(FUZZ, max_examples=120)
@given(target=st.sampled_from(TARGETS), option=st.sampled_from(OPTIONS), twin=st.booleans())
def test_class_1_an_output_never_replaces_an_input(world, capsys, target, option, twin):
    root, run = world
    CLASS_1.append(1)
    relative, collides = target
    if relative == "hard_link.json":  # a hard link collides with an input file given as such (the rules file)
        argv = ["report", str(run), "-q", "--kernel-rules", str(run / "workload_result.json"), option,
                str(root / relative)]
    else:
        argv = ["report", str(run), "-q", option, str(root / relative)]
    if twin:  # a second output: the collision is found whichever option names it
        argv += ["--perfetto", str(root / "out" / "traces")] if option != "--html" else \
            ["--markdown", str(root / "out" / "second.md")]
    before = _tree(run)
    code = cli_main(argv)
    err = capsys.readouterr().err
    if collides:
        assert code == 2 and "input" in err and "fix:" in err, (argv, err)
    elif relative != "hard_link.json":
        assert code == 0, (argv, err)
    assert _tree(run) == before
    assert not [p for p in root.rglob("*.tmp")]


CLASS_6: list[int] = []


@settings(FUZZ, max_examples=60)
@given(chosen=st.lists(st.sampled_from(["--json", "--markdown", "--html", "--perfetto"]), min_size=1, max_size=4,
                       unique=True), broken=st.integers(0, 3))
def test_class_6_all_outputs_or_none(world, capsys, tmp_path_factory, chosen, broken):
    root, run = world
    CLASS_6.append(1)
    out = tmp_path_factory.mktemp("set")
    blocker = out / "blocker"
    blocker.write_text("a file where a folder is needed")
    names = {"--json": "r.json", "--markdown": "r.md", "--html": "r.html", "--perfetto": "traces"}
    bad = chosen[broken % len(chosen)]
    argv = ["report", str(run), "-q"]
    for option in chosen:
        argv += [option, str((blocker if option == bad else out) / names[option])]
    assert cli_main(argv) == 2
    assert "fix:" in capsys.readouterr().err
    assert sorted(p.name for p in out.rglob("*")) == ["blocker"]  # nothing written, no temporary file


def _numeric_options():
    def walk(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from walk(sub)
            elif callable(action.type) and getattr(action.type, "__name__", "") in ("number", "whole number"):
                yield parser.prog, action

    return list(walk(build_parser()))


NUMERIC = _numeric_options()
CLASS_7: list[int] = []
VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "Infinity", "1e309", "-1", "0", "-0", "1", "1.5", "1e3", "1_0", "0x1F",
                     "٣", "1e-400", " 2 ", "", "+3", "99999999999999999999", "3.0"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**7, 10**7).map(str),
    st.text(max_size=8),
)


@settings(FUZZ, max_examples=400)
@given(index=st.integers(0, 10**6), raw=VALUES)
def test_class_7_every_numeric_option_takes_only_finite_numbers_in_range(index, raw):
    prog, action = NUMERIC[index % len(NUMERIC)]
    CLASS_7.append(1)
    try:
        value = action.type(raw)
    except argparse.ArgumentTypeError as err:
        assert "fix: give" in str(err) and len(str(err)) < 300
        return
    assert math.isfinite(value) and re.fullmatch(r"\s*[+-]?[0-9.eE+-]+\s*", raw), (prog, action.dest, raw)
    if "whole" in action.type.__name__:
        assert isinstance(value, int)
    if action.dest in ("name_width", "top", "launches_per_kernel", "escalate_launches_per_kernel"):
        assert value >= (0 if prog.endswith("compare") and action.dest == "top" else 1)
    if "timeout" in action.dest or "peak" in action.dest:
        assert value > 0


CLASS_8: list[int] = []
HOSTILE = st.lists(st.sampled_from(["<", ">", "/", "`", "\x00", "\x1b", "\x07", "\x9b", "\n", "a", "s", "script",
                                    "|", "&", " "]), max_size=30).map("".join)


@settings(FUZZ, max_examples=300)
@given(size=st.integers(0, 3_000_000), where=st.integers(0, 3), count=st.integers(1, 3000), hostile=HOSTILE)
def test_class_8_messages_are_bounded_and_markdown_is_escaped(size, where, count, hostile):
    CLASS_8.append(1)
    value = "v" * size
    error = UserError(*([value] if where == 0 else ["what"]), file=value if where == 1 else None,
                      where=value if where == 2 else None, fix=value if where == 3 else "do this")
    assert len(str(error)) < 4000
    many = UserErrors([UserError(f"problem {i}", fix="keep one") for i in range(count)])
    assert str(many).count("\n") <= 2 * 20 + 1
    text = escape(f"| {hostile} |\n- `{hostile}`\n")
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)
    for line in text.split("\n"):  # outside code spans (a backslash-escaped backtick opens none) no tag can open
        for i, part in enumerate(line.replace("\\`", "").split("`")):
            if i % 2 == 0:
                assert not re.search(r"<[A-Za-z/!?]", part), text


def test_the_pass_ran_the_counts_the_docs_give():
    """Run last in this module: the docs' per-class counts are the examples these generators ran."""
    if not CLASS_1:
        pytest.skip("the generators above did not run in this session (run the whole module)")
    counts = (len(CLASS_1), len(CLASS_6), len(CLASS_7), len(CLASS_8))
    print(f"issue 33 pass: class 1 {counts[0]}, class 6 {counts[1]}, class 7 {counts[2]}, class 8 {counts[3]} cases")
    # class 1's space has 78 cases (13 targets x 3 options x 2): hypothesis runs each once, then stops
    assert counts[0] >= len(TARGETS) * len(OPTIONS) * 2 and counts[1] >= 60 and counts[2] >= 400 and counts[3] >= 300


def test_a_lone_backtick_before_a_tag_leaves_no_tag():
    """Found by the generated cases above (hostile='<`a'): with an unpaired backtick on a line, the escaped backtick
    left `<` before a letter once the `\\`` was read."""
    from madengine_rocprof.reports.markdown import escape

    text = escape("| <`a |")
    assert not re.search(r"<[A-Za-z/!?]", text.replace("\\`", "")), text
