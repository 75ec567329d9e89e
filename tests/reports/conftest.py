"""Fixtures for the reports tests; the builders live in reports_builders.py (this package)."""
from __future__ import annotations

from pathlib import Path

import pytest

from .reports_builders import make_tt_run


@pytest.fixture
def tt_runs(tmp_path) -> list[Path]:
    """Runner-style run directories for TinyTransformer v1..v4 look-alikes."""
    return [make_tt_run(tmp_path / "out", v) for v in ("v1", "v2", "v3", "v4")]
