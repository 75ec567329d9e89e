"""Fixtures for the insights tests; the builders live in insights_builders.py (this package)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def builtin_kernel_rules(monkeypatch, tmp_path):
    from madengine_rocprof.reports import categories

    monkeypatch.delenv(categories.RULES_ENV, raising=False)
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "home"))
    categories.set_rules(())
    yield
    categories.set_rules(())
