"""How close each operator comes to what the GPU can do: a roofline per (operator, shape) from the trace's shapes.

For a PyTorch profiler trace recorded with `record_shapes=True`:
1. each GPU kernel is linked to the CPU operator that launched it: the cpu_op whose `External id` the kernel
   carries, else the one its runtime call carries (kernel correlation id -> runtime call -> `External id`), else
   the innermost op enclosing that call on its thread; kernels replayed from a CUDA/HIP graph are not linked (the
   ops that issued them ran at capture) and are counted apart;
2. the kernel's time is given to one operator on that operator's call stack, so each FLOP and each nanosecond is
   counted once: the outermost composite operator with a fused model (cross-entropy), else the innermost operator
   that has a model (aten::addmm, not the aten::linear above it; aten::mm under MmBackward0; the convolution above
   cudnn_convolution), else the launching operator itself, which is then listed as unmodelled;
3. an operator call's GPU time is the union of its kernels' intervals (kernels that overlap count once); its FLOPs
   and bytes come from reports/analyses/op_models.py, evaluated once per distinct (name, dims, types, strides,
   concrete inputs);
4. per (operator, shape) group: achieved TFLOP/s and TB/s, arithmetic intensity, the device peak for the dtype and
   unit (matrix or vector) with its source, the roofline time max(FLOPs / peak FLOP rate, bytes / peak bandwidth),
   the bound (compute when the FLOP term is the larger, i.e. the intensity is at or above the ridge point), the
   percent of the roofline reached, and the time that would be saved at `target` of the roofline.
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from madengine_rocprof.insights.peaks import Peak
from madengine_rocprof.reports import id_lookup
from madengine_rocprof.reports.analyses import nesting, op_models

DEFAULT_TARGET = 0.8  # the fraction of the roofline a tuned kernel is taken to reach when ranking what to fix first
# an fp32 GEMM/convolution kernel that ran on tensor cores as TF32 (cuBLAS/CUTLASS name it so; hipBLASLt says xf32)
TF32_KERNEL = re.compile(r"tf32|xf32", re.IGNORECASE)
KEY = ("name", "input_dims", "input_types", "input_strides", "concrete_inputs")
GRAPH_LAUNCH = r"(?i)graphlaunch"  # cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch
MAX_ENCLOSING_QUERIES = 100_000  # kernels without an operator id looked up by time; more are left unlinked
UNLINKED_LISTED = 5  # the longest kernels no operator launched, by name, in the JSON and the note
CHAIN_LIMIT = 512  # a launching op's chain of enclosing ops is followed this far (a bound on corrupt nesting)
# why a row can pass 100% of its roofline: the roofline's bytes are HBM bytes, and a tensor that fits in the
# GPU's last-level cache (50 MB on H100, 256 MB Infinity Cache on MI300X) is read from there, faster than HBM;
# or the model counts work the kernels did not do (a broadcast input read once, an op fused into its neighbour)
ABOVE_ROOFLINE = ("above 100% of the roofline: its data was served from cache faster than the HBM bandwidth the "
                  "roofline assumes, or the model counts bytes or FLOPs the kernels did not move or compute "
                  "(a broadcast input, work fused elsewhere); read it as at the roofline, not beyond the GPU")


def _parse(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _enclosing(ops: pl.DataFrame, queries: list[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
    """The innermost op enclosing each (pid, tid, time) query on its thread, by one sweep per thread."""
    found: dict[tuple[int, int, int], int] = {}
    threads = {(pid, tid) for pid, tid, _ in queries}
    events = ops.filter(pl.struct("pid", "tid").is_in(
        pl.DataFrame({"pid": [p for p, _ in threads], "tid": [t for _, t in threads]},
                     schema={"pid": ops.schema["pid"], "tid": ops.schema["tid"]}).to_struct().implode()))
    # ops sort before queries at the same time (an op starting at the launch encloses it), outer ops first
    items = [(pid, tid, start, 0, -end, op) for op, pid, tid, start, end in
             events.select("op", "pid", "tid", "start", "end").iter_rows()]
    items += [(pid, tid, t, 1, 0, -1) for pid, tid, t in queries]
    items.sort()
    stack: list[tuple[int, int]] = []
    thread = None
    for pid, tid, t, kind, neg_end, op in items:
        if (pid, tid) != thread:
            thread, stack = (pid, tid), []
        while stack and stack[-1][0] <= t:
            stack.pop()
        if kind == 0:
            stack.append((-neg_end, op))
        elif stack:
            found[(pid, tid, t)] = stack[-1][1]
    return found


def _kernel_ops(kernels: pl.DataFrame, runtime: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """The kernels with the index of their launching cpu_op (`op`, null when none is found): by the kernel's own
    `External id` where it names a cpu_op (Kineto writes the launching op's id on the kernel too), else through
    its runtime call (correlation -> the call's `External id`), which older Kineto traces need less and some
    write as the correlation itself."""
    ids64 = [pl.col(c).cast(pl.Int64, strict=False) for c in ("correlation", "external_id")]
    k = kernels.select("name", "start", "end", *ids64)  # a column of nulls only may come typed Null: not a key
    # each kernel's runtime call (its first by correlation id) and operators by External id: sorted-id lookups
    # (id_lookup), not hash joins of millions of rows
    if runtime.height:
        names = runtime["name"].unique().cast(pl.String)  # matched once per distinct name (String or Categorical)
        launches = names.filter(names.str.contains(GRAPH_LAUNCH))
        calls = id_lookup.index(runtime.select(
            pl.col("correlation").cast(pl.Int64, strict=False), pl.col("external_id").alias("_rt_ext"),
            pl.col("name").is_in(launches.implode()).alias("graph"), "pid", "tid", pl.col("start").alias("_at")),
            "correlation")
        k = k.with_columns(id_lookup.lookup(calls.select("correlation", "_rt_ext", "graph"), "correlation",
                                            k["correlation"])).with_columns(pl.col("graph").fill_null(False))
    else:
        calls = None
        k = k.with_columns(pl.lit(None, dtype=pl.Int64).alias("_rt_ext"), pl.lit(False).alias("graph"))
    named = pl.concat([k["external_id"], k["_rt_ext"].cast(pl.Int64)]).drop_nulls().unique()
    if ops.schema["external_id"] not in (pl.Int32, pl.Int64):  # a column of nulls only may come typed Null
        ops = ops.with_columns(pl.col("external_id").cast(pl.Int64, strict=False))
    ext = ops.schema["external_id"]
    by_id = id_lookup.index(ops.filter(pl.col("external_id").is_in(named.cast(ext, strict=False).drop_nulls()
                                                                   .implode())).select("external_id", "op"),
                            "external_id", keep="last")
    k = k.with_columns(id_lookup.lookup(by_id, "external_id", k["external_id"])["op"].alias("_own"),
                       id_lookup.lookup(by_id, "external_id", k["_rt_ext"])["op"].alias("_via"))
    # a kernel replayed from a CUDA/HIP graph belongs to the operator that ran at capture, which the trace does not
    # hold: it stays unattributed (the graph launch's enclosing op is not the one that did the work). A graph
    # launch is the one call whose correlation id several kernels share, also where the call itself is not in
    # the trace (a replay in the profiler's warm-up step)
    k = k.with_columns((pl.col("graph") | pl.col("correlation").is_duplicated() & pl.col("correlation").is_not_null())
                       .alias("graph"))
    k = k.with_columns(pl.when(pl.col("graph")).then(None).otherwise(pl.coalesce("_own", "_via")).alias("op")).drop(
        "_own", "_via", "_rt_ext")
    # a kernel launched outside any operator's id (a Triton kernel called from Python, e.g. a fused optimizer):
    # the innermost op or annotation that encloses its runtime call on the calling thread, where one does
    unlinked = k.filter(pl.col("op").is_null() & pl.col("correlation").is_not_null() & ~pl.col("graph"))
    calls = pl.DataFrame() if calls is None else unlinked.select("correlation").with_columns(
        id_lookup.lookup(calls.select("correlation", "pid", "tid", "_at"), "correlation", unlinked["correlation"])
    ).filter(pl.col("_at").is_not_null())
    if 0 < calls.height <= MAX_ENCLOSING_QUERIES:
        found = _enclosing(ops, list(set(calls.select("pid", "tid", "_at").iter_rows())))
        if found:
            by_call = pl.DataFrame(
                {"correlation": calls["correlation"],
                 "_enc": [found.get(q) for q in calls.select("pid", "tid", "_at").iter_rows()]},
                schema={"correlation": k.schema["correlation"], "_enc": k.schema["op"]}).unique("correlation")
            k = (k.join(by_call, on="correlation", how="left")
                 .with_columns(pl.coalesce("op", "_enc").alias("op")).drop("_enc"))
    return k


def _union_per(frame: pl.DataFrame, by: str, *extra: pl.Expr) -> pl.DataFrame:
    """The union of [start, end) intervals per `by` value, in ns (and the `extra` aggregations of each group, in the
    same pass). Sorted by start, a group whose every interval starts at or after the previous one's end is disjoint
    (each earlier interval ended before that), so its union is the sum of its durations; only groups where some
    interval overlaps its predecessor are merged one by one."""
    s = frame.sort([by, "start", "end"])
    s = s.with_columns(((pl.col(by) == pl.col(by).shift(1)) & (pl.col("start") < pl.col("end").shift(1)))
                       .fill_null(False).alias("_overlap"))
    per = s.group_by(by).agg((pl.col("end") - pl.col("start")).sum().cast(pl.Int64).alias("union_ns"),
                             pl.col("_overlap").any().alias("_merge"), *extra)
    overlapping = per.filter(pl.col("_merge"))[by]
    if overlapping.len():
        current: dict[int, tuple[int, int]] = {}  # group -> (union so far, end of the merged run so far)
        for key, start, end in (s.filter(pl.col(by).is_in(overlapping.implode())).select(by, "start", "end")
                                .iter_rows()):
            union, reach = current.get(key, (0, None))
            if reach is None or start >= reach:
                union += end - start
                reach = end
            elif end > reach:
                union += end - reach
                reach = end
            current[key] = (union, reach)
        merged = pl.DataFrame({by: list(current), "_union": [union for union, _ in current.values()]},
                              schema={by: per.schema[by], "_union": pl.Int64})
        per = (per.join(merged, on=by, how="left")
               .with_columns(pl.coalesce("_union", "union_ns").alias("union_ns")).drop("_union"))
    return per.drop("_merge")


def _owners(ops: pl.DataFrame, launchers: pl.Series, modelled: list[bool], composite: list[bool]) -> pl.DataFrame:
    """`op` (each launching op) and `owner`, the op on its call stack that its kernels' time goes to: the outermost
    composite with a model, else the innermost op with a model (itself included), else itself. `ops` has `op`,
    `pid`, `tid`, `start`, `end` and `key` (the index into `modelled` / `composite` of its name and shapes)."""
    found = nesting.tree(ops)
    if found is None or (found.height and found["depth"].max() >= CHAIN_LIMIT):  # type: ignore[operator]
        return _owners_by_walk(ops, launchers, modelled, composite)
    # by position in the tree's (sweep) order: each op's flags and its parent's position (id_lookup, no joins)
    n = found.height
    if not n:  # no op: no launching op either
        return pl.DataFrame(schema={"op": ops.schema["op"], "owner": ops.schema["op"]})
    key = id_lookup.lookup(id_lookup.index(ops.select("op", "key"), "op"), "op", found["op"])["key"]
    cost = pl.Series(modelled, dtype=pl.Boolean).gather(key)
    fused = pl.Series(composite, dtype=pl.Boolean).gather(key)
    positions = found.select("op", pl.int_range(n, dtype=pl.UInt32).alias("pos"))
    parent = id_lookup.lookup(id_lookup.index(positions, "op"), "op", found["parent"].cast(pl.Int64))["pos"]
    op = found["op"]
    inner = pl.select(pl.when(pl.lit(cost)).then(pl.lit(op))).to_series()
    outer = pl.select(pl.when(pl.lit(fused)).then(pl.lit(op))).to_series()
    # top down, a level at a time: an op takes its parent's innermost modelled op and outermost composite
    by_depth = found.select(pl.int_range(n, dtype=pl.UInt32).alias("row"), "depth").sort("depth", maintain_order=True)
    depths = by_depth["depth"]
    bounds = depths.search_sorted(pl.Series(range(int(depths[-1]) + 2), dtype=depths.dtype), side="left").to_list()
    for depth in range(1, int(depths[-1]) + 1):
        rows = by_depth["row"].slice(bounds[depth], bounds[depth + 1] - bounds[depth])
        if not rows.len():
            continue
        up = parent.gather(rows)
        inner.scatter(rows, inner.gather(rows).fill_null(inner.gather(up)))
        outer.scatter(rows, outer.gather(up).fill_null(outer.gather(rows)))
    every = pl.DataFrame({"op": op, "inner": inner, "outer": outer}).gather(by_depth["row"])
    return (every.filter(pl.col("op").is_in(launchers.implode()))
            .select("op", pl.coalesce("outer", "inner", "op").alias("owner")))


def _owners_by_walk(ops: pl.DataFrame, launchers: pl.Series, modelled: list[bool],
                    composite: list[bool]) -> pl.DataFrame:
    """`_owners` by walking each launching op's chain of parents, for ops that do not nest properly (a partial
    overlap) or nest deeper than CHAIN_LIMIT (a chain is followed that far and no further)."""
    parents = nesting.reference_parents(ops)
    op_key = dict(zip(ops["op"].to_list(), ops["key"].to_list(), strict=True))
    owner: dict[int, int] = {}
    for launcher in launchers.to_list():
        chain: list[int] = []
        i = launcher
        while i != -1 and len(chain) < CHAIN_LIMIT:
            chain.append(i)
            i = parents[i]
        fused = next((j for j in reversed(chain) if composite[op_key[j]]), None)
        owner[launcher] = fused if fused is not None else next(
            (j for j in chain if modelled[op_key[j]]), launcher)
    return pl.DataFrame({"op": list(owner), "owner": list(owner.values())}, schema={"op": ops.schema["op"],
                                                                                    "owner": ops.schema["op"]})


def _peak_for(peak: Peak | None, cost: op_models.Cost, tf32: bool) -> tuple[float | None, str]:
    """The compute peak (TFLOP/s) for this cost and the words that say which peak it is."""
    if peak is None:
        return None, ""
    dtype = "tf32" if tf32 and cost.dtype == "fp32" and cost.unit == "matrix" else cost.dtype
    if cost.unit == "matrix":
        value = peak.matrix_tflops(dtype)
        if value is not None:
            return value, f"{dtype} matrix"
        if dtype == "fp32":  # an FP32 GEMM without tensor cores (NVIDIA): the CUDA cores' rate
            return peak.vector_tflops("fp32"), "fp32 vector (no fp32 matrix unit)"
        return None, ""
    value = peak.vector_tflops(dtype)
    if value is not None:
        return value, f"{dtype} vector"
    return peak.vector_tflops("fp32"), "fp32 vector" + ("" if dtype == "fp32" else f" (no {dtype} vector figure)")


def analyse(cpu_ops: pl.DataFrame, runtime: pl.DataFrame, kernels: pl.DataFrame, peak: Peak | None,
            device: str | None = None, target: float = DEFAULT_TARGET) -> dict | None:
    """The efficiency table of one trace; None when it has no kernels or no recorded shapes."""
    if kernels.is_empty() or cpu_ops.is_empty() or "input_dims" not in cpu_ops.columns:
        return None
    if cpu_ops["input_dims"].null_count() == cpu_ops.height:
        return None
    ops = cpu_ops.with_row_index("op")
    k = _kernel_ops(kernels, runtime, ops)
    total_ns = int(k.select((pl.col("end") - pl.col("start")).cast(pl.Int128).sum()).item() or 0)
    launchers = k["op"].drop_nulls().unique()

    # only the launching ops and the ops with a model can own a kernel's time: nesting is computed among them
    # (an ancestor in the whole tree still encloses its descendants in time), which drops views, allocations and
    # annotations; each distinct (name, dims, types, strides, concrete) gets an id, and its cost is computed once
    ops = ops.select("op", "pid", "tid", "start", "end", *KEY).filter(
        pl.col("op").is_in(launchers.implode()) | pl.col("name").is_in(list(op_models.MODELS)))
    distinct = ops.select("op", *KEY).group_by(KEY, maintain_order=True).agg("op")  # in order of first appearance
    key_rows = distinct.select(*KEY).rows()
    keys = distinct.select("op").with_row_index("key").explode("op").sort("op")  # the ops' own order
    ops = ops.select("op", "pid", "tid", "start", "end").with_columns(keys["key"])
    costs = [op_models.cost(name, _parse(dims), _parse(types), _parse(strides), _parse(concrete))
             if dims is not None and op_models.has_model(name) else None
             for name, dims, types, strides, concrete in key_rows]
    composite = [row[0] in op_models.COMPOSITES and cost is not None for row, cost in zip(key_rows, costs,
                                                                                           strict=True)]
    owners = _owners(ops, launchers, [c is not None for c in costs], composite)

    attributed = k.filter(pl.col("op").is_not_null()).join(owners, on="op", how="left")
    names = attributed["name"].unique().cast(pl.String)  # the kernel names, matched once each
    tf32_names = names.filter(names.str.contains(TF32_KERNEL.pattern))
    per_call = _union_per(
        attributed.select("owner", "start", "end", pl.col("name").is_in(tf32_names.implode()).alias("tf32")), "owner",
        pl.col("tf32").any(), (pl.col("end") - pl.col("start")).cast(pl.Int128).sum().alias("kernel_ns"),
        pl.len().alias("kernels"))
    unlinked_top = (k.filter(pl.col("op").is_null() & ~pl.col("graph")).group_by("name")
                    .agg(pl.len().alias("kernels"), (pl.col("end") - pl.col("start")).sum().cast(pl.Int64)
                         .alias("time_ns"))
                    .sort(["time_ns", "name"], descending=[True, False]).head(UNLINKED_LISTED).to_dicts())
    graph_ns = int(k.filter(pl.col("graph")).select((pl.col("end") - pl.col("start")).cast(pl.Int128).sum()).item()
                   or 0)
    unlinked_ns = total_ns - graph_ns - int(
        attributed.select((pl.col("end") - pl.col("start")).cast(pl.Int128).sum()).item() or 0)

    # per (operator, shape) group, and per kind of kernel where the op has a model (fp32 GEMMs that ran as TF32
    # apart): the calls, the union of their kernels' time, the kernels' own time and count
    modelled = pl.DataFrame({"key": range(len(costs)), "_modelled": [c is not None for c in costs]},
                            schema={"key": ops.schema["key"], "_modelled": pl.Boolean})
    per_group = (per_call.join(ops.select(pl.col("op").alias("owner"), "key"), on="owner", how="left")
                 .join(modelled, on="key", how="left")
                 .with_columns((pl.col("tf32") & pl.col("_modelled")).alias("_tf32"))
                 .group_by("key", "_tf32", maintain_order=True)
                 .agg(pl.len().alias("count"), pl.col("union_ns").cast(pl.Int128).sum().alias("time_ns"),
                      pl.col("kernel_ns").sum().alias("kernel_ns"),
                      pl.col("kernels").cast(pl.Int128).sum().alias("kernels"), pl.col("tf32").first()))
    groups = [{"key": key_rows[key], "cost": costs[key], "tf32": bool(tf32), "count": count,
               "time_ns": int(time_ns), "kernel_ns": int(kernel_ns), "kernels": int(kernels)}
              for key, count, time_ns, kernel_ns, kernels, tf32 in per_group.select(
                  "key", "count", "time_ns", "kernel_ns", "kernels", "tf32").iter_rows()]

    rows, unmodelled = [], []
    modelled_kernel_ns = 0
    for g in groups:
        name, dims, types, strides, concrete = g["key"]
        found: op_models.Cost | None = g["cost"]
        if found is None:
            unmodelled.append({"op": name, "input_dims": _parse(dims), "dtypes": _parse(types), "count": g["count"],
                               "time_ns": g["time_ns"], "kernels": g["kernels"]})
            continue
        modelled_kernel_ns += g["kernel_ns"]
        rows.append(_row(name, dims, types, strides, concrete, found, g, peak, target))
    rows.sort(key=row_order)
    unmodelled.sort(key=unmodelled_order)
    return {
        "device": device,
        "peak": None if peak is None else {
            "device": peak.device, "source": peak.source, "bandwidth_gbs": peak.bandwidth_gbs,
            "matrix_tflops": dict(peak.matrix), "vector_tflops": dict(peak.vector)},
        "target_fraction": target,
        "kernel_ns": total_ns,
        "modelled_kernel_ns": modelled_kernel_ns,
        "unlinked_kernel_ns": unlinked_ns,
        "graph_kernel_ns": graph_ns,
        "unlinked_kernels": unlinked_top,
        "coverage_pct": round(100 * modelled_kernel_ns / total_ns, 3) if total_ns else None,
        "rows": rows,
        "unmodelled": unmodelled,
    }


def _rate(amount: int, ns: int) -> float | None:
    """amount per ns, in tera-units per second (1 per ns = 1e9 per s = 1e-3 tera per s)."""
    return amount / ns / 1e3 if ns > 0 else None


def _row(name, dims, types, strides, concrete, cost: op_models.Cost, g: dict, peak: Peak | None,
         target: float) -> dict:
    count, time_ns = g["count"], g["time_ns"]
    flops, nbytes = cost.flops * count, cost.bytes * count
    peak_tflops, peak_name = _peak_for(peak, cost, g["tf32"])
    bandwidth = peak.bandwidth_gbs if peak else None
    row: dict[str, Any] = {
        "op": name, "input_dims": _parse(dims), "dtypes": _parse(types), "input_strides": _parse(strides),
        "concrete_inputs": _parse(concrete),
        "family": cost.family, "dtype": cost.dtype, "unit": cost.unit, "tf32_kernels": g["tf32"],
        "count": count, "flops": cost.flops, "bytes": cost.bytes, "time_ns": time_ns, "kernels": g["kernels"],
        "tflops": _rate(flops, time_ns), "tbps": _rate(nbytes, time_ns),
        "intensity": cost.flops / cost.bytes if cost.bytes else None,
        "peak_tflops": peak_tflops, "peak": peak_name or None, "peak_bandwidth_gbs": bandwidth,
        "bound": None, "roofline_ns": None, "roofline_pct": None, "saved_ns": None,
    }
    if peak_tflops and bandwidth:
        compute_ns = flops / (peak_tflops * 1e3)  # TFLOP/s = 1e3 FLOP per ns
        memory_ns = nbytes / bandwidth  # GB/s = 1 byte per ns
        roofline = max(compute_ns, memory_ns)
        row["bound"] = "compute" if compute_ns >= memory_ns else "memory"
        row["roofline_ns"] = round(roofline, 3)
        row["ridge_intensity"] = peak_tflops * 1e3 / bandwidth
        if time_ns > 0:
            row["roofline_pct"] = round(100 * roofline / time_ns, 3)
            row["saved_ns"] = max(0, round(time_ns - roofline / target))
            if row["roofline_pct"] > 100:
                row["note"] = ABOVE_ROOFLINE
    return row


# ---- one run of the report ---------------------------------------------------------------------------------------

# set by `report --peak-tflops / --peak-bandwidth / --roofline-target` (cli/report.py), like the kernel rules
OPTIONS: dict[str, float | None] = {"peak_tflops": None, "peak_bandwidth": None, "target": DEFAULT_TARGET}


def configure(peak_tflops: float | None = None, peak_bandwidth: float | None = None,
              target: float = DEFAULT_TARGET) -> None:
    OPTIONS.update(peak_tflops=peak_tflops, peak_bandwidth=peak_bandwidth, target=target)


def device_name(device_properties: list[dict], kernels: pl.DataFrame, fallback: str | None) -> str | None:
    """The trace's GPU name (Kineto deviceProperties: the one the most kernels ran on), else the run's device."""
    # deviceProperties come as the trace wrote them: only an integer id and a text name are used
    names = {p["id"]: p["name"] for p in device_properties if isinstance(p, dict) and isinstance(p.get("id"), int)
             and isinstance(p.get("name"), str)}
    if kernels.height and names:
        busiest = kernels["device"].drop_nulls().mode()
        if busiest.len() and names.get(busiest.sort()[0]):
            return str(names[busiest.sort()[0]])
    first = next((p["name"] for p in device_properties if isinstance(p, dict) and isinstance(p.get("name"), str)
                  and p["name"]), None)
    return first or fallback


def row_order(row: dict) -> tuple:
    """Most time saved first; ties broken by everything that tells rows apart, so the order never depends on the
    order polars' group_by happened to produce."""
    return (-(row["saved_ns"] or 0), -row["time_ns"], row["op"], str(row.get("input_dims")), str(row.get("dtypes")),
            str(row.get("input_strides")), str(row.get("concrete_inputs")), row.get("origin", ""))


def unmodelled_order(row: dict) -> tuple:
    return (-row["time_ns"], row["op"], str(row.get("input_dims")), str(row.get("dtypes")), row.get("origin", ""))
