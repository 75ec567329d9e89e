"""The real, unmodified madengine (ROCm/madengine 2.0.0, from ../shared/vendor) runs our configs end to end.

Needs the upstream tarball and a Docker engine: skipped with the reason when either is missing, required on CI
(CI=true). madengine is installed into its own venv (its pins must not decide ours) and run in a copy of this
checkout (it writes perf.csv, scripts/common and outputs into its working directory).

What a machine without a GPU needs, and why (madengine source, 2.0.0):
- MAD_CONTAINER_IMAGE: skips madengine's image build, which always adds `--pull` (no registry here); our CPU image
  is built locally by our own build code;
- docker_env_vars.MAD_SYSTEM_{NGPUS,GPU_ARCHITECTURE,HIP_VERSION,GPU_PRODUCT_NAME}, docker_gpus, gpu_renderDs: null:
  madengine otherwise detects them with amd-smi/rocminfo and stops;
- gen_sys_env_details: false: skips the rocEnvTool pre-script (it needs ROCm);
- the TEST-ONLY docker shim (tests/package/test_only_shims/docker): madengine adds --device=/dev/kfd to every AMD
  `docker run` and no context key removes it; the shim drops that flag. A user's GPU-less host cannot avoid it.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.madengine]

REPO = Path(__file__).resolve().parents[2]
VENDOR = Path(os.environ.get("MADENGINE_VENDOR_DIR") or REPO.parent / "shared" / "vendor")
SHIMS = Path(__file__).resolve().parent / "test_only_shims"
CI = os.environ.get("CI") == "true"


def _need(ok: bool, reason: str) -> None:
    if not ok:
        (pytest.fail if CI else pytest.skip)(reason)


def sh(argv, cwd, env=None, ok=True, timeout=1200):
    out = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if ok:
        assert out.returncode == 0, f"{argv} -> {out.returncode}\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def mad(tmp_path_factory):
    """madengine in its own venv, a workspace copy of this checkout, and our CPU image."""
    tarballs = sorted(VENDOR.glob("madengine-*.tar.gz"))
    _need(bool(tarballs), f"no upstream madengine tarball in {VENDOR} (set MADENGINE_VENDOR_DIR)")
    _need(
        shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True).returncode == 0,
        "no Docker engine answers (bash scripts/setup.sh --docker starts one)",
    )
    base = tmp_path_factory.mktemp("madengine")
    sh(["tar", "-xzf", tarballs[-1], "-C", base], cwd=base)
    src = next(p for p in base.iterdir() if p.is_dir())
    # Its build (hatchling + versioningit) needs a git tag, as ../shared/vendor/README.md says.
    git = ["git", "-c", "user.email=ci@local", "-c", "user.name=ci"]
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "src"], ["git", "tag", "v2.0.0"]):
        sh(argv, cwd=src)
    sh([sys.executable, "-m", "venv", base / "venv"], cwd=base)
    sh([base / "venv" / "bin" / "python", "-m", "pip", "install", "-q", src], cwd=base)
    workspace = base / "ws"
    files = sh(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO).stdout.split()
    for rel in files:
        if (REPO / rel).is_file():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, workspace / rel)
    image = (
        sh(
            [
                sys.executable,
                "-m",
                "madengine_rocprof.runner.images",
                "--model",
                "tiny_llama_v1",
                "--gpu-vendor",
                "CPU",
                "--repo",
                REPO,
            ],
            cwd=REPO,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{SHIMS}:{base / 'venv' / 'bin'}:{env['PATH']}"
    return {"base": base, "ws": workspace, "image": image, "env": env, "python": base / "venv" / "bin" / "python"}


def cpu_context(image: str, **extra) -> str:
    ctx = {
        "MAD_CONTAINER_IMAGE": image,
        "docker_gpus": "0",
        "gpu_renderDs": None,
        "gen_sys_env_details": False,
        "docker_env_vars": {
            "MAD_SYSTEM_NGPUS": "1",
            "MAD_SYSTEM_GPU_ARCHITECTURE": "cpu",
            "MAD_SYSTEM_HIP_VERSION": "0",
            "MAD_SYSTEM_GPU_PRODUCT_NAME": "none",
        },
    }
    ctx.update(extra)
    return json.dumps(ctx)


def madengine_run(mad, config: str, context: str, *flags: str, ok=True):
    shutil.rmtree(mad["ws"] / "rocprof_output", ignore_errors=True)
    return sh(
        [
            "madengine",
            "run",
            "--tags",
            "tiny_llama_v1",
            "--additional-context-file",
            f"profiling-configs/{config}",
            "--additional-context",
            context,
            *flags,
        ],
        cwd=mad["ws"],
        env=mad["env"],
        ok=ok,
    )


def last_perf_row(ws: Path) -> dict:
    with open(ws / "perf.csv", newline="") as fh:
        return list(csv.DictReader(fh))[-1]


def header(path) -> list[str]:
    with open(path, newline="") as fh:
        return next(csv.reader(fh))


def check_profiler_outputs(ws: Path, fixtures: Path, ranks: int = 1) -> dict:
    """The wrapper's outputs survived madengine's clean-up: copied to <workspace>/rocprof_output by trace.sh."""
    out = ws / "rocprof_output"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["outcome"] == "ok" and manifest["exit_code"] == 0
    traces = sorted(glob.glob(str(out / "*" / "*_kernel_trace.csv")))
    stats = sorted(glob.glob(str(out / "*" / "*_kernel_stats.csv")))
    assert len(traces) == ranks and len(stats) == ranks, (traces, stats)
    for trace in traces:  # rocprofv3 7.x format, compared with a real rocprofv3 output
        assert header(trace) == header(fixtures / "docs-data" / "kernel_trace.csv")
        with open(trace, newline="") as fh:
            assert sum(1 for _ in csv.DictReader(fh)) > 0
    for stat in stats:
        assert header(stat) == header(fixtures / "docs-data" / "hip_api_stats.csv")
    return manifest


def test_discover_finds_the_four_models(mad):
    out = sh(["madengine", "discover", "--tags", "tinytransformer"], cwd=mad["ws"], env=mad["env"]).stdout
    for v in range(1, 5):
        assert f'"name": "tiny_llama_v{v}"' in out


def test_cmd_override_route_needs_no_install(mad, rocprof_fixtures):
    """Unmodified madengine: the context replaces the tool's cmd with our wrapper in this repository; madengine's
    own registry entry keeps its trace.sh post-script, which copies the outputs to the workspace."""
    locate = "import madengine, pathlib; print(pathlib.Path(madengine.__file__).parent / 'scripts/common/tools.json')"
    tools_json = Path(sh([mad["python"], "-c", locate], cwd=mad["base"]).stdout.strip())
    assert "--profile" not in json.loads(tools_json.read_text())["tools"]["rocprofv3_lightweight"]["cmd"]  # upstream's
    cmd = (
        "bash ../scripts/rocprof_wrapper.sh --profile lightweight --kernel-trace --stats --output-format csv "
        "-d ./rocprof_output -o %hostname%/%pid% --"
    )
    madengine_run(
        mad,
        "rocprofv3_lightweight.json",
        cpu_context(mad["image"], tools=[{"name": "rocprofv3_lightweight", "cmd": cmd}]),
    )
    row = last_perf_row(mad["ws"])
    assert row["status"] == "SUCCESS" and row["metric"] == "tokens_per_second" and float(row["performance"]) > 0
    check_profiler_outputs(mad["ws"], rocprof_fixtures)


@pytest.fixture(scope="module")
def installed(mad):
    out = sh(
        [sys.executable, "-m", "madengine_rocprof", "install", "--madengine", "--madengine-python", mad["python"]],
        cwd=mad["ws"],
    ).stdout
    assert "backup of the previous tools.json" in out
    return mad


def test_lightweight_under_real_madengine(installed, rocprof_fixtures):
    run = madengine_run(installed, "rocprofv3_lightweight.json", cpu_context(installed["image"]))
    assert "--keep-model-dir" not in " ".join(run.args)  # a default run: madengine cleans up its run directory
    row = last_perf_row(installed["ws"])
    assert row["model"] == "tiny_llama_v1" and row["status"] == "SUCCESS"
    assert row["metric"] == "tokens_per_second" and float(row["performance"]) > 0
    manifest = check_profiler_outputs(installed["ws"], rocprof_fixtures)
    assert manifest["profile"] == "lightweight" and "--profile lightweight" in run.stdout


def test_compute_bound_is_refused_clearly_without_a_gpu_profiler(installed):
    # As shipped: madengine's own power-profiler pre-script needs a GPU (amd-smi/rocm-smi) and stops the run.
    run = madengine_run(installed, "rocprofv3_compute_bound.json", cpu_context(installed["image"]), ok=False)
    assert run.returncode != 0 and last_perf_row(installed["ws"])["status"] == "FAILURE"
    assert "gpu_info_pre.sh" in run.stdout and "failed with exit code" in run.stdout
    # Without the sampler, our wrapper refuses: counters need rocprofv3 or ncu; the app is not run; exit 127.
    run = madengine_run(
        installed,
        "rocprofv3_compute_bound.json",
        cpu_context(installed["image"], tools=[{"name": "rocprofv3_compute"}]),
        "--live-output",
        ok=False,
    )
    assert run.returncode != 0 and last_perf_row(installed["ws"])["status"] == "FAILURE"
    assert "counters needs a vendor profiler (rocprofv3 or ncu); none was found" in run.stdout
    assert "the application was NOT run" in run.stdout and "failed with exit code 127" in run.stdout


def test_multi_gpu_starts_the_ranks_madengine_reads(installed, rocprof_fixtures):
    """madengine takes the rank count from gpus_per_node, not distributed.nproc_per_node (2 ranks on the CPU)."""
    ctx = json.loads(
        cpu_context(
            installed["image"],
            tools=[{"name": "rocprofv3_communication"}],
            docker_gpus="0,1",
            gpus_per_node=2,
            distributed={"launcher": "torchrun", "nnodes": 1, "nproc_per_node": 2},
        )
    )
    ctx["docker_env_vars"]["MAD_SYSTEM_NGPUS"] = "2"
    run = madengine_run(installed, "rocprofv3_multi_gpu.json", json.dumps(ctx))
    assert "--nproc_per_node=2" in run.stdout
    assert last_perf_row(installed["ws"])["status"] == "SUCCESS"
    check_profiler_outputs(installed["ws"], rocprof_fixtures, ranks=2)
