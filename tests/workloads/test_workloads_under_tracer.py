"""The Triton versions must also run under the embedded tracer on a CPU.

Regression: the tracer starts torch.profiler as soon as torch is imported, which imports triton before the harness
had set TRITON_INTERPRET=1, and every Triton launch then failed with "Cannot call @triton.jit'd outside of the scope
of a kernel". The test runs with TRITON_INTERPRET removed from the environment, as a user's shell would."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU/interpreter path is what is tested")


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v3", "v4"])
def test_triton_version_runs_under_the_embedded_tracer(version, scripts_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHON"] = sys.executable  # run.sh's interpreter: the one with torch
    out = tmp_path / "prof"
    cmd = [sys.executable, "-m", "madengine_rocprof", "wrap", "--profiler", "embedded", "--kernel-trace", "--stats",
           "-d", str(out), "--", "bash", str(scripts_dir / "run.sh"), "--version", version, "--num-steps", "3"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "performance:" in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["outcome"] == "ok" and manifest["dispatch_count"] > 0
    result = json.loads((tmp_path / "workload_result.json").read_text())
    assert result["status"] == "ok" and result["version"] == version
    assert any(Path(o["path"]).name.endswith("_kernel_trace.csv") for o in manifest["outputs"])
