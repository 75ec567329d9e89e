"""The efficiency analysis of a whole run: every trace that recorded shapes (a Kineto trace's own operators, or the
ones the embedded tracer kept beside its CSV) through efficiency.analyse, merged into one table with each row's
process. Above both efficiency and tracer_shapes, which builds on efficiency."""

from __future__ import annotations

from madengine_rocprof.insights.peaks import device_peak
from madengine_rocprof.reports.analyses import efficiency, tracer_shapes
from madengine_rocprof.reports.model import RunData


def for_run(run: RunData) -> dict | None:
    """The efficiency analysis of every trace of a run that recorded shapes, as one table (None when none did)."""
    device = run.workload.get("device") if run.workload else None
    fallback = next((v for v in (device.get("name"), device.get("arch")) if isinstance(v, str) and v), None) \
        if isinstance(device, dict) else None
    options = efficiency.OPTIONS
    target = options["target"] or efficiency.DEFAULT_TARGET
    parts = []
    for src in run.timing:
        # shapes come only with CPU operators, which only Kineto traces carry: a Kineto source's own (read in the
        # report's pass), or the one the embedded tracer kept beside its CSV
        tables = tracer_shapes.shape_tables(run, src)
        if tables is None:
            continue
        if src.cpu_operators:  # the embedded tracer without a GPU: the operators are the work
            peak = device_peak("CPU", options["peak_bandwidth"], compute_tflops=options["peak_tflops"])
            result = tracer_shapes.analyse_cpu(tables.cpu_ops, peak, "CPU", target)
            if result is not None:
                parts.append((src.process, result))
            continue
        name = efficiency.device_name(tables.device_properties, tables.kernels, fallback)
        peak = device_peak(name, options["peak_bandwidth"], compute_tflops=options["peak_tflops"])
        result = efficiency.analyse(tables.cpu_ops, tables.runtime, tables.kernels, peak, name, target)
        if result is not None:
            parts.append((src.process, result))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0][1]
    merged = dict(parts[0][1])
    for key in ("kernel_ns", "modelled_kernel_ns", "unlinked_kernel_ns", "graph_kernel_ns"):
        merged[key] = sum(p[key] for _, p in parts)
    merged["coverage_pct"] = (round(100 * merged["modelled_kernel_ns"] / merged["kernel_ns"], 3)
                              if merged["kernel_ns"] else None)
    merged["rows"] = sorted((dict(r, origin=o) for o, p in parts for r in p["rows"]), key=efficiency.row_order)
    merged["unmodelled"] = sorted((dict(u, origin=o) for o, p in parts for u in p["unmodelled"]),
                                  key=efficiency.unmodelled_order)
    merged["unlinked_kernels"] = sorted((dict(u, origin=o) for o, p in parts for u in p["unlinked_kernels"]),
                                        key=lambda u: (-u["time_ns"], u["name"], u["origin"])
                                        )[:efficiency.UNLINKED_LISTED]
    merged["origins"] = [{"origin": o, "device": p["device"], "kernel_ns": p["kernel_ns"],
                          "coverage_pct": p["coverage_pct"]} for o, p in parts]
    return merged
