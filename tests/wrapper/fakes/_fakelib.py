"""Shared bits of the fake profilers: argv recording, template expansion, running the app, CSV writing."""
import json
import os
import socket
import subprocess
import sys


def record(prog):
    log = os.environ.get("FAKE_PROFILER_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(json.dumps({"prog": prog, "argv": sys.argv[1:], "cwd": os.getcwd()}) + "\n")


def dispatches():
    """How many kernel dispatches the 'GPU' runs per pass; 0 = nothing captured."""
    return int(os.environ.get("FAKE_DISPATCHES", "3"))


def run_app(app):
    try:
        child = subprocess.Popen(app)
    except OSError as exc:
        print(f"fake: cannot execute {app[0]}: {exc}", file=sys.stderr)
        return 127, os.getpid()
    return child.wait(), child.pid


def expand(template, pid):
    rank = next((os.environ[k] for k in ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID") if k in os.environ), "0")
    return (template.replace("%hostname%", socket.gethostname()).replace("%pid%", str(pid))
            .replace("%rank%", rank).replace("%ppid%", str(os.getpid())))


def q(v):
    return str(v) if isinstance(v, (int, float)) else '"' + str(v).replace('"', '""') + '"'


def write_csv(path, header, rows):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        fh.write(",".join(q(h) for h in header) + "\n")
        for r in rows:
            fh.write(",".join(q(v) for v in r) + "\n")


KERNELS = ["void addition_kernel<float>(float*, float const*, float const*, int, int)",
           "subtract_kernel(float*, float const*, float const*, int, int)"]
# The same two kernels as Nsight Compute spells them, per --kernel-name-base / --print-kernel-base. Its demangled
# names differ from CUPTI's / rocprofv3's (KERNELS): template parameters written as T1, `const float *` (real pairs:
# tests/fixtures/gpu_runs/counts_*.json). The mangled names are illustrative.
NCU_NAMES = {
    "function": ["addition_kernel", "subtract_kernel"],
    "demangled": ["void addition_kernel<float>(T1 *, const T1 *, const T1 *, int, int)",
                  "subtract_kernel(float *, const float *, const float *, int, int)"],
    "mangled": ["_Z15addition_kernelIfEvPT_PKS0_S3_ii", "_Z15subtract_kernelPfPKfS1_ii"],
}
