"""A user tool registered without `core_profile` runs: before, `validate` and `tools register` accepted it and the
wrapper refused its name as a profile at run time, the reason only in run.log (issue 25)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from madengine_rocprof.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_registered_trace_tool_without_core_profile_runs_locally(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "home"))
    tool = tmp_path / "tool.json"
    tool.write_text(json.dumps({"name": "my_kernel_trace", "trace": ["kernel"]}))
    assert main(["validate", str(tool)]) == 0
    assert main(["tools", "register", str(tool)]) == 0
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps({"gpu_vendor": "AMD", "guest_os": "UBUNTU", "tools": [{"name": "my_kernel_trace"}]}))
    out = tmp_path / "out"
    monkeypatch.chdir(REPO)
    code = main(["run", "--tags", "tiny_llama_v1", "--additional-context-file", str(ctx), "--runner", "local",
                 "--output-dir", str(out)])
    log = "\n".join(p.read_text() for p in out.glob("*/logs/run.log"))
    assert code == 0, log[-2000:]
    assert "unknown profile" not in log
    (row,) = list(csv.DictReader((out / "perf.csv").read_text().splitlines()))
    assert row["status"] == "SUCCESS"
    (manifest,) = out.glob("*/profiler/**/manifest.json")
    assert json.loads(manifest.read_text())["profile"] == "lightweight"
