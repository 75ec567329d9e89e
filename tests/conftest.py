"""Shared test fixtures: paths to the repository and to the real rocprofv3 fixtures."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Real rocprofv3 outputs, inputs, input schema and counter_defs.yaml (upstream copies: see PROVENANCE.md there).
ROCPROF_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rocprofv3"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def rocprof_fixtures() -> Path:
    return ROCPROF_FIXTURES
