"""Fixtures for the foundation tests: an isolated user registry and the real counter definitions."""
from __future__ import annotations

import pytest

from madengine_rocprof.registry.counter_defs import load_catalog


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """User registrations go to a temp dir; no ROCm counter file leaks in from the machine."""
    home = tmp_path / "mrhome"
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(home))
    monkeypatch.delenv("ROCPROFILER_METRICS_PATH", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    return home


@pytest.fixture(scope="session")
def counter_defs(rocprof_fixtures):
    return rocprof_fixtures / "counter_defs.yaml"


@pytest.fixture(scope="session")
def real_catalog(counter_defs):
    return load_catalog(counter_defs)
