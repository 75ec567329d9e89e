"""NVIDIA backends: Nsight Compute (counters, warp-state sampling) and Nsight Systems (trace), with converters
to rocprofv3's file formats (long-format counter_collection.csv, kernel_trace.csv)."""
from __future__ import annotations

import csv
import io
import os
import re
import socket
import sqlite3
import subprocess
from collections.abc import Mapping

from madengine_rocprof import inputs
from madengine_rocprof.wrapper import rocprof_csv
from madengine_rocprof.wrapper.options import Parsed

# Metric sets per profile; comments name the AMD counters they stand in for.
NCU_METRICS = {
    "compute_bound": [
        "gpu__time_duration.sum",
        "sm__cycles_elapsed.avg",                                   # GRBM_GUI_ACTIVE
        "sm__warps_launched.sum",                                   # SQ_WAVES
        "sm__inst_executed.sum",                                    # SQ_INSTS_*
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",         # GPUBusy-like
        "sm__warps_active.avg.pct_of_peak_sustained_active",        # OccupancyPercent
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",      # SQ_INSTS_VALU_ADD_F32
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",      # SQ_INSTS_VALU_MUL_F32
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",      # SQ_INSTS_VALU_FMA_F32
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",  # matrix cores (MFMA)
    ],
    "memory_bound": [
        "gpu__time_duration.sum",
        "dram__bytes_read.sum",                                     # FETCH_SIZE
        "dram__bytes_write.sum",                                    # WRITE_SIZE
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__t_sector_hit_rate.pct",                               # L2CacheHit
        "l1tex__t_sector_hit_rate.pct",
        "lts__t_sectors_srcunit_tex_op_read.sum",                   # TCP_TCC_READ_REQ_sum
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",       # LDSBankConflict
    ],
}
NCU_SECTIONS = {"pc_sampling": ["WarpStateStats", "SourceCounters"]}
# Launch attributes fill the rocprofv3 columns; they are not reported as counters.
LAUNCH_METRICS = ["launch__registers_per_thread", "launch__shared_mem_per_block_static",
                  "launch__shared_mem_per_block_dynamic"]
ENV_LAUNCH_SKIP = "MADENGINE_ROCPROF_NCU_LAUNCH_SKIP"
ENV_LAUNCH_COUNT = "MADENGINE_ROCPROF_NCU_LAUNCH_COUNT"
ENV_CLOCK = "MADENGINE_ROCPROF_NCU_CLOCK_CONTROL"
ENV_METRICS = "MADENGINE_ROCPROF_NCU_METRICS"  # comma list replacing the profile's metric set


def ncu_argv(path: str, profile: str, out: str, parsed: Parsed, env: Mapping[str, str]) -> list[str]:
    host_dir = os.path.join(out, socket.gethostname())
    clock = inputs.env_choice(env, ENV_CLOCK, ("none", "base", "reset"), "none")
    argv = [path, "--clock-control", clock, "--target-processes", "all",
            "--kernel-name-base", "demangled", "--export", os.path.join(host_dir, "ncu_%p"), "--force-overwrite"]
    if profile in NCU_SECTIONS:
        for section in NCU_SECTIONS[profile]:
            argv += ["--section", section]
        argv += ["--metrics", ",".join(LAUNCH_METRICS)]
    else:
        chosen = [m.strip() for m in env.get(ENV_METRICS, "").split(",") if m.strip()] or NCU_METRICS[profile]
        argv += ["--metrics", ",".join(chosen + LAUNCH_METRICS)]
    include = parsed.last("--kernel-include-regex")
    exclude = parsed.last("--kernel-exclude-regex")
    if include or exclude:
        # ncu has only an include filter: an exclusion becomes a negative lookahead.
        pattern = "^" + (f"(?=.*(?:{include}))" if include else "") + (f"(?!.*(?:{exclude}))" if exclude else "")
        argv += ["--kernel-name", f"regex:{pattern}"]
    # checked here: ncu's own refusal would come only after the app started, hidden in its log
    skip = inputs.env_number(env, ENV_LAUNCH_SKIP, 0, high=1e12, integer=True)
    count = inputs.env_number(env, ENV_LAUNCH_COUNT, 0, high=1e12, integer=True)
    if skip:
        argv += ["--launch-skip", str(skip)]
    if count:
        argv += ["--launch-count", str(count)]
    return argv


def nsys_argv(path: str, out: str) -> list[str]:
    host_dir = os.path.join(out, socket.gethostname())
    return [path, "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--export=sqlite",
            "--force-overwrite=true", "--output", os.path.join(host_dir, "nsys_%p")]


# ---------------------------------------------------------------- ncu report -> counter_collection.csv

def _number(text: str):
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() == "n/a":
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _dims(text: str) -> list[int]:
    nums = [int(x) for x in re.findall(r"\d+", text or "")]
    return (nums + [1, 1, 1])[:3] if nums else [1, 1, 1]


# ncu aggregates a metric over units with these roll-ups; the roll-up is the name's second dotted part
# (`sm__throughput.avg.pct_of_peak_sustained_elapsed`). Order = preference when the exact name is missing.
ROLLUPS = ("sum", "avg", "max", "min")
# Columns ncu's raw page always adds (device attributes, links, replay bookkeeping): never counters.
NCU_ATTRIBUTE_PREFIXES = ("device__attribute_", "nvlink__", "numa__", "c2clink__", "profiler__")
_FIXED_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Function Name", "Demangled Name",
                  "Context", "Stream", "Block Size", "Grid Size", "Device", "CC", "Kernel Time", "Estimated Speedup"}


def requested_metrics(ncu_options: list[str]) -> list[str]:
    """The counters asked of ncu: every --metrics value, in order, once each, less the launch attributes the
    wrapper adds for the rocprofv3 columns (VGPR_Count, LDS_Block_Size). Pass ncu's options only, not the app's."""
    names: list[str] = []
    for i, arg in enumerate(ncu_options[:-1]):
        if arg == "--metrics":
            names += [m.strip() for m in ncu_options[i + 1].split(",") if m.strip()]
    return [m for m in dict.fromkeys(names) if m not in LAUNCH_METRICS]


def _without_rollup(name: str) -> tuple[str, str]:
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in ROLLUPS:
        del parts[1]
    return parts[0], ".".join(parts[1:])


def pick_columns(header: list[str], requested: list[str]) -> tuple[dict[str, str], list[str]]:
    """{requested name: raw-page column}: the exact name when ncu printed it, else the closest roll-up of the same
    metric (the name itself without roll-up, then .sum, .avg, .max, .min). Also returns the names not found."""
    present = set(header)
    chosen, missing = {}, []
    for name in requested:
        if name in present:
            chosen[name] = name
            continue
        base, rest = _without_rollup(name)
        tail = "." + rest if rest else ""
        candidates = [base + tail] + [f"{base}.{r}{tail}" for r in ROLLUPS]
        found = next((c for c in candidates if c in present), None)
        if found:
            chosen[name] = found
        else:
            missing.append(name)
    return chosen, missing


def ncu_raw_to_rows(csv_text: str, requested: list[str] | None = None,
                    notes: list[str] | None = None) -> dict[int, list[tuple]]:
    """Parse `ncu --import R --csv --page raw --print-units base` output into counter_collection rows per pid:
    one row per dispatch and requested metric, named as requested. Without `requested` (section-based profiles,
    whose metric names ncu chooses) every metric column is kept except ncu's device/link/replay attributes.
    Roll-up substitutions and metrics absent from the report are described in `notes`."""
    lines = [ln for ln in csv_text.splitlines() if ln.startswith('"')]  # drop ==PROF== and banner lines
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    if not reader:
        return {}
    header = reader[0]
    body = reader[1:]
    if body and _number(body[0][0] if body[0] else "") is None:  # second row holds the units
        body = body[1:]
    col = {name: i for i, name in enumerate(header)}
    name_col = next((c for c in ("Kernel Name", "Function Name", "Demangled Name") if c in col), None)
    if requested:
        columns, missing = pick_columns(header, requested)
        if notes is not None:
            notes += [f"ncu reported {name} as its roll-up {column}" for name, column in columns.items()
                      if name != column]
            if missing:
                notes.append(f"ncu report has no value for requested metric(s): {', '.join(missing)}")
    else:
        columns = {h: h for h in header
                   if h not in _FIXED_COLUMNS and not h.startswith(("launch__",) + NCU_ATTRIBUTE_PREFIXES)}
    duration_col = pick_columns(header, ["gpu__time_duration.sum"])[0].get("gpu__time_duration.sum")
    kernel_ids: dict[str, int] = {}
    per_pid: dict[int, list[tuple]] = {}
    clock = 0
    for row in body:
        if len(row) < len(header):
            continue
        cell = {h: row[i] for h, i in col.items()}
        pid = int(_number(cell.get("Process ID", "")) or 0)
        dispatch = int(_number(cell.get("ID", "")) or 0) + 1  # ncu counts from 0, rocprofv3 from 1
        name = row[col[name_col]] if name_col else ""
        kid = kernel_ids.setdefault(name, len(kernel_ids) + 1)
        block, grid = _dims(cell.get("Block Size", "")), _dims(cell.get("Grid Size", ""))
        wg = block[0] * block[1] * block[2]
        grid_items = wg * grid[0] * grid[1] * grid[2]  # rocprofv3's grid size counts work-items
        lds = sum(int(_number(cell.get(m, "")) or 0) for m in LAUNCH_METRICS[1:])
        vgpr = int(_number(cell.get(LAUNCH_METRICS[0], "")) or 0)
        duration = int(_number(cell.get(duration_col, "") if duration_col else "") or 0)
        start, end = clock, clock + duration  # replay-relative: ncu serialises kernels
        clock = end
        for metric, column in columns.items():
            value = _number(row[col[column]])
            if value is None:
                continue
            per_pid.setdefault(pid, []).append(
                (dispatch, dispatch, f"Agent {cell.get('Device', '0') or '0'}",
                 int(_number(cell.get("Stream", "")) or 0), pid, 0, grid_items, kid, name, wg, lds, 0, vgpr, 0, 0,
                 metric, float(value), start, end))
    return per_pid


def convert_ncu(reports: list[str], ncu_path: str, messages: list[str],
                requested: list[str] | None = None) -> list[str]:
    """Write <host>/<pid>_counter_collection.csv next to every .ncu-rep, keeping the `requested` metrics
    (see ncu_raw_to_rows); returns the files written."""
    written = []
    for report in reports:
        done = subprocess.run([ncu_path, "--import", report, "--csv", "--page", "raw", "--print-units", "base"],
                              capture_output=True, text=True, errors="replace")
        if done.returncode != 0:
            messages.append(f"ncu --import {os.path.basename(report)} failed: {done.stderr.strip()[-300:]}")
            continue
        notes: list[str] = []
        for pid, rows in sorted(ncu_raw_to_rows(done.stdout, requested, notes).items()):
            path = os.path.join(os.path.dirname(report), f"{pid}_counter_collection.csv")
            rocprof_csv.write_rows(path, rocprof_csv.COUNTER_COLLECTION, rows)
            written.append(path)
        messages += [f"{os.path.basename(report)}: {n}" for n in notes]
    return written


# ---------------------------------------------------------------- nsys sqlite -> kernel_trace.csv

def nsys_sqlite_to_rows(db_path: str) -> dict[int, list[tuple]]:
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            return {}
        cur = con.execute(
            "select k.start, k.end, k.deviceId, k.streamId, k.correlationId, k.globalPid, s.value,"
            " k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread,"
            " k.staticSharedMemory + k.dynamicSharedMemory"
            " from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.demangledName order by k.start")
        kernel_ids: dict[str, int] = {}
        per_pid: dict[int, list[tuple]] = {}
        for n, (start, end, dev, stream, corr, gpid, name, gx, gy, gz, bx, by, bz, regs, lds) in enumerate(cur, 1):
            pid = (int(gpid) >> 24) & 0xFFFFFF  # nsys packs the pid into globalPid
            kid = kernel_ids.setdefault(name, len(kernel_ids) + 1)
            per_pid.setdefault(pid, []).append(
                ("KERNEL_DISPATCH", f"Agent {dev}", stream, stream, 0, n, kid, name, corr, start, end, lds, 0, regs,
                 0, 0, bx, by, bz, gx * bx, gy * by, gz * bz))
        return per_pid
    finally:
        con.close()


def convert_nsys(databases: list[str], messages: list[str]) -> list[str]:
    written = []
    for db in databases:
        try:
            per_pid = nsys_sqlite_to_rows(db)
        except sqlite3.Error as exc:
            messages.append(f"cannot read {os.path.basename(db)}: {exc}")
            continue
        for pid, rows in sorted(per_pid.items()):
            base = os.path.join(os.path.dirname(db), f"{pid}_")
            rocprof_csv.write_rows(base + "kernel_trace.csv", rocprof_csv.KERNEL_TRACE, rows)
            durations: dict[str, list[int]] = {}
            for r in rows:
                durations.setdefault(r[7], []).append(r[10] - r[9])
            rocprof_csv.write_rows(base + "kernel_stats.csv", rocprof_csv.STATS, rocprof_csv.kernel_stats(durations))
            written += [base + "kernel_trace.csv", base + "kernel_stats.csv"]
    return written
