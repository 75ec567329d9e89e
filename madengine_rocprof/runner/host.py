"""What this machine offers: which GPU vendor (detected, never assumed), whether a Docker engine answers, and the
container device options for that vendor (madengine's flags: AMD /dev/kfd + /dev/dri/renderD* + group video;
NVIDIA GPU device requests)."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
from typing import Any

from madengine_rocprof.errors import UserError


def detect_vendor() -> str:
    """AMD when the ROCm kernel driver is there, NVIDIA when the NVIDIA driver is, else CPU."""
    if os.path.exists("/dev/kfd") and glob.glob("/dev/dri/renderD*"):
        return "AMD"
    if glob.glob("/dev/nvidia[0-9]*"):
        return "NVIDIA"
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            if out.returncode == 0 and "GPU" in out.stdout:
                return "NVIDIA"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "CPU"


def effective_vendor(requested: str | None, detected: str) -> tuple[str, list[str]]:
    """The vendor to run for. A context that names a vendor this machine does not have still runs (configs are
    shared across vendors), on what is here, with a warning; madengine would silently assume AMD."""
    if requested is None or requested == detected:
        return detected, []
    return detected, [f"gpu_vendor {requested} in the context, but this machine has "
                      f"{'no GPU' if detected == 'CPU' else detected + ' GPUs'}: running for {detected}"]


def docker_client(timeout: int = 10, why: list[str] | None = None) -> Any | None:
    """A docker SDK client whose daemon answers a ping, else None (and the reason appended to `why`)."""
    try:
        import docker  # runtime dependency, imported lazily so `--runner local` works without it
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as err:  # broad: ImportError, DockerException, requests' errors all mean "no engine here"
        if why is not None:
            why.append(f"{type(err).__name__}: {err}")
        return None


def parse_gpu_list(spec: str, where: str = "docker_gpus", file: str | None = None) -> list[int] | None:
    """'0,2-4' -> [0, 2, 3, 4]; 'all' or '' -> None (every GPU)."""
    spec = spec.strip().lower()
    if spec in ("", "all"):
        return None
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or (hi and int(hi) < int(lo)):
            what = "GPU" if where == "docker_gpus" else "CPU"
            raise UserError(f"'{part.strip()}' is not a {what} index or range", file=file, where=where,
                            fix='write indices and ranges such as "0,2-4"' + (', or "all"' if what == "GPU" else ""))
        out.extend(i for i in range(int(lo), int(hi or lo) + 1) if i not in out)
    return out


def device_options(vendor: str, docker_gpus: str | None) -> tuple[dict[str, Any], list[str]]:
    """docker SDK `containers.run` keyword arguments for the vendor's GPUs, and warnings."""
    wanted = parse_gpu_list(docker_gpus or "")
    if vendor == "AMD":
        render = sorted(glob.glob("/dev/dri/renderD*"), key=lambda p: int(p.rsplit("renderD", 1)[1]))
        if wanted is not None:
            missing = [i for i in wanted if i >= len(render)]
            if missing:
                raise UserError(f"GPU {missing[0]} does not exist: this machine has {len(render)} render nodes",
                                where="docker_gpus", fix=f"use indices 0-{len(render) - 1} or \"all\"")
            render = [render[i] for i in wanted]
        devices = ["/dev/kfd:/dev/kfd:rwm"] + [f"{p}:{p}:rwm" for p in render]
        return {"devices": devices, "group_add": ["video"], "cap_add": ["SYS_PTRACE"],
                "security_opt": ["seccomp=unconfined"], "ipc_mode": "host"}, []
    if vendor == "NVIDIA":
        import docker.types
        if wanted is None:
            request = docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
        else:
            request = docker.types.DeviceRequest(device_ids=[str(i) for i in wanted], capabilities=[["gpu"]])
        return {"device_requests": [request], "cap_add": ["SYS_PTRACE"], "ipc_mode": "host"}, []
    warnings = [f"docker_gpus '{docker_gpus}' ignored: no GPU on this machine"] if docker_gpus else []
    return {"ipc_mode": "host"}, warnings


def visible_devices_env(vendor: str, docker_gpus: str | None) -> dict[str, str]:
    """For the local runner: restrict the workload to docker_gpus like the container would."""
    wanted = parse_gpu_list(docker_gpus or "")
    if wanted is None or vendor == "CPU":
        return {}
    ids = ",".join(str(i) for i in wanted)
    return {"HIP_VISIBLE_DEVICES": ids} if vendor == "AMD" else {"CUDA_VISIBLE_DEVICES": ids}
