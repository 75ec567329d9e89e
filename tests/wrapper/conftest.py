"""Fixtures for the wrapper tests: a PATH holding only the fake profilers we choose, and runners."""
from __future__ import annotations

import json
import os

import pytest

from .wrapper_testlib import FAKES, REPO, SYSTEM_PATH


@pytest.fixture
def make_env(tmp_path):
    """make_env("rocprofv3", "ncu", FAKE_DISPATCHES="5") -> env whose PATH has only those fakes (+ the system)."""

    def make(*fakes: str, **extra: str) -> dict:
        bin_dir = tmp_path / ("bin_" + "_".join(fakes or ("none",)))
        bin_dir.mkdir(exist_ok=True)
        for name in fakes:
            link = bin_dir / name
            if not link.exists():
                link.symlink_to(FAKES / name)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MADENGINE_ROCPROF", "FAKE_", "ROCM_PATH"))}
        env.update(PATH=f"{bin_dir}:{SYSTEM_PATH}", FAKE_PROFILER_LOG=str(tmp_path / "argv.log"),
                   ROCM_PATH=str(tmp_path / "no_rocm"), CUDA_HOME=str(tmp_path / "no_cuda"))
        env.update(extra)
        return env

    return make


@pytest.fixture
def recorded(tmp_path):
    """The argv lists the fakes were called with, in order."""

    def read() -> list[dict]:
        log = tmp_path / "argv.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return read


@pytest.fixture(autouse=True)
def no_output_in_the_checkout():
    """A wrapper run without -d writes ./rocprof_output in its cwd: every test gives tmp_path as one or the other."""
    stray = REPO / "rocprof_output"
    existed = stray.exists()
    yield
    assert existed or not stray.exists(), "this test wrote rocprof_output/ into the repository (use tmp_path)"
