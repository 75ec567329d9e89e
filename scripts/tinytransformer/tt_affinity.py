"""CPU binding of the ranks of a one-host data-parallel run: each rank process gets its own share of the cores, as
production launchers do (torchrun --numa-binding, srun --cpu-bind). The eager versions (v1-v3) are host-bound at small
sizes (hundreds of Python launches a step), and a synchronous step waits for the slower rank; unbound, both ranks'
threads (Python, autograd's device thread, NCCL's helpers) share and migrate over every core.

Cores, not hardware threads, are split: the SMT siblings of a core stay together, so two ranks never share one core.
The split keeps each rank's cores contiguous in (package, core) order. One rank (no torchrun, or LOCAL_WORLD_SIZE 1)
keeps every core it was given. TT_CPU_BINDING=off (or the harness's --cpu-binding off) leaves the affinity alone."""
from __future__ import annotations

import os
from pathlib import Path

ENV = "TT_CPU_BINDING"
MODES = ("cores", "off")
SYSFS_CPU = Path("/sys/devices/system/cpu")

_record: dict | None = None  # what bind() did in this process (it binds once: later calls return this)


def split_cores(cpus, core_of: dict, local_rank: int, local_world: int) -> list[int]:
    """The CPUs of `local_rank`'s share of `cpus` (a set of CPU ids) among `local_world` ranks. `core_of` maps a CPU
    to its core's key ((package, core id)); a CPU missing from it is a core of its own. Cores (all their CPUs) are
    dealt in contiguous runs, the first ranks getting one more where they do not divide evenly. With fewer cores than
    ranks the CPUs themselves are split; with fewer CPUs than ranks every rank keeps them all."""
    if local_world < 1 or not 0 <= local_rank < local_world:
        raise ValueError(f"local rank {local_rank} outside a local world of {local_world}")
    ordered = sorted(cpus)
    if local_world == 1 or len(ordered) < local_world:
        return ordered
    groups: dict = {}
    for cpu in ordered:
        groups.setdefault(core_of.get(cpu, ("cpu", cpu)), []).append(cpu)
    cores = sorted(groups.values(), key=lambda g: (_sort_key(core_of.get(g[0])), g[0]))
    if len(cores) < local_world:
        cores = [[cpu] for cpu in ordered]
    base, extra = divmod(len(cores), local_world)
    start = local_rank * base + min(local_rank, extra)
    mine = cores[start:start + base + (1 if local_rank < extra else 0)]
    return sorted(cpu for core in mine for cpu in core)


def _sort_key(key) -> tuple:
    return (0, key[0]) if isinstance(key, tuple) and key and isinstance(key[0], int) else (1, 0)


def read_core_map(cpus, sysfs: Path = SYSFS_CPU) -> dict:
    """CPU -> (package id, core id) from sysfs topology; CPUs whose topology cannot be read are left out."""
    out = {}
    for cpu in cpus:
        topo = sysfs / f"cpu{cpu}" / "topology"
        try:
            out[cpu] = (int((topo / "physical_package_id").read_text()), int((topo / "core_id").read_text()))
        except (OSError, ValueError):
            continue
    return out


def cpu_list(cpus) -> str:
    """Compact Linux cpulist form: [0, 1, 2, 5] -> '0-2,5'."""
    parts: list[str] = []
    run: list[int] = []
    for cpu in sorted(cpus):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [cpu]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def resolve_mode(mode: str | None) -> str:
    mode = mode or os.environ.get(ENV) or "cores"
    if mode not in MODES:
        raise ValueError(f"CPU binding {mode!r} (from --cpu-binding or {ENV}): use one of {', '.join(MODES)}")
    return mode


def bind(mode: str | None = None) -> dict:
    """Bind this process (every thread it has now, and so every thread started later) to its rank's share of the
    CPUs it was started with, per LOCAL_RANK / LOCAL_WORLD_SIZE. Once per process: later calls return the record of
    the first, whatever their mode (bench.py runs many harness runs in one process)."""
    global _record
    if _record is not None:
        return _record
    mode = resolve_mode(mode)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
    if not hasattr(os, "sched_getaffinity"):  # not Linux
        _record = {"mode": "unsupported", "cpus": None, "local_rank": local_rank, "local_world_size": local_world}
        return _record
    given = sorted(os.sched_getaffinity(0))
    record = {"mode": mode, "local_rank": local_rank, "local_world_size": local_world, "cpus_given": cpu_list(given)}
    cpus = given
    if mode == "cores" and local_world > 1:
        cpus = split_cores(given, read_core_map(given), local_rank, local_world)
        _set_all_threads(cpus)
    record["cpus"] = cpu_list(cpus)
    record["n_cpus"] = len(cpus)
    _record = record
    return record


def _set_all_threads(cpus: list[int]) -> None:
    """sched_setaffinity(0) binds the calling thread only: bind every thread of the process (threads torch or NCCL
    started already), and new threads inherit the mask of the thread that starts them."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended meanwhile
            continue
