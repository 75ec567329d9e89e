"""Packaging tests: resources, `paths`, install into madengine, the wheel, and the real madengine end to end."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """User registrations go to a temp dir; no ROCm counter file leaks in from the machine."""
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "mrhome"))
    monkeypatch.delenv("ROCPROFILER_METRICS_PATH", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
