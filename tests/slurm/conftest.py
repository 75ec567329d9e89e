"""The local SLURM cluster (scripts/setup_slurm.sh) for these tests: started once per session, removed at the end.
Without Docker or the CPU base image the tests are skipped, or FAIL when CI=true (MADENGINE_ROCPROF_REQUIRE_SLURM=1
does the same elsewhere)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup_slurm.sh"
WORKLOADS = Path(__file__).resolve().parent / "workloads"


def _required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("MADENGINE_ROCPROF_REQUIRE_SLURM") == "1"


def _cluster_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(SETUP), "env"], capture_output=True, text=True, check=True)
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


@pytest.fixture(scope="session")
def slurm_cluster():
    """KEY=VALUE settings of the running cluster (SLURM_BIN, SLURM_SHARED, SLURM_CONTROLLER, ...)."""
    problem = None
    if shutil.which("docker") is None:
        problem = "no docker command"
    else:
        up = subprocess.run(["bash", str(SETUP), "up"], capture_output=True, text=True, timeout=900)
        if up.returncode != 0:
            problem = f"setup_slurm.sh up failed:\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
    if problem:
        if _required():
            pytest.fail(f"the SLURM cluster is required here (CI=true): {problem}")
        pytest.skip(f"no local SLURM cluster: {problem}")
    env = _cluster_env()
    yield env
    subprocess.run(["bash", str(SETUP), "down"], capture_output=True, text=True, timeout=300)


@pytest.fixture
def shared_dir(slurm_cluster) -> Path:
    """A fresh folder on the storage every node sees (at the same path)."""
    path = Path(slurm_cluster["SLURM_SHARED"]) / f"test-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def login_env(slurm_cluster) -> dict[str, str]:
    """This machine as a login node: SLURM's commands on PATH, our CLI beside the test's Python."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([slurm_cluster["SLURM_BIN"], str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@pytest.fixture
def slurm_run(login_env):
    """`madengine-rocprof run --runner slurm ARGS` from the repository, as a user on the login node types it."""
    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "madengine_rocprof", "run", "--runner", "slurm", *args], cwd=REPO,
                              env=login_env, capture_output=True, text=True, timeout=timeout)
    return run


@pytest.fixture
def slurm_record(slurm_cluster):
    """SLURM's own record of a finished job: the job completion log (jobcomp/filetxt), read with sacct."""
    def record(job_id: str) -> dict[str, str]:
        out = subprocess.run([f"{slurm_cluster['SLURM_BIN']}/sacct", "--completion", "-n", "-P", "-j", job_id, "-o",
                              "JobID,State,ExitCode,NodeList"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        rows = [line.split("|") for line in out.stdout.splitlines() if line.startswith(job_id + "|")]
        assert rows, f"no completion record for job {job_id}: {out.stdout!r}"
        return dict(zip(("job_id", "state", "exit_code", "nodelist"), rows[0], strict=True))
    return record


@pytest.fixture
def test_models(tmp_path: Path) -> Path:
    """models.json with the test workloads (tests/slurm/workloads/<name>/run.sh) as <name>_model."""
    root = tmp_path / "models"
    root.mkdir()
    cards = []
    for folder in sorted(p for p in WORKLOADS.iterdir() if p.is_dir()):
        shutil.copytree(folder, root / folder.name)
        cards.append({"name": f"{folder.name}_model", "dockerfile": "docker/none", "scripts": f"{folder.name}/run.sh",
                      "n_gpus": "1", "owner": "tests", "training_precision": "fp32", "tags": ["slurmtest"],
                      "timeout": 600, "args": ""})
    (root / "models.json").write_text(json.dumps(cards, indent=2))
    return root / "models.json"
