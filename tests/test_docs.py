"""Docs test: every CLI command, subcommand and long option is written down in the README or docs/.

Undocumented commands are how a CLI drifts from its docs; this fails with the list of what is missing."""
from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from madengine_rocprof.cli import build_parser
from madengine_rocprof.wrapper import options


@pytest.fixture(scope="module")
def docs(repo: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))])


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[tuple[list[str], str | None]]:
    """(command path, long option or None for the command itself) for the whole CLI tree."""
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                yield path, flag
    for name, sub in _subcommands(parser).items():
        yield [*path, name], None
        yield from _walk(sub, [*path, name])


def test_every_command_is_documented(docs):
    commands = [path for path, flag in _walk(build_parser(), []) if flag is None]
    assert len(commands) >= 10  # the walk sees the real tree
    # top-level commands as users type them; nested ones as `parent sub` (e.g. `kernels check`)
    missing = [" ".join(p) for p in commands
               if (f"madengine-rocprof {p[0]}" if len(p) == 1 else " ".join(p)) not in docs]
    assert not missing, f"commands missing from README.md/docs: {missing}"


def test_every_option_is_documented(docs):
    missing = sorted({f"{' '.join(p) or 'madengine-rocprof'} {flag}" for p, flag in _walk(build_parser(), [])
                      if flag is not None and flag not in docs})
    assert not missing, f"options missing from README.md/docs: {missing}"


def test_every_wrapper_option_is_documented(docs):
    missing = sorted(name for name in options.WRAPPER_VALUE | options.WRAPPER_FLAGS if name not in docs)
    assert not missing, f"wrapper options missing from README.md/docs: {missing}"


def test_every_guarantee_names_tests_that_exist(repo: Path):
    """Each row of the README's Guarantees table names the tests behind its promise (a test function or a test file),
    and each named test exists: a promise without a test is how docs and behaviour drift apart."""
    import re

    readme = (repo / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Guarantees", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| what happens")]
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (repo / "tests").rglob("test_*.py"))
    assert len(rows) >= 10
    for row in rows:
        names = re.findall(r"`(test_\w+(?:\.py)?|tests/[\w/]+\.py)`", row)
        assert names, f"a guarantee names no test: {row[:120]}"
        for name in names:
            if name.startswith("tests/"):
                assert (repo / name).is_file(), name
            elif name.endswith(".py"):
                assert list((repo / "tests").rglob(name)), name
            else:
                assert re.search(rf"^def {name}\(", sources, re.M), f"no test named {name}"


def test_help_names_only_options_its_command_has():
    """A help text that points at an option names one the same command accepts: `run --help` once told users of
    `--escalate-top` to see `--min-share`, which only `escalate` has. Another program's option is written as such
    ("ncu's --launch-count")."""
    import re

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
        yield path, parser
        for name, sub in _subcommands(parser).items():
            yield from walk(sub, [*path, name])

    wrong, seen = [], 0
    for path, parser in walk(build_parser(), []):
        own = {flag for action in parser._actions for flag in action.option_strings}
        for action in parser._actions:
            for found in re.finditer(r"(?<![\w'-])(\w+'s )?(--[a-z][a-z0-9-]*)", action.help or ""):
                seen += 1
                if not found.group(1) and found.group(2) not in own:
                    wrong.append(f"{' '.join(path)} {action.option_strings}: {found.group(2)}")
    assert seen >= 5  # the walk reads real help texts
    assert not wrong, f"help texts naming options their command lacks: {wrong}"


def test_readme_lists_every_wrapper_backend(repo: Path):
    """`wrap --help` and `doctor` name every backend of wrapper/detect.py; the README's backend list does too."""
    from madengine_rocprof.wrapper.detect import NAMES

    readme = (repo / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Profiler wrapper", 1)[1].split("What it guarantees:", 1)[0]
    words = {"rocprofv3": "rocprofv3", "rocprof": "legacy rocprof", "ncu": "Nsight Compute", "nsys": "Nsight Systems",
             "embedded": "the embedded tracer"}
    assert set(NAMES) <= set(words), f"a new backend, add it here and to the README: {set(NAMES) - set(words)}"
    missing = [name for name in NAMES if f"\n- {words[name]}" not in section]
    assert not missing, f"backends missing from the README's list: {missing}"
