"""Shared test fixtures: paths to the repository and to the real rocprofv3 fixtures."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Real rocprofv3 outputs/inputs live beside the checkout, never copied into the repo.
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures" / "rocprofv3"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def rocprof_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(f"real rocprofv3 fixtures not found at {SHARED_FIXTURES}: check out ../shared beside the repo")
    return SHARED_FIXTURES
