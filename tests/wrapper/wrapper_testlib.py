"""Helpers shared by the wrapper tests (imported by name: tests/ has no packages)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FAKES = Path(__file__).resolve().parent / "fakes"
REPO = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def wrapper_cli(args: list[str], env: dict, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m madengine_rocprof.wrapper ARGS` as a separate process (what rocprof_wrapper.sh runs)."""
    env = dict(env, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "madengine_rocprof.wrapper", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def manifest(out) -> dict:
    return json.loads((Path(out) / "manifest.json").read_text())
