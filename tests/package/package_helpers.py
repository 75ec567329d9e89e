"""A minimal MAD-style repository (models.json + scripts/), as a user's own repository would be."""

from __future__ import annotations

import json
from pathlib import Path


def mad_repo(root: Path, performance: float) -> Path:
    """One model card `m1` (tag `t`) whose script prints madengine's performance line with `performance`."""
    (root / "scripts" / "m").mkdir(parents=True)
    (root / "scripts" / "m" / "run.sh").write_text(f'echo "performance: {performance} samples_per_second"\n')
    card = {
        "name": "m1",
        "dockerfile": "docker/m",
        "scripts": "scripts/m/run.sh",
        "n_gpus": "1",
        "owner": "t",
        "training_precision": "fp32",
        "tags": ["t"],
        "args": "",
    }
    (root / "models.json").write_text(json.dumps([card]))
    return root
