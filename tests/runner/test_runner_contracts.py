"""Files that the real wrapper and the local runner write fit the typed contracts (wrapper/contracts.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from madengine_rocprof import wrapper
from madengine_rocprof.runner.lifecycle import RunOptions, run_models
from madengine_rocprof.wrapper.contracts import Manifest, RunJson, problems

FAKES = Path(__file__).resolve().parents[1] / "wrapper" / "fakes"


def _path_with_fake_rocprofv3(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rocprofv3").symlink_to(FAKES / "rocprofv3")
    return f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"


def test_wrapper_manifests_fit_the_contract(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MADENGINE_ROCPROF", "FAKE_", "ROCM_PATH"))}
    env.update(PATH=_path_with_fake_rocprofv3(tmp_path), ROCM_PATH=str(tmp_path / "no_rocm"), FAKE_DISPATCHES="3")
    ok = wrapper.run(["--kernel-trace"], ["true"], str(tmp_path / "ok"), env=env, cwd=str(tmp_path))
    failed = wrapper.run(["--kernel-trace"], ["false"], str(tmp_path / "failed"), env=env, cwd=str(tmp_path))
    missing = wrapper.run(["--kernel-trace", "--profiler", "ncu"], ["true"], str(tmp_path / "none"), env=env,
                          cwd=str(tmp_path))
    assert [r.outcome for r in (ok, failed, missing)] == ["ok", "app_failed", "no_profiler"]
    for result in (ok, failed, missing):
        written = json.loads((Path(result.manifest["output_dir"]) / "manifest.json").read_text())
        assert problems(written, Manifest) == [], result.outcome


def test_local_run_writes_a_run_json_and_manifest_that_fit(model_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _path_with_fake_rocprofv3(tmp_path) + ":" + os.environ["PATH"])
    out = tmp_path / "out"
    ctx = {"tools": [{"name": "rocprofv3_lightweight"}]}
    code = run_models(RunOptions(tags=["ok_model"], models_file=model_repo, output_dir=out, runner="local",
                                 echo=False, context_json=json.dumps(ctx)))
    ws = out / "ok_model__rocprofv3_lightweight"
    run = json.loads((ws / "run.json").read_text())
    assert problems(run, RunJson) == []
    assert run["profilers"][0]["outcome"] in ("ok", "no_output"), run["failures"]
    assert code == (0 if run["status"] == "SUCCESS" else 1)
    assert problems(json.loads((ws / "profiler" / "manifest.json").read_text()), Manifest) == []
