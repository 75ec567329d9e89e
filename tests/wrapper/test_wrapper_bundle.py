"""The wrapper copied alone into madengine's layout runs with only python3 (no package installed)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from madengine_rocprof.wrapper import bundle

from .wrapper_testlib import FAKES, REPO

SYSTEM_PY = shutil.which("python3", path="/usr/bin:/bin") or ""  # "" (no system python3): those tests skip


@pytest.fixture
def madengine_layout(tmp_path):
    """<cwd>/scripts/common/tools/{rocprof_wrapper.sh, .pyz} and a model dir <cwd>/run_directory, like madengine."""
    tools = tmp_path / "scripts" / "common" / "tools"
    written = bundle.install_into(str(tools))
    run_dir = tmp_path / "run_directory"
    run_dir.mkdir()
    return tools, run_dir, written


def clean_env(tmp_path, *fakes, **extra):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in fakes:
        (bin_dir / name).symlink_to(FAKES / name)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), **extra}


def test_pyz_holds_only_the_stdlib_parts_and_is_reproducible(tmp_path):
    a = bundle.build_pyz(str(tmp_path / "a.pyz"))
    b = bundle.build_pyz(str(tmp_path / "b.pyz"))
    assert Path(a).read_bytes() == Path(b).read_bytes()
    names = zipfile.ZipFile(a).namelist()
    assert "__main__.py" in names and "madengine_rocprof/tracer/inject/sitecustomize.py" in names
    assert {n.split("/")[1] for n in names if n.count("/") >= 2} == {"wrapper", "tracer"}


@pytest.mark.skipif(not SYSTEM_PY, reason="no system python3")
def test_relative_tools_json_command_runs_in_a_clean_environment(tmp_path, madengine_layout):
    tools, run_dir, _ = madengine_layout
    assert subprocess.run([SYSTEM_PY, "-I", "-c", "import madengine_rocprof"], capture_output=True).returncode != 0
    env = clean_env(tmp_path, "rocprofv3", FAKE_PROFILER_LOG=str(tmp_path / "argv.log"))
    # madengine's final command: cd run_directory && bash ../scripts/common/tools/rocprof_wrapper.sh ... -- bash run.sh
    (run_dir / "run.sh").write_text("cd subdir_the_model_uses 2>/dev/null; echo model ran; exit 4\n")
    done = subprocess.run(["bash", "../scripts/common/tools/rocprof_wrapper.sh", "--hip-trace", "--kernel-trace",
                           "--output-format", "pftrace", "-d", "./rocprof_output", "--", "bash", "run.sh"],
                          cwd=run_dir, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr  # the app's exit code
    assert "model ran" in done.stdout
    m = json.loads((run_dir / "rocprof_output" / "manifest.json").read_text())
    assert m["outcome"] == "app_failed" and m["output_dir"] == str(run_dir / "rocprof_output")
    assert {o["kind"] for o in m["outputs"]} >= {"kernel_trace", "perfetto"}


@pytest.mark.skipif(not SYSTEM_PY, reason="no system python3")
def test_pyz_runs_isolated_and_embedded_tracer_injects_from_the_zip(tmp_path, madengine_layout):
    tools, run_dir, _ = madengine_layout
    pytest.importorskip("torch")
    env = clean_env(tmp_path)
    app = [sys.executable, "-c", "import torch; torch.mm(torch.ones(4, 4), torch.ones(4, 4))"]
    done = subprocess.run([SYSTEM_PY, "-I", str(tools / bundle.PYZ_NAME), "--kernel-trace", "-d", "out", "--", *app],
                          cwd=run_dir, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    m = json.loads((run_dir / "out" / "manifest.json").read_text())
    assert m["profiler"]["name"] == "embedded" and m["outcome"] == "ok"
    assert m["env_added"]["MADENGINE_ROCPROF_TRACER_HOME"] == str(tools / bundle.PYZ_NAME)
    assert m["dispatch_count"] >= 1


def test_script_without_the_wrapper_says_what_is_missing(tmp_path):
    lonely = tmp_path / "tools"
    lonely.mkdir()
    shutil.copy2(REPO / "scripts" / "rocprof_wrapper.sh", lonely)
    # -d and cwd inside tmp_path: should a wrapper be found after all, it still writes nothing into the checkout.
    done = subprocess.run(["bash", str(lonely / "rocprof_wrapper.sh"), "--kernel-trace", "-d", str(tmp_path / "o"),
                           "--", "true"], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert done.returncode == 127
    assert "madengine_rocprof_wrapper.pyz" in done.stderr and "export-tools" in done.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "rocprof_output").exists()


def test_script_in_the_checkout_uses_the_source_tree(tmp_path):
    env = clean_env(tmp_path, "rocprofv3")
    done = subprocess.run(["bash", str(REPO / "scripts" / "rocprof_wrapper.sh"), "--kernel-trace", "--dry-run", "--",
                           "python3", "x.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["profiler"]["name"] == "rocprofv3" and plan["app_argv"] == ["python3", "x.py"]
    assert "PYTHONPATH" not in plan["env_added"]  # the checkout is not leaked into the app's environment


def test_script_finds_its_folder_with_cdpath_set(tmp_path):
    # With CDPATH exported, `cd tools` prints the folder: the script must not take that output as part of the path.
    tools = tmp_path / "tools"
    tools.mkdir()
    shutil.copy2(REPO / "scripts" / "rocprof_wrapper.sh", tools)
    bundle.build_pyz(str(tools / bundle.PYZ_NAME))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "CDPATH": ".", "MADENGINE_ROCPROF_PYTHON": sys.executable}
    done = subprocess.run(["bash", "tools/rocprof_wrapper.sh", "--profiler", "embedded", "--dry-run", "--kernel-trace",
                           "-d", str(tmp_path / "o"), "--", "python3", "-c", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["output_dir"] == str(tmp_path / "o")
    assert plan["env_added"]["MADENGINE_ROCPROF_TRACER_HOME"] == str(tools / bundle.PYZ_NAME)  # the copy beside it
