"""The typed contracts (wrapper/contracts.py): the shape checker itself, and docs/architecture.md's examples of
manifest.json, workload_result.json, run.json and the report JSON against the TypedDicts."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

from madengine_rocprof.reports.analysis import build_report
from madengine_rocprof.reports.discover import load_run
from madengine_rocprof.wrapper import contracts
from madengine_rocprof.wrapper.contracts import Manifest, Report, RunJson, WorkloadResult, problems

from ..reports.reports_builders import make_tt_run

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
GOOD_MANIFEST: dict = {
    "schema_version": 1, "tool": "madengine-rocprof-wrapper",
    "profiler": {"name": "rocprofv3", "path": "/x/rocprofv3", "version": "1.0", "why": "found"},
    "profile": None, "argv": ["rocprofv3", "--"], "app_argv": ["true"], "env_added": {}, "output_dir": "/o",
    "started_at": "2026-01-01T00:00:00+00:00", "duration_s": 1, "exit_code": 0, "app_exit_code": 0, "outcome": "ok",
    "outputs": [{"path": "h/1_kernel_trace.csv", "size_bytes": 3, "kind": "kernel_trace", "rows": None}],
    "dispatch_count": None, "messages": [],
}


def test_checker_accepts_a_good_manifest_and_names_each_problem():
    assert problems(GOOD_MANIFEST, Manifest) == []
    bad = dict(GOOD_MANIFEST, outcome="fine", exit_code=True, extra=1, outputs=[{"path": "p", "kind": "k"}])
    del bad["messages"]
    found = problems(bad, Manifest)
    assert "$: missing key 'messages'" in found and "$: unknown key 'extra'" in found
    assert any(p.startswith("$.outcome: 'fine' is not one of") for p in found)
    assert any(p.startswith("$.exit_code: expected int") for p in found)  # a bool is not an int
    assert "$.outputs[0]: missing key 'size_bytes'" in found
    assert problems(dict(GOOD_MANIFEST, tracer={"backends": ["cupti"], "dropped_records": None, "processes": []}),
                    Manifest) == []  # a later key is optional: older files still read
    assert contracts.missing_keys({"outcome": "ok"}, Manifest) == sorted(set(GOOD_MANIFEST) - {"outcome"})
    assert contracts.missing_keys([], Manifest) == sorted(GOOD_MANIFEST)


def _examples() -> dict[str, dict]:
    """The ```json blocks of docs/architecture.md, by the contract each shows."""
    found = {}
    for block in re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        data = json.loads(block)
        if data.get("tool") == "madengine-rocprof-wrapper":
            found["manifest"] = data
        elif data.get("tool") == "madengine-rocprof run":
            found["run"] = data
        elif data.get("tool") == "madengine-rocprof report":
            found["report"] = data
        elif "step_times_ms" in data:
            found["workload"] = data
    return found


def _choose(value, shape, where, alternatives):
    """Replace each documented "a|b|c" of a Literal by its first value, recording the alternatives shown."""
    origin = typing.get_origin(shape)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in typing.get_args(shape) if a is not type(None)]
        return _choose(value, arms[0], where, alternatives) if len(arms) == 1 else value
    if origin is typing.Literal and isinstance(value, str) and "|" in value:
        alternatives.append((where, set(value.split("|")), set(typing.get_args(shape))))
        return value.split("|")[0]
    if origin is list and isinstance(value, list):
        return [_choose(v, typing.get_args(shape)[0], f"{where}[{i}]", alternatives) for i, v in enumerate(value)]
    if isinstance(shape, type) and typing.is_typeddict(shape) and isinstance(value, dict):
        hints = typing.get_type_hints(shape)
        return {k: _choose(v, hints[k], f"{where}.{k}", alternatives) if k in hints else v for k, v in value.items()}
    return value


@pytest.mark.parametrize("name, shape", [("manifest", Manifest), ("workload", WorkloadResult), ("run", RunJson),
                                         ("report", Report)])
def test_docs_examples_fit_the_contracts(name, shape):
    example = _examples()[name]
    alternatives: list = []
    chosen = _choose(example, shape, "$", alternatives)
    assert problems(chosen, shape) == []
    for where, shown, allowed in alternatives:
        assert shown == allowed, f"{DOC.name} {name} {where} lists {sorted(shown)}, the contract has {sorted(allowed)}"


def test_the_harness_result_fits_without_importing_the_package(tmp_path):
    """scripts/tinytransformer writes workload_result.json on its own (torch + stdlib); WorkloadResult types it."""
    harness = DOC.parents[1] / "scripts" / "tinytransformer" / "tt_harness.py"
    out = tmp_path / "workload_result.json"
    done = subprocess.run([sys.executable, str(harness), "--version", "v1", "--tiny", "--device", "cpu", "--num-steps",
                           "2", "--warmup-steps", "1", "--json-out", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert problems(json.loads(out.read_text()), WorkloadResult) == []
    assert not re.search(r"^\s*(?:from|import) madengine_rocprof", harness.read_text(), re.M)


def test_a_built_report_fits(tmp_path):
    run = make_tt_run(tmp_path, "v1")
    report = build_report([load_run(run, run.name)])
    assert problems(json.loads(json.dumps(report)), Report) == []
