"""Which profiler is installed, which version, and why one is chosen.

Order for `auto`: rocprofv3, then legacy rocprof (only without rocprofv3), then NVIDIA (ncu for counter and
PC-sampling profiles, the embedded tracer for traces), then the embedded torch.profiler tracer. An explicit choice
(flag, or MADENGINE_ROCPROF_PROFILER) always wins and fails clearly when that profiler is missing.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError

NAMES = ("rocprofv3", "rocprof", "ncu", "nsys", "embedded")
ENV_PROFILER = "MADENGINE_ROCPROF_PROFILER"
EXIT_NO_PROFILER = 127  # like a shell's "command not found"


@dataclass
class Profiler:
    name: str                    # one of NAMES
    path: str | None = None      # absolute path of the executable (None for embedded)
    version: str | None = None   # e.g. "7.0.0"
    release: tuple = ()          # ROCm release used to gate options, e.g. (7, 0); () when unknown / not ROCm
    why: str = ""
    probes: list = field(default_factory=list)  # what was looked at, for `doctor`

    def to_json(self) -> dict:
        data = asdict(self)
        data["release"] = ".".join(str(x) for x in self.release) or None
        return data


def _which(name: str, env) -> str | None:
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return os.path.abspath(found)
    roots = (
        [env.get("ROCM_PATH"), "/opt/rocm"] if name.startswith("rocprof") else [env.get("CUDA_HOME"), "/usr/local/cuda"]
    )
    for root in filter(None, roots):
        candidate = os.path.join(root, "bin", name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _run(argv: list[str], env, timeout: float = 30) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout, text=True, errors="replace")
        return done.returncode, done.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)


def _release(text: str) -> tuple:
    m = re.search(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else ()


def rocm_info_version(executable: str, env) -> str | None:
    """`<root>/.info/version`, root = dirname(dirname(realpath(exe))), else $ROCM_PATH or /opt/rocm."""
    roots = [os.path.dirname(os.path.dirname(os.path.realpath(executable))), env.get("ROCM_PATH"), "/opt/rocm"]
    for root in filter(None, roots):
        try:  # the input layer: a FIFO or device planted there cannot hang detection
            text = inputs.read_text(os.path.join(root, ".info", "version"), kind="ROCm version file", limit=4096)
        except (UserError, OSError):
            continue
        if text.strip():
            return text.strip().split("-")[0]
    return None


def probe_rocprofv3(path: str, env) -> Profiler:
    prof = Profiler("rocprofv3", path)
    code, out = _run([path, "--version"], env)
    fields = dict(re.findall(r"^\s*(\w+):\s*(\S.*?)\s*$", out, re.M)) if code == 0 else {}
    prof.probes.append(f"`rocprofv3 --version` exit {code}")
    if fields.get("rocm_version") or fields.get("version"):
        prof.version = fields.get("rocm_version") or fields.get("version")
        prof.release = _release(fields.get("rocm_version", "")) or (7, 0)  # --version exists from 7.0 on
        prof.why = f"`--version` answered (ROCm {prof.version})"
        return prof
    code, out = _run([path, "--help"], env)
    prof.probes.append(f"`rocprofv3 --help` exit {code}")
    if "--list-avail" in out:
        prof.release, feature = (6, 4), "--list-avail"
    elif "--pmc" in out and "--runtime-trace" in out:
        prof.release, feature = (6, 3), "--pmc/--runtime-trace"
    else:
        prof.release, feature = (6, 2), "neither --pmc nor --list-avail"
    info = rocm_info_version(path, env)
    prof.probes.append(f".info/version: {info or 'not found'}")
    prof.version = info or ".".join(map(str, prof.release))
    prof.why = (
        f"no `--version` (older than 7.0); `--help` shows {feature} -> {prof.release[0]}.{prof.release[1]} features"
    )
    return prof


def probe_rocprof(path: str, env) -> Profiler:
    info = rocm_info_version(path, env)
    return Profiler("rocprof", path, info, _release(info or ""), "legacy rocprof (rocprofv3 not found)",
                    [f".info/version: {info or 'not found'}"])


def probe_nvidia(name: str, path: str, env) -> Profiler:
    code, out = _run([path, "--version"], env)
    m = re.search(r"(?:Version|version)\s+([\d.]+)", out)
    return Profiler(name, path, m.group(1) if m else None, (), "", [f"`{name} --version` exit {code}"])


def nvidia_present(env) -> bool:
    return bool(
        _which("nvidia-smi", env) or os.path.exists("/dev/nvidiactl") or _which("ncu", env) or _which("nsys", env)
    )


def embedded(env) -> Profiler:
    """The embedded tracer: always available (it ships with the wrapper). Which backend it uses (CUPTI or
    torch.profiler) is decided inside the traced process; `madengine-rocprof doctor` adds the tracer's own probes
    (cli/doctor.py): the wrapper imports nothing from the tracer, so that it stays standard-library only."""
    return Profiler("embedded", None, None, (), "embedded tracer: CUPTI via cupti-python on CUDA, else torch.profiler"
                    " (needs only python3 + torch)", [])


def find(name: str, env) -> Profiler | None:
    """The named profiler with its version, or None when it is not installed."""
    if name == "embedded":
        return embedded(env)
    path = _which(name, env)
    if not path:
        return None
    if name == "rocprofv3":
        return probe_rocprofv3(path, env)
    if name == "rocprof":
        return probe_rocprof(path, env)
    return probe_nvidia(name, path, env)


def choose(override: str | None, profile_kind: str | None, env=None) -> Profiler:
    """Pick the profiler. `profile_kind` is 'trace', 'counters' or 'pc_sampling' (what the options ask for)."""
    env = os.environ if env is None else env
    source = "--profiler" if override else ENV_PROFILER
    override = override or env.get(ENV_PROFILER) or "auto"
    if override != "auto":
        if override not in NAMES:
            raise UserError(f"unknown profiler `{override}`", where=source,
                            fix=f"use one of: auto, {', '.join(NAMES)}")
        prof = find(override, env)
        if prof is None:
            raise UserError(f"profiler `{override}` was asked for ({source}) but is not installed (not on PATH)",
                            where=source, fix=f"install it, or use {source}=auto", exit_code=EXIT_NO_PROFILER)
        prof.why = f"chosen by {source}={override}" + (f"; {prof.why}" if prof.why else "")
        return prof
    for name in ("rocprofv3", "rocprof"):
        prof = find(name, env)
        if prof:
            prof.why = f"{name} found at {prof.path}" + (f"; {prof.why}" if prof.why else "")
            return prof
    if nvidia_present(env) and profile_kind in ("counters", "pc_sampling"):
        prof = find("ncu", env)
        if prof is None:
            raise UserError(f"{profile_kind} on NVIDIA needs Nsight Compute (`ncu`), which is not on PATH",
                            where="profile", fix="install Nsight Compute, or choose a trace profile (lightweight)",
                            exit_code=EXIT_NO_PROFILER)
        prof.why = f"NVIDIA GPU, {profile_kind} profile -> Nsight Compute at {prof.path}"
        return prof
    prof = embedded(env)
    if profile_kind in ("counters", "pc_sampling"):
        raise UserError(f"{profile_kind} needs a vendor profiler (rocprofv3 or ncu); none was found",
                        where="profile", fix="install rocprofv3 (ROCm) or ncu (CUDA), or use a trace profile",
                        exit_code=EXIT_NO_PROFILER)
    vendor = "NVIDIA GPU" if nvidia_present(env) else "no rocprofv3, rocprof, ncu or nsys"
    prof.why = f"{vendor}: kernel trace via the embedded tracer (backend chosen in the traced process)"
    return prof


def report(env=None) -> list[dict]:
    """Everything detection looked at, for `madengine-rocprof doctor`."""
    env = os.environ if env is None else env
    rows = []
    for name in NAMES:
        prof = find(name, env)
        rows.append({"name": name, "found": prof is not None, **(prof.to_json() if prof else {})})
    return rows
