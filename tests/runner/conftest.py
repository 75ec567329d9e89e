"""Runner test fixtures: a throwaway model repository (models.json + scripts + a CPU Dockerfile) and docker access."""
from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

CPU_DOCKERFILE = """\
# CONTEXT {'gpu_vendor': 'CPU', 'guest_os': 'DEBIAN'}
ARG BASE_DOCKER=madengine-rocprof/cpu-base:latest
FROM $BASE_DOCKER
"""

SCRIPTS = {
    # prints madengine's performance line and the environment the runner promised
    "ok": """\
        echo "args: $*"
        echo "env FROM_ENV_VARS=${FROM_ENV_VARS:-unset} FROM_DOCKER_ENV_VARS=${FROM_DOCKER_ENV_VARS:-unset}"
        echo "runner: ${MAD_MULTI_NODE_RUNNER:-none} ngpus: ${MAD_RUNTIME_NGPUS:-none}"
        echo "partial result" > partial.txt
        echo '{"schema_version": 1, "status": "ok", "device": {"type": "cuda", "name": "Fake GPU 9000"}}' \
            > workload_result.json
        echo "performance: 1234.5 tokens_per_second"
        """,
    "fail": """\
        echo "about to fail"
        echo "partial before failure" > partial.txt
        exit 3
        """,
    "slow": """\
        trap 'echo "got TERM"; echo "flushed on TERM" > flushed.txt; exit 143' TERM
        echo start
        for i in $(seq 1 600); do echo "tick $i"; sleep 0.2; done
        """,
    # docker only: the plugin mount must be read-only, the workspace writable
    "probe": """\
        for d in madengine_rocprof counters; do
            touch "$MADENGINE_ROCPROF_PLUGIN/$d/probe" 2>/dev/null && echo "$d writable" || echo "$d read-only"
        done
        ls "$MADENGINE_ROCPROF_PLUGIN/scripts/rocprof_wrapper.sh" "$MADENGINE_ROCPROF_PLUGIN/counters/compute_bound.txt"
        touch /myworkspace/ws_probe && echo "workspace writable"
        echo "env FROM_ENV_VARS=${FROM_ENV_VARS:-unset} FROM_DOCKER_ENV_VARS=${FROM_DOCKER_ENV_VARS:-unset}"
        echo "performance: 1 probes"
        """,
    "noperf": """\
        echo "finished but printed no performance line"
        """,
    # reports its result, then never exits (a rank stuck in teardown)
    "hang": """\
        echo "performance: 42 tokens_per_second"
        sleep 600
        """,
}


def write_model_repo(root: Path) -> Path:
    """A models.json beside scripts/<name>/run.sh and docker/runnertest.debian.cpu.Dockerfile; returns models.json."""
    (root / "docker").mkdir(parents=True, exist_ok=True)
    (root / "docker" / "runnertest.debian.cpu.Dockerfile").write_text(CPU_DOCKERFILE)
    cards = []
    for name, body in SCRIPTS.items():
        folder = root / "scripts" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.sh").write_text(textwrap.dedent(body))
        cards.append({"name": f"{name}_model", "dockerfile": "docker/runnertest", "scripts": f"scripts/{name}/run.sh",
                      "n_gpus": "1", "training_precision": "fp32", "tags": ["runnertest", name], "args": ""})
    hooks = root / "scripts" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / "pre.sh").write_text('echo "pre ran with $*" > pre_marker.txt\n')
    (hooks / "post.sh").write_text('echo "post ran with $*"; ls .. > ../post_saw.txt\n')
    (hooks / "bad_pre.sh").write_text('echo "pre fails"; exit 7\n')
    models = root / "models.json"
    models.write_text(json.dumps(cards, indent=2))
    return models


@pytest.fixture
def model_repo(tmp_path: Path) -> Path:
    return write_model_repo(tmp_path / "repo")


@pytest.fixture(scope="session")
def docker_client():
    """A client whose daemon answers. Without one: skip, or FAIL when MADENGINE_ROCPROF_REQUIRE_DOCKER=1 (CI)."""
    from madengine_rocprof.runner.host import docker_client as connect

    client = connect()
    if client is None:
        message = "no Docker engine answers (start one with: sudo bash scripts/setup.sh --docker)"
        if os.environ.get("MADENGINE_ROCPROF_REQUIRE_DOCKER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return client


@pytest.fixture(scope="session")
def cpu_base_image(docker_client) -> str:
    """The locally made base (scripts/setup_docker.sh); required, never pulled."""
    ref = "madengine-rocprof/cpu-base:latest"
    try:
        docker_client.images.get(ref)
    except Exception:
        message = f"{ref} missing: run bash scripts/setup.sh --docker"
        if os.environ.get("MADENGINE_ROCPROF_REQUIRE_DOCKER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return ref
