"""Issue 33, class 2: every rule that reads an untrusted kernel name runs in time linear in its length, and every
unbounded string is bounded. Crafted names of repeated `nvjet_`, `gemm_`, `matmul_`, `floatto` took 24-40 s each at
120 KB (a lazy `\\w*?` between two literals rescans the rest of the name from every occurrence of the first)."""
from __future__ import annotations

import csv
import importlib
import json
import re
import time
from pathlib import Path

import pytest

from madengine_rocprof.cli import main as cli_main
from madengine_rocprof.reports import categories, kernel_names

from ..insights.insights_builders import HEADER_7

PIECES = ["nvjet_", "gemm_", "matmul_", "floatto", "transpose_nchw", "computefused", "maxpool", "cask_cudnn",
          " const", "[clone ", "a::", "(anonymous namespace)::"]
# every module whose patterns read kernel or operator names (or other text from a profile)
MODULES = ["madengine_rocprof.reports.categories", "madengine_rocprof.reports.kernel_names",
           "madengine_rocprof.reports.roles", "madengine_rocprof.insights.kernel_match",
           "madengine_rocprof.reports.formatting", "madengine_rocprof.reports.analysis",
           "madengine_rocprof.reports.dispatches", "madengine_rocprof.reports.cpu_ops",
           "madengine_rocprof.reports.multinode", "madengine_rocprof.reports.html_page",
           "madengine_rocprof.reports.markdown", "madengine_rocprof.reports.discover",
           "madengine_rocprof.insights.escalate", "madengine_rocprof.insights.peaks"]


def _crafted(piece: str, size: int, tail: str = "") -> str:
    return (piece * (size // len(piece) + 1))[:size] + tail


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


@pytest.mark.parametrize("piece", PIECES)
def test_a_crafted_120_kb_name_is_classified_well_under_a_second(piece):
    name = _crafted(piece, 120_000, "x")
    assert _timed(categories._classify_one.__wrapped__, name) < 0.5
    categories.clear_cache()
    assert _timed(categories.classify_many, [name, name + "y"]) < 0.5  # the column engine is linear too
    assert _timed(kernel_names.key, name) < 0.5


def _patterns():
    for module in MODULES:
        for where, value in vars(importlib.import_module(module)).items():
            stack = [value]
            while stack:
                item = stack.pop()
                if isinstance(item, re.Pattern):
                    yield f"{module}.{where}", item
                elif isinstance(item, (tuple, list)):
                    stack.extend(item)


def test_no_built_in_pattern_is_quadratic_on_repeats_of_its_own_words():
    """A generator over every compiled built-in pattern: names made of repeats of the pattern's literal words (with
    the digits and separators its quantifiers take), 20 KB each. Linear patterns take ~1 ms; the quadratic ones took
    1-3 s."""
    slow, tried = [], 0
    for where, pattern in _patterns():
        words = set(re.findall(r"[A-Za-z_]{2,}", pattern.pattern))
        for word in sorted(words)[:25]:
            for unit in (word, word + "_1x", word + "1", word + "::"):
                tried += 1
                elapsed = _timed(pattern.search, _crafted(unit, 20_000))
                if elapsed > 0.1:
                    slow.append((where, unit, pattern.pattern[:80], round(elapsed, 2)))
    assert tried > 1000 and slow == []


def _write_trace(path: Path, names: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(HEADER_7)
        t = 1_000_000
        for i, name in enumerate(names * 3, start=1):
            writer.writerow(["KERNEL_DISPATCH", "Agent 4", 1, 1, 7, i, 7, name, i, t, t + 5_000])
            t += 6_000
    return path


def test_report_compare_and_classify_read_a_crafted_240_kb_trace_in_seconds(tmp_path, capsys):
    names = [_crafted("nvjet_", 120_000), _crafted("floatto", 120_000)]
    runs = []
    for side in ("base", "new"):
        run = tmp_path / side
        _write_trace(run / "profiler" / "node0" / "7_kernel_trace.csv", names)
        (run / "workload_result.json").write_text(json.dumps({"schema_version": 1, "status": "ok",
                                                              "step_times_ms": [1.0, 1.1]}))
        runs.append(str(run))
    for argv in (["report", runs[0], "-q"], ["compare", *runs, "-q"], ["kernels", "classify", "--run", runs[0]]):
        categories.clear_cache()
        start = time.perf_counter()
        assert cli_main(argv) == 0, capsys.readouterr().err
        assert time.perf_counter() - start < 10, argv
    out = capsys.readouterr().out
    assert "first 16,384 characters" in out  # the cut is said where the rule is shown


def test_model_args_of_a_megabyte_are_refused_at_once(tmp_path, capsys):
    context = tmp_path / "context.json"
    context.write_text(json.dumps({"model_args": "--flag " * 183_000}))  # 1.28 MB
    start = time.perf_counter()
    assert cli_main(["validate", str(context)]) == 2
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err
    assert "model_args" in err and "characters long" in err and len(err) < 2000
