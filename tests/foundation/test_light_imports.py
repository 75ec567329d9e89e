"""Running workloads needs no report reader: `run` and `validate` work where polars (the readers' dataframe
library, a 54 MB wheel) is not installed, as on a GPU machine that gets only the few wheels a run needs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _without_polars(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    blocker = tmp_path / "blocked"
    blocker.mkdir(exist_ok=True)
    (blocker / "polars.py").write_text("raise ImportError('polars is not installed here (test)')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "madengine_rocprof", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_run_and_validate_parse_without_polars(tmp_path):
    done = _without_polars(tmp_path, "run", "--help")
    assert done.returncode == 0, done.stderr
    assert "--escalate-top" in done.stdout
    done = _without_polars(tmp_path, "validate", "profiling-configs/rocprofv3_multi_gpu.json")
    assert done.returncode == 0, done.stderr


def test_report_says_what_is_missing_without_polars(tmp_path):
    done = _without_polars(tmp_path, "report", "tests/fixtures/kineto/ours_h100_tt_v4_graph")
    assert done.returncode != 0
    assert "polars" in (done.stderr + done.stdout)
