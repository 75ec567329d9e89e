"""Workload tests: import the TinyTransformer scripts (they are not a package) and run Triton in its interpreter on
machines without a GPU. TRITON_INTERPRET must be set before triton is imported."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "tinytransformer"
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


@pytest.fixture(scope="session")
def scripts_dir() -> Path:
    return SCRIPTS


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(scope="session")
def tiny_cfg():
    import tt_model
    return tt_model.ModelConfig(vocab_size=1000, hidden_dim=64, num_layers=2, num_heads=4, max_seq_len=32)
