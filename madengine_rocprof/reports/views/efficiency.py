"""The efficiency section: per (operator, shape) how far from the roofline, ranked by the time a fix would save
(reports/analyses/efficiency.py computes it), with a roofline chart in the HTML page."""

from __future__ import annotations

import json
from typing import Any

from madengine_rocprof.reports.blocks import Column, Lines, Roofline, Section, Table
from madengine_rocprof.reports.formatting import display_name
from madengine_rocprof.wrapper.contracts import ReportRun

SHAPE_CHARS = 60


def _layout(shape: list, strides: Any) -> str:
    """'' for a row-major contiguous tensor, 'ᵀ' for a transposed 2-D one, '~' for other strides (broadcast,
    slices): what tells apart two groups of the same shapes."""
    if (not isinstance(strides, list) or len(strides) != len(shape)
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in [*strides, *shape])):
        return ""
    expected, step = [], 1
    for d in reversed(shape):
        expected.append(step)
        step *= max(d, 1)
    if strides == expected[::-1] or min(shape, default=1) <= 1:
        return ""
    return "ᵀ" if len(shape) == 2 and strides == [1, shape[0]] else "~"


def _shape(dims: Any, strides: Any = None) -> str:
    """The tensor shapes, without the [] Kineto writes for scalars and absent optional arguments; a transposed or
    otherwise strided input is marked (ᵀ, ~) so that groups of the same shapes read apart."""
    if not isinstance(dims, list):  # what the trace wrote instead (a text, a number), cut like any shape
        text = "" if dims is None else json.dumps(dims)
    else:
        per = strides if isinstance(strides, list) and len(strides) == len(dims) else [None] * len(dims)
        text = " ".join("x".join(str(d) for d in shape) + _layout(shape, stride)
                        for shape, stride in zip(dims, per, strict=True) if isinstance(shape, list) and shape)
    return text if len(text) <= SHAPE_CHARS else text[: SHAPE_CHARS - 1] + "…"


def _dtype(row: dict) -> str:
    return "fp32 (tf32 kernels)" if row.get("tf32_kernels") and row["dtype"] == "fp32" else row["dtype"]


NO_SHAPES_KINETO = ("Not available: the trace records no operator shapes. Profile with "
                    "`torch.profiler.profile(record_shapes=True)` to get FLOPs, bytes and the roofline per operator.")
SHAPES_FLAG = "MADENGINE_ROCPROF_TRACER_SHAPES=1"
NO_SHAPES_KERNELS = (
    "Not available from kernel traces ({formats}): they carry no operator shapes, so this report cannot tell the "
    "FLOPs and bytes of each operator, its achieved TFLOP/s and TB/s, whether it is compute- or memory-bound, nor how "
    "far it is from the roofline. The `lightweight` profile records kernels and, with --hip-trace, API calls, never "
    f"shapes; so does the embedded tracer unless {SHAPES_FLAG} is set (torch.profiler backend; the CUPTI backend "
    "records no PyTorch operators). For the per-operator roofline, re-run under the embedded tracer with "
    f"{SHAPES_FLAG}, or record a PyTorch profiler trace with `record_shapes=True` and CUDA activities and run "
    "`report` on it; for the top kernels' FLOP rates and bandwidth from hardware counters, `madengine-rocprof "
    "escalate` this run."
)
NO_SHAPES_CPU = (
    "Not available: the embedded tracer recorded the CPU operators without their shapes, so this report cannot tell "
    "the FLOPs and bytes of each operator, its achieved TFLOP/s and TB/s, nor (with --peak-tflops and "
    f"--peak-bandwidth) how far it is from the roofline. Re-run with {SHAPES_FLAG} (torch.profiler's "
    "record_shapes=True) to get them."
)


def _without_shapes(run: ReportRun) -> Section | None:
    """A run with kernels (or the embedded tracer's CPU operators) but no shapes: what it cannot tell and how to
    get it. Nothing for a run without kernels."""
    summary = run.get("summary") or {}
    formats = sorted({str(src.get("format")) for src in run.get("sources", [])})
    if not formats or not summary.get("dispatches"):
        return None
    if "kineto" in formats:
        line = NO_SHAPES_KINETO
    elif summary.get("cpu_operators"):
        line = NO_SHAPES_CPU
    else:
        line = NO_SHAPES_KERNELS.format(formats=", ".join(formats))
    return Section("Operator efficiency (roofline from shapes)", blocks=[Lines([line], kind="note")],
                   anchor=f"efficiency-{run['label']}")


def section(run: ReportRun, top: int) -> Section | None:
    eff = run.get("efficiency")
    if not eff:
        return _without_shapes(run)
    rows, unmodelled = eff["rows"], eff["unmodelled"]
    peak = eff["peak"]
    target = eff["target_fraction"]
    total = eff["kernel_ns"]
    cpu = bool(eff.get("cpu_operators"))  # the embedded tracer without a GPU: CPU operators are the work
    unit = "CPU" if cpu else "GPU"
    timed = ("its CPU time (its own time on its thread and that of the operators without a model it calls; an "
             "operator that hands its work to one of its own kind, aten::linear to aten::addmm, keeps only its "
             "own time, listed without a model)" if cpu else "its GPU time (the union of the kernels it launched)")
    lines = [
        f"From the shapes PyTorch recorded (record_shapes=True): FLOPs and bytes per operator call, {timed} and its "
        f"place under the roofline. The model covers "
        f"{eff['coverage_pct'] if eff['coverage_pct'] is not None else 0:.1f}% of the "
        f"{'CPU operator' if cpu else 'GPU kernel'} time "
        f"({eff['modelled_kernel_ns'] / 1e6:,.3f} of {total / 1e6:,.3f} ms); operators without a model are listed "
        "below with their time.",
        "Ranked by the time saved if each group reached "
        f"{target:.0%} of its roofline (roofline time = max(FLOPs / peak FLOP rate, bytes / peak bandwidth)).",
    ]
    first = rows[0] if rows and rows[0]["saved_ns"] else None
    if first:
        lines.append(f"First to fix: `{first['op']}` {_shape(first['input_dims'], first['input_strides'])} "
                     f"{_dtype(first)}, {first['count']} calls at {first['roofline_pct']:.0f}% of its roofline "
                     f"({first['bound']}-bound): {first['saved_ns'] / 1e6:,.3f} ms saved at {target:.0%}.")
    meta = []
    if peak:
        ceilings = ", ".join(f"{d} {v:,.1f}" for d, v in peak["matrix_tflops"].items())
        meta.append(f"Peaks: {peak['device']} ({peak['source']}): {peak['bandwidth_gbs'] or 0:,.0f} GB/s; matrix "
                    f"TFLOP/s {ceilings or 'none given'}; vector TFLOP/s "
                    + ", ".join(f"{d} {v:,.1f}" for d, v in peak["vector_tflops"].items()) + ".")
    else:
        meta.append(f"No datasheet peak for device {eff['device'] or 'unknown'}: achieved rates are shown, the bound "
                    "and % of roofline need `--peak-tflops` and `--peak-bandwidth`.")
    blocks: list = [Lines(lines), Lines(meta, kind="meta")]
    # several traces (ranks): the same (operator, shape) is a row per process, which the process column tells apart
    by_process = len(eff.get("origins") or []) > 1
    process = [Column("process")] if by_process else []

    def where(row: dict) -> list:
        return [row.get("origin")] if by_process else []

    table_rows = [
        [r["op"], *where(r), _shape(r["input_dims"], r["input_strides"]), _dtype(r), r["count"], r["time_ns"],
         r["tflops"], r["tbps"], r["intensity"], r["bound"],
         None if r["roofline_pct"] is None else r["roofline_pct"] / 100, r["saved_ns"]]
        for r in rows[:top]
    ]
    if rows:
        blocks.append(Table(
            [Column("operator"), *process, Column("shapes"), Column("dtype"), Column("calls", "count"),
             Column(f"{unit} ms", "ms"), Column("TFLOP/s", "number"), Column("TB/s", "number"),
             Column("FLOP/byte", "number"), Column("bound"), Column("% of roofline", "pct"),
             Column(f"saved at {target:.0%} (ms)", "ms")],
            table_rows,
            note=f"{len(rows) - top} more (operator, shape) groups in the JSON." if len(rows) > top else None,
        ))
    above = [r for r in rows if r.get("note")]
    if above:
        blocks.append(Lines([f"{len(above)} (operator, shape) groups run above 100% of their roofline ("
                             + ", ".join(f"`{r['op']}` {r['roofline_pct']:.0f}%" for r in above[:3])
                             + (", ..." if len(above) > 3 else "") + f"): {above[0]['note']}."], kind="note"))
    if peak and peak["bandwidth_gbs"]:
        points = [(r["op"], r["intensity"], r["tflops"], r["time_ns"] / total if total else 0.0,
                   f"{r['op']} {_shape(r['input_dims'], r['input_strides'])} {_dtype(r)}"
                   + (f" ({r.get('origin')})" if by_process else "") + f": {r['tflops']:.3g} TFLOP/s, "
                   f"{r['intensity']:.3g} FLOP/byte, {r['count']} calls, {r['time_ns'] / 1e6:.3f} ms")
                  for r in rows if r["intensity"] and r["tflops"]]
        dtypes = {r["peak"].split(" ")[0] for r in rows if r["peak"] and r["unit"] == "matrix"}
        roofs = [(f"{d} matrix", v) for d, v in peak["matrix_tflops"].items() if d in dtypes]
        roofs += [(f"{d} vector", v) for d, v in peak["vector_tflops"].items() if d == "fp32"]
        blocks.append(Roofline(points, roofs, peak["bandwidth_gbs"]))
    if unmodelled:
        blocks.append(Table(
            [Column("operator without a model"), *process, Column("shapes"), Column("calls", "count"),
             Column(f"{unit} ms", "ms")],
            [[u["op"], *where(u), _shape(u["input_dims"]), u["count"], u["time_ns"]] for u in unmodelled[:top]],
            note=f"{len(unmodelled) - top} more in the JSON." if len(unmodelled) > top else None,
        ))
    if eff.get("graph_kernel_ns"):
        blocks.append(Lines([f"{eff['graph_kernel_ns'] / 1e6:,.3f} ms of kernels were replayed from CUDA/HIP graphs: "
                             "the operators that issued them ran at capture, outside the trace, so they have no "
                             "shapes here (profile with graphs off to see them per operator)."], kind="note"))
    if eff["unlinked_kernel_ns"]:
        longest = ", ".join(f"{display_name(u['name'])} {u['time_ns'] / 1e6:,.3f} ms"
                            for u in eff.get("unlinked_kernels", [])[:3])
        blocks.append(Lines([f"{eff['unlinked_kernel_ns'] / 1e6:,.3f} ms of kernels could not be linked to an "
                             "operator (their launch has no operator id and no operator encloses it on its thread, "
                             "e.g. NCCL kernels issued from a communication thread)"
                             + (f": {longest}." if longest else ".")], kind="note"))
    return Section("Operator efficiency (roofline from shapes)", blocks=blocks, anchor=f"efficiency-{run['label']}")
