"""bench.py --kernel-settings: the A/B switch that runs the benchmark with earlier launch settings (round 6 compares
the landed RMSNorm-backward and attention-tile settings against round 5's with it)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import tt_kernels

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "tinytransformer"
sys.path.insert(0, str(BENCH))
import bench  # noqa: E402


def test_round5_settings_are_applied_and_unknown_names_refused(monkeypatch):
    for name in ("NORM_BWD_PROGRAMS_PER_SM", "NORM_BWD_WARPS", "NORM_BWD_ROW_ELEMENTS", "NORM_BWD_STAGES"):
        monkeypatch.setattr(tt_kernels, name, getattr(tt_kernels, name))
    monkeypatch.setattr(tt_kernels, "_attn_blocks", tt_kernels._attn_blocks)
    monkeypatch.setattr(tt_kernels, "INTERPRET", False)  # the GPU tiles, not the interpreter's
    landed = tt_kernels._attn_blocks(64)
    settings = json.loads((BENCH / "settings" / "round5.json").read_text())
    bench.apply_kernel_settings(settings)
    assert tt_kernels.NORM_BWD_PROGRAMS_PER_SM == 16 and tt_kernels.NORM_BWD_STAGES == 1
    assert tt_kernels._attn_blocks(64)["fwd"] == (128, 64, 4, 3) != landed["fwd"]
    assert tt_kernels._attn_blocks(128)["fwd"] == (64, 64, 4, 2)  # other head sizes keep their defaults
    with pytest.raises(SystemExit, match="unknown setting 'NORM_BWD_ROWS'"):
        bench.apply_kernel_settings({"NORM_BWD_ROWS": 2})


def test_round7_settings_files_all_apply(monkeypatch):
    """Every settings file (settings/*.json: round 5's, the one before round 7, round 7's as landed) names only
    settings that exist; the pre-round-7 one switches each of the round's changes off."""
    for name in ("PDL", "WGRAD_SIDE_STREAM", "WGRAD_MAX_TOKENS", "NORM_BWD_MIN_TILES", "RESIDUAL_FP32",
                 "DKDV_DEEP_SEQ"):
        monkeypatch.setattr(tt_kernels, name, getattr(tt_kernels, name))
    files = sorted((BENCH / "settings").glob("*.json"))
    assert len(files) >= 3
    for f in files:
        bench.apply_kernel_settings(json.loads(f.read_text()))
    bench.apply_kernel_settings(json.loads((BENCH / "settings" / "before_round7.json").read_text()))
    assert (tt_kernels.PDL, tt_kernels.WGRAD_SIDE_STREAM, tt_kernels.NORM_BWD_MIN_TILES, tt_kernels.RESIDUAL_FP32) \
        == (0, False, 1, True)
