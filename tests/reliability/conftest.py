"""Reliability fixtures: the misbehaving model repository, a small tmpfs for disk-full tests and Docker access
(skipped where not available; CI fails instead of skipping Docker)."""
from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from .reliability_helpers import write_repo


@pytest.fixture
def models(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "repo")


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 MiB tmpfs (root only); yields its path, unmounted afterwards."""
    mount = tmp_path / f"tmpfs_{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.fixture(scope="session")
def docker_ready():
    """A client whose daemon answers and that has the locally made CPU base image; skip (CI: fail) otherwise."""
    from madengine_rocprof.runner.host import docker_client

    client = docker_client()
    problem = "no Docker engine answers (bash scripts/setup.sh --docker)" if client is None else None
    if client is not None:
        try:
            client.images.get("madengine-rocprof/cpu-base:latest")
        except Exception:
            problem = "madengine-rocprof/cpu-base:latest missing: run bash scripts/setup.sh --docker"
    if problem:
        if os.environ.get("MADENGINE_ROCPROF_REQUIRE_DOCKER") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return client
