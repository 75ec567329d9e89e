"""The built wheel is self-contained: installed into a fresh venv, every command works from an empty directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from madengine_rocprof import resources

from .package_helpers import mad_repo

pytestmark = pytest.mark.slow
FAKES = Path(__file__).resolve().parents[1] / "wrapper" / "fakes"


def sh(argv, cwd, env=None, ok=True):
    out = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if ok:
        assert out.returncode == 0, f"{argv} -> {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`python -m build` (sdist, then the wheel from the sdist), then the wheel in a fresh venv."""
    repo = Path(__file__).resolve().parents[2]
    base = tmp_path_factory.mktemp("wheel")
    built = sh([sys.executable, "-m", "build", "--outdir", base / "dist", repo], cwd=base)
    # every folder of the package is packaged (setuptools warns "Package would be ignored" for one it skips)
    assert "would be ignored" not in built.stdout + built.stderr
    wheel = next((base / "dist").glob("madengine_rocprof-*.whl"))
    sdist = next((base / "dist").glob("madengine_rocprof-*.tar.gz"))
    sh([sys.executable, "-m", "venv", base / "venv"], cwd=base)
    sh([base / "venv" / "bin" / "python", "-m", "pip", "install", "-q", wheel], cwd=base)
    return base, wheel, sdist


def test_wheel_and_sdist_carry_every_resource(installed):
    _, wheel, sdist = installed
    in_wheel = zipfile.ZipFile(wheel).namelist()
    with tarfile.open(sdist) as tf:
        in_sdist = tf.getnames()
    for rel in resources.RESOURCES:
        assert any(n.startswith(f"madengine_rocprof/_resources/{rel}") for n in in_wheel), rel
        assert any(n.split("/", 1)[1].startswith(rel) for n in in_sdist if "/" in n), rel
    for name in (
        "profiling-configs/schema.json",
        "counters/compute_bound.txt",
        "scripts/rocprof_wrapper.sh",
        "docker/tinytransformer.debian.cpu.Dockerfile",
        "scripts/tinytransformer/tt_harness.py",
    ):
        assert f"madengine_rocprof/_resources/{name}" in in_wheel
    assert not [n for n in in_wheel if "__pycache__" in n or n.startswith("tests/")]


def test_the_installed_wheel_builds_the_native_api_recorder_and_buffers(installed, tmp_path):
    base, _, _ = installed
    code = "import sys; from pathlib import Path; from madengine_rocprof.tracer import api_recorder as a, " \
           "cupti_backend as c, cupti_json as j, native_rows as k; " \
           "from madengine_rocprof.reports import csv_native as r, kineto_native as q; " \
           "[print(a.build(s, folder=Path(sys.argv[1]))) for s in (a.SOURCE, c.BUFFERS_SOURCE, j.SOURCE, k.SOURCE, " \
           "r.SOURCE, q.SOURCE)]"
    out = sh([base / "venv" / "bin" / "python", "-c", code, tmp_path / "cache"], cwd=tmp_path).stdout.split()
    built = [Path(p) for p in out]
    assert [p.name.split("-")[0] for p in built] == ["api_recorder", "cupti_buffers", "cupti_json", "kineto_rows",
                                                       "csv_columns", "kineto_scan"]
    assert all(p.parent == tmp_path / "cache" and p.stat().st_size > 0 for p in built)


def test_installed_commands_work_from_an_empty_directory(installed, tmp_path):
    base, _, _ = installed
    cli = base / "venv" / "bin" / "madengine-rocprof"
    empty = tmp_path / "empty"
    empty.mkdir()
    bin_dir = tmp_path / "bin"  # a faithful fake rocprofv3, so `wrap` and `report` see real-format output
    bin_dir.mkdir()
    (bin_dir / "rocprofv3").symlink_to(FAKES / "rocprofv3")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MADENGINE_ROCPROF", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(
        PATH=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        MADENGINE_ROCPROF_HOME=str(tmp_path / "home"),
        ROCM_PATH=str(tmp_path / "no-rocm"),
    )

    def mr(*args, ok=True):
        return sh([cli, *args], cwd=empty, env=env, ok=ok)

    # this venv has no torch (no [torch] extra): doctor says so, and, where the embedded tracer is the one chosen
    # (no profiler on PATH), why a local run with this Python would fail
    doctor = sh([cli, "doctor"], cwd=empty, env=dict(env, PATH="/usr/local/bin:/usr/bin:/bin"))
    assert "torch: not installed" in doctor.stdout and "tracer backend: none" in doctor.stdout
    assert "ModuleNotFoundError" in doctor.stderr and "madengine-rocprof[torch]" in doctor.stderr

    paths = mr("paths").stdout
    site_resources = next((base / "venv" / "lib").glob("python3*/site-packages/madengine_rocprof/_resources"))
    assert f"resources (installed package): {site_resources}" in paths
    config = Path(mr("paths", "--config", "rocprofv3_lightweight").stdout.strip())
    assert config == site_resources / "profiling-configs" / "rocprofv3_lightweight.json" and config.is_file()

    assert "rocprofv3_lightweight" in mr("tools", "list").stdout
    assert "compute_bound" in mr("counters", "list").stdout
    assert (
        mr(
            "validate", "rocprofv3_compute_bound", config, site_resources / "profiling-configs" / "schema.json"
        ).stdout.count("OK")
        == 3
    )
    assert "gfx942: OK" in mr("validate", "--arch", "gfx942", "compute_bound.txt").stdout

    mr("export-tools", "tools.json", "--wrapper-dir", "tools")
    assert "rocprofv3_lightweight" in json.loads((empty / "tools.json").read_text())["tools"]
    assert (empty / "tools" / "rocprof_wrapper.sh").is_file() and (
        empty / "tools" / "madengine_rocprof_wrapper.pyz"
    ).is_file()

    madengine = tmp_path / "madengine"  # a madengine package folder (what `install` edits)
    (madengine / "scripts" / "common").mkdir(parents=True)
    (madengine / "scripts" / "common" / "tools.json").write_text('{"tools": {}}')
    mr("install", "--madengine", madengine)
    assert "rocprofv3_compute" in json.loads((madengine / "scripts" / "common" / "tools.json").read_text())["tools"]

    wrapped = mr("wrap", "--kernel-trace", "--stats", "-d", "prof", "--", "python3", "-c", "print('app ran')")
    assert "app ran" in wrapped.stdout
    manifest = json.loads((empty / "prof" / "manifest.json").read_text())
    assert manifest["outcome"] == "ok" and manifest["profiler"]["name"] == "rocprofv3"
    report = mr("report", "prof").stdout
    assert "kernel" in report.lower()

    repo = tmp_path / "mad"  # any MAD-style repository, by --repo or as the current directory
    mad_repo(repo, performance=7)
    mr(
        "run",
        "--repo",
        repo,
        "--tags",
        "m1",
        "--runner",
        "local",
        "--output-dir",
        "runs",
        "--additional-context-file",
        "rocprofv3_lightweight",
    )
    import csv

    with open(empty / "runs" / "perf.csv", newline="") as fh:
        row = next(csv.DictReader(fh))
    assert row["model"] == "m1" and float(row["performance"]) == 7 and row["metric"] == "samples_per_second"
    assert "--repo DIR" in mr("run", "--tags", "m1", "--runner", "local", ok=False).stderr
