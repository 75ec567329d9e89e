"""What a result row records about where it was measured: the device, the driver and package versions, the commit.

Nothing here imports torch: the versions come from the installed distributions' metadata, the GPU from nvidia-smi.
"""
from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("madengine-rocprof", "torch", "triton", "cupti-python", "polars", "adbc-driver-sqlite", "pydantic")
COMMIT_ENV = "BENCH_COMMIT"  # the device machine gets a copy of the tree without .git: pass the commit in


def _run(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def gpus() -> list[dict[str, str]]:
    """The NVIDIA GPUs nvidia-smi lists (name, driver), or [] on a machine without one."""
    if not shutil.which("nvidia-smi"):
        return []
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]) or ""
    found = []
    for line in out.splitlines():
        name, _, driver = line.partition(",")
        if name.strip():
            found.append({"name": name.strip(), "driver": driver.strip()})
    return found


def amd_gpu() -> str | None:
    """An AMD GPU's product name (rocm-smi), or None. Not run on AMD hardware yet: no AMD GPU was available."""
    if not os.path.exists("/dev/kfd"):
        return None
    out = _run(["rocm-smi", "--showproductname"]) if shutil.which("rocm-smi") else None
    names = [line.split(":", 2)[-1].strip() for line in (out or "").splitlines() if "Card series" in line]
    return names[0] if names else "AMD GPU (ROCm)"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device() -> dict[str, Any]:
    found = gpus()
    info: dict[str, Any] = {"cpus": os.cpu_count(), "cpu": cpu_name(), "load_average_1min": os.getloadavg()[0]}
    if found:
        info.update(name=f"{len(found)}x {found[0]['name']}" if len(found) > 1 else found[0]["name"],
                    gpus=len(found), driver=found[0]["driver"])
    elif amd_gpu():
        info["name"] = amd_gpu()
    else:
        info["name"] = f"CPU only ({os.cpu_count()} cores)"
    return info


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version(), "os": platform.platform()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def commit() -> str:
    """The checkout's commit (`+dirty` when tracked files differ), BENCH_COMMIT where there is no .git."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    head = _run(["git", "rev-parse", "HEAD"])
    if head is None:
        return "unknown (no git checkout; set BENCH_COMMIT)"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    return head + ("+dirty" if dirty else "")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def capture() -> dict[str, Any]:
    return {"device": device(), "versions": versions(), "commit": commit(), "date": now()}
