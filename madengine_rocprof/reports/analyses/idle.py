"""Where a device's idle time comes from: launch-bound, synchronization, waiting for other ranks, or other.

Idle time is the report's: within a window (the device's span, or an iteration's window), the time no kernel, copy
or memset runs on the device. It is a sequence of gaps between the union of the device's intervals. Each gap is
given one cause, so the four parts add up to the idle time exactly (integer ns):

- the gap ends when an operation O starts; O's launching runtime call starts at L (correlation id);
- O has no launch link (`other`: unlinked), or the trace has no runtime calls at all;
- L is before the gap's start: O was already queued when the device ran dry, so the device waited with work in its
  queue (a dependency on another stream or device, or the launch latency itself): `other` (queued);
- otherwise the queue was empty and the host had not issued O yet: the host set the pace. What the host was doing
  when the device ran dry (at the gap's start, any thread of the process) names the cause:
  inside a collective call (NCCL/RCCL/gloo `record_param_comms` or `nccl:*` operator): waiting for other ranks;
  inside a device/stream/event synchronize or a blocking copy: synchronization;
  inside the data loader (`enumerate(DataLoader)...`): `other` (data loading);
  else launch-bound: the host was still issuing work, one launch at a time.
- time before the device's first operation and after its last one inside a window is `other` (edges).

Runs as polars queries over the trace tables (reports/trace_tables.py columns): O(n log n) in the operations.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from madengine_rocprof.reports import dispatches
from madengine_rocprof.reports.analyses.launch import source_tables
from madengine_rocprof.reports.model import RunData

# host calls that block until the device (or a stream, or an event) has finished: CUDA runtime and driver, HIP
SYNC_CALL = re.compile(
    r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$"
    r"|^cu(?:Ctx|Stream|Event)Synchronize$"
    r"|^(?:cuda|hip)Memcpy(?:2D|3D|Peer|ToSymbol|FromSymbol|DtoH|HtoD|DtoD)?(?:_v2)?$"  # blocking copies
    r"|^cuMemcpy(?:DtoH|HtoD|DtoD|Peer)?(?:_v2)?$"
)
DATA_LOADING = re.compile(r"^enumerate\(DataLoader\)")
CAUSES = ("launch", "sync", "other_ranks", "other")
IDLE_BOUND = 0.2  # below this share of idle time, the device sets the pace
OTHER_REASONS = ("queued", "unlinked", "data_loading", "edges")
# gap codes: the four causes' parts, other split by reason
LAUNCH, SYNC, OTHER_RANKS, QUEUED, UNLINKED, DATA, EDGES = range(7)
CODE_FIELD = {LAUNCH: "launch_ns", SYNC: "sync_ns", OTHER_RANKS: "other_ranks_ns", QUEUED: "queued_ns",
              UNLINKED: "unlinked_ns", DATA: "data_loading_ns", EDGES: "edges_ns"}


def operations(kernels: pl.DataFrame, copies: pl.DataFrame, runtime: pl.DataFrame) -> pl.DataFrame:
    """Kernels and copies (device, start, end) with `launch`: the start of their launching runtime call (null when
    the trace links none)."""
    def with_launch(gpu: pl.DataFrame) -> pl.DataFrame:
        launch = gpu["launch"] if "launch" in gpu.columns else dispatches.launch_times(gpu, runtime)
        return gpu.select("device", "start", "end").with_columns(launch=launch.cast(gpu.schema["start"]))

    return pl.concat([with_launch(kernels), with_launch(copies)], how="vertical_relaxed")


def _merged(frame: pl.DataFrame) -> pl.DataFrame:
    """The union of host intervals (start, end) as disjoint sorted intervals (s, e)."""
    if frame.height == 0:
        return pl.DataFrame({"s": [], "e": []}, schema={"s": pl.Int64, "e": pl.Int64})
    f = frame.select("start", "end").sort("start")
    return (
        f.with_columns(new=(pl.col("start") > pl.col("end").cum_max().shift(1)).fill_null(True).cum_sum())
        .group_by("new")
        .agg(pl.col("start").min().alias("s"), pl.col("end").max().alias("e"))
        .sort("s")
        .select("s", "e")
    )


def _inside(points: pl.Series, merged: pl.DataFrame) -> pl.Series:
    """Whether each point lies in one of the disjoint intervals [s, e)."""
    if merged.height == 0 or points.len() == 0:
        return pl.Series([False] * points.len(), dtype=pl.Boolean)
    s = merged["s"].cast(points.dtype)
    e = merged["e"].cast(points.dtype)
    index = s.search_sorted(points, side="right").cast(pl.Int64) - 1
    return ((index >= 0) & (points < e.gather(index.clip(lower_bound=0)))).fill_null(False)


def host_activity(runtime: pl.DataFrame, cpu_ops: pl.DataFrame, comms: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """The host's blocking states, each as a union of intervals: collective calls, synchronizations, data loading."""
    sync_names = [n for n in runtime["name"].unique().to_list() if n is not None and SYNC_CALL.match(n)]
    data_names = [n for n in cpu_ops["name"].unique().to_list() if n is not None and DATA_LOADING.match(n)]
    return {
        OTHER_RANKS: _merged(comms),
        SYNC: _merged(runtime.filter(pl.col("name").is_in(sync_names))),
        DATA: _merged(cpu_ops.filter(pl.col("name").is_in(data_names))),
    }


def gaps(ops: pl.DataFrame, host: dict[int, pl.DataFrame]) -> pl.DataFrame:
    """The idle gaps (g0, g1, code) of one device's operations (start, end, launch), in order."""
    if ops.height == 0:
        return pl.DataFrame({"g0": [], "g1": [], "code": []}, schema={"g0": pl.Int64, "g1": pl.Int64, "code": pl.Int8})
    ordered = ops.sort(["start", "launch"], nulls_last=True)
    found = (
        ordered.with_columns(g0=pl.col("end").cum_max().shift(1))
        .filter(pl.col("start") > pl.col("g0"))
        .select("g0", pl.col("start").alias("g1"), "launch")
    )
    g0 = found["g0"]
    # the first that holds wins: unlinked, queued, other ranks, sync, data loading, else launch-bound
    code = (pl.when(pl.col("launch").is_null()).then(pl.lit(UNLINKED, pl.Int8))
            .when((pl.col("launch") < pl.col("g0")).fill_null(False)).then(pl.lit(QUEUED, pl.Int8))
            .when(pl.lit(_inside(g0, host[OTHER_RANKS]))).then(pl.lit(OTHER_RANKS, pl.Int8))
            .when(pl.lit(_inside(g0, host[SYNC]))).then(pl.lit(SYNC, pl.Int8))
            .when(pl.lit(_inside(g0, host[DATA]))).then(pl.lit(DATA, pl.Int8))
            .otherwise(pl.lit(LAUNCH, pl.Int8)))
    return found.select("g0", "g1", code.alias("code"))


def _totals(g: pl.DataFrame) -> dict[int, int]:
    sums = g.group_by("code").agg((pl.col("g1") - pl.col("g0")).cast(pl.Int128).sum().alias("ns"))
    return {int(c): int(n) for c, n in sums.iter_rows()}


def _in_windows(g: pl.DataFrame, first: int, last: int, windows: list[tuple[int, int]]) -> list[dict[int, int]]:
    """Per window [lo, hi), each code's idle time inside it: gaps cut at the window's edges (prefix sums over the
    gaps, two searches per window, all windows at once), plus the edges before `first` and after `last` (the
    device's first start and last end)."""
    edges = [max(0, min(hi, first) - lo) + max(0, hi - max(lo, last)) for lo, hi in windows]
    if g.height == 0:
        return [{EDGES: e} for e in edges]
    lengths = (g["g1"] - g["g0"]).cast(pl.Int128)
    codes, g0, g1 = g["code"], g["g0"], g["g1"]
    zero = pl.Series([0], dtype=pl.Int128)
    # prefix[c][k]: code c's gap time in the first k gaps
    prefix = {c: pl.concat([zero, (lengths * (codes == c).cast(pl.Int128)).cum_sum()])
              for c in codes.unique().to_list()}

    def before(t: pl.Series) -> dict[int, list[int]]:
        """Each code's gap time before each t: whole gaps up to the last that starts before t, and its part."""
        k = g0.search_sorted(t, side="left").cast(pl.Int64)  # gaps that start before t
        last = (k - 1).clip(lower_bound=0)
        part = (pl.DataFrame({"g1": g1.gather(last), "t": t.cast(g1.dtype)})
                .select(pl.min_horizontal("g1", "t")).to_series() - g0.gather(last)).cast(pl.Int128)
        part = part * (k > 0).cast(pl.Int128)
        last_code = codes.gather(last)
        return {c: (acc.gather(last) * (k > 0).cast(pl.Int128) + part * (last_code == c).cast(pl.Int128)).to_list()
                for c, acc in prefix.items()}

    his = before(pl.Series([hi for _, hi in windows], dtype=g0.dtype))
    los = before(pl.Series([lo for lo, _ in windows], dtype=g0.dtype))
    rows = []
    for i, edge in enumerate(edges):
        row = {c: his[c][i] - los[c][i] for c in prefix}
        row[EDGES] = edge
        rows.append(row)
    return rows


def _row(parts: dict[int, int]) -> dict[str, Any]:
    other = {CODE_FIELD[c][:-3]: parts.get(c, 0) for c in (QUEUED, UNLINKED, DATA, EDGES)}
    row = {
        "idle_ns": sum(parts.values()),
        "launch_ns": parts.get(LAUNCH, 0),
        "sync_ns": parts.get(SYNC, 0),
        "other_ranks_ns": parts.get(OTHER_RANKS, 0),
        "other_ns": sum(other.values()),
    }
    return row | {"other": {f"{k}_ns": v for k, v in other.items()}}


def device_causes(ops: pl.DataFrame, host: dict[int, pl.DataFrame],
                  windows: list[tuple[int, int, int]]) -> dict[str, Any]:
    """One device: idle causes over its span and per iteration window (number, lo, hi)."""
    g = gaps(ops, host)
    last = int(ops["end"].max()) if ops.height else 0  # type: ignore[arg-type]
    first = int(ops["start"].min()) if ops.height else 0  # type: ignore[arg-type]
    span = last - first
    row = {"span_ns": span} | _row(_totals(g))
    row["gaps"] = g.height
    row["linked_share"] = ops["launch"].is_not_null().sum() / ops.height if ops.height else None
    if windows and ops.height:
        cut = _in_windows(g, first, last, [(lo, hi) for _, lo, hi in windows])
        row["iterations"] = [{"iteration": n, "span_ns": hi - lo} | _row(parts)
                             for (n, lo, hi), parts in zip(windows, cut, strict=True)]
    else:
        row["iterations"] = []
    return row


def verdict(rows: list[dict[str, Any]], has_runtime: bool) -> dict[str, Any]:
    """What bounds the run, in one line with its numbers (sums over devices)."""
    span = sum(r["span_ns"] for r in rows)
    idle = sum(r["idle_ns"] for r in rows)
    parts = {c: sum(r[f"{c}_ns"] for r in rows) for c in CAUSES}
    if not rows or span == 0:
        return {"bound": None, "line": "no device timeline: nothing to say about idle time"}
    idle_pct = 100 * idle / span
    if not has_runtime:
        return {"bound": "unknown", "idle_share": idle / span, "line": (
            f"{idle_pct:.1f}% of the device span idle; this trace has no runtime API calls, so the idle time cannot "
            "be split into launch-bound, synchronization and waiting for other ranks (record them: --hip-trace, or "
            "a PyTorch profiler trace with CUDA activities)")}
    cause = max(CAUSES, key=lambda c: parts[c])
    share = parts[cause] / span
    pct = 100 * share
    if idle / span < IDLE_BOUND:
        return {"bound": "device", "idle_share": idle / span, "line": (
            f"device-bound: busy {100 - idle_pct:.1f}% of the span, idle {idle_pct:.1f}% "
            f"(launch-bound {100 * parts['launch'] / span:.1f}%, synchronization {100 * parts['sync'] / span:.1f}%); "
            "faster kernels (see the top kernels) pay off first")}
    lines = {
        "launch": f"launch-bound: {pct:.1f}% of the device span idle with an empty queue while the host was still "
                  "issuing work; CUDA/HIP graphs, torch.compile or kernel fusion would help",
        "sync": f"synchronization-bound: {pct:.1f}% of the device span idle after the host blocked in a synchronize "
                "or a blocking copy; remove .item()/.cpu()/torch.cuda.synchronize() from the loop or overlap them",
        "other_ranks": f"waiting for other ranks: {pct:.1f}% of the device span idle while the host was in a "
                       "collective; see the collectives section for the late rank",
        "other": f"idle {pct:.1f}% of the device span for other reasons (work queued behind dependencies, data "
                 "loading, or launches the trace does not link); see the idle-time table",
    }
    return {"bound": cause, "idle_share": idle / span, "share": share, "line": lines[cause]}


DEVICE_NUMBER = re.compile(r"(\d+)\s*$")  # "GPU 0" (Kineto), "Agent 4" / "4" (rocprofv3 CSV): the device number
NO_API_CALLS = (
    "no runtime API calls in {files}: idle time cannot be split into launch-bound, synchronization and waiting for "
    "other ranks. Record them: rocprofv3 or the wrapper with --hip-trace (the rocprofv3_lightweight tool; on NVIDIA "
    "the embedded tracer's CUPTI backend writes them as hip_api_trace.csv), or a PyTorch profiler trace with CUDA "
    "activities. The `lightweight` core profile traces kernels only"
)
NO_HOST_OPS = (
    "no CPU operator records in {files}: data loading and collectives on the host are not told apart from "
    "launch-bound time; a PyTorch profiler trace (or the embedded tracer's torch backend) records them"
)


def analyze_run(run: RunData, timeline: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per process and device (as in `timeline`), idle time by cause over the device's span and per iteration; the
    run's verdict; notes on what the traces cannot tell. None when no source has per-event tables."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    without_api, without_ops = [], []
    ranks = {(t["origin"], t["device"]): t["rank"] for t in timeline}
    for src in run.timing:
        tables = source_tables(src) if src.devices else None
        if tables is None:
            if src.devices and src.fmt == "rocprofv3-csv" and not src.cpu_operators:  # kernels without API calls:
                without_api.append(src.rel)  # nothing links a gap to the host: all idle is unlinked (no 2nd read)
                rows += [{"origin": src.process, "rank": ranks.get((src.process, d.device)), "device": d.device,
                          "span_ns": d.span_ns} | _row({UNLINKED: d.span_ns - d.busy_ns})
                         | {"gaps": None, "linked_share": 0.0, "iterations": []} for d in src.devices]
            continue
        if tables.runtime.height == 0:
            without_api.append(src.rel)
        if tables.cpu_ops.height == 0 and tables.runtime.height:
            without_ops.append(src.rel)
        ops = operations(tables.kernels, tables.copies, tables.runtime)
        host = host_activity(tables.runtime, tables.cpu_ops, tables.comms)
        for device in src.devices:
            number = DEVICE_NUMBER.search(device.device)
            # a device id beyond Int64 (a corrupt `args.device`) is absent from the tables (trace_tables reads it
            # as null), like a device named by text: no operations, so the check below notes it, never a crash
            value = int(number.group(1)) if number and len(number.group(1)) < 19 else None
            part = ops.filter(pl.col("device") == value) if value is not None else ops.clear()
            windows = [(it.number, it.start_ns, it.end_ns) for it in device.iterations]
            row = device_causes(part, host, windows)
            if value is None and number:
                notes.append(f"{src.rel} {device.device[:40]}: the device id is not a device number (a corrupt "
                             "`args.device` in the trace); no idle split for this device")
                continue
            if part.height != device.dispatches + device.copies or row["idle_ns"] != device.span_ns - device.busy_ns:
                notes.append(f"{src.rel} {device.device}: the trace tables hold other operations than the timeline "
                             "(a reader bug, please report it); no idle split for this device")
                continue
            rows.append({"origin": src.process, "rank": ranks.get((src.process, device.device)),
                         "device": device.device} | row)
    if not rows and not notes:
        return None
    if without_api:
        notes.append(NO_API_CALLS.format(files=", ".join(without_api)))
    if without_ops:
        notes.append(NO_HOST_OPS.format(files=", ".join(without_ops)))
    return {"bound": verdict(rows, has_runtime=not without_api), "devices": rows, "notes": notes}
