"""Kernel launches: the latency from the host's launch call to the GPU start, and the queue length over time.

Both as Holistic Trace Analysis 0.5.0 defines them (hta/analyzers/cuda_kernel_analysis.py cuda_kernel_launch_stats,
hta/analyzers/trace_counters.py get_queue_length_time_series), over the trace tables (reports/trace_tables.py):

- a launch is a runtime call named in LAUNCH_CALLS with a kernel, copy or memset of the same correlation id;
- launch delay = GPU start - (call start + call duration), clipped at 0 (a GPU op that starts before its call
  returns has delay 0); `cpu_duration` = the call's duration;
- queue length of a (device, stream): +1 at each launch call's start, -1 at its GPU op's start; the count of
  operations launched on the stream and not yet started. It is a step function: the value after every event of
  one timestamp holds until the next.

Where ours and HTA's differ (docs/reports.md, "Launch latency and queue length"): HTA's launch statistics read only
cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync and cudaMemsetAsync, so they give nothing on ROCm traces
(hipLaunchKernel) or for cuLaunchKernel (Triton); ours take every call of LAUNCH_CALLS, the list HTA's queue length
uses. A CUDA graph's kernels come from one cudaGraphLaunch, which is no launch here, as in HTA.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from madengine_rocprof import inputs
from madengine_rocprof.reports.analyses import log_histogram
from madengine_rocprof.reports.model import RunData, TimingSource
from madengine_rocprof.reports.trace_tables import TraceTables, api_trace_of, load_tables

# HTA 0.5.0 TraceSymbolTable.get_runtime_launch_events_query: the runtime calls that enqueue one GPU operation
HTA_QUEUE_CALLS = (
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream",
    "runFunction - job_prep_and_submit_for_execution",
)
# ours: HTA's, and cuLaunchKernelEx (NCCL 2.28 launches its kernels with it; HTA's main branch has added it since)
LAUNCH_CALLS = HTA_QUEUE_CALLS + ("cuLaunchKernelEx",)
# HTA's cuda_kernel_launch_stats reads these only
HTA_LAUNCH_STATS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
                    "runFunction - job_prep_and_submit_for_execution")
RUNTIME_CUTOFF_NS = 50_000  # HTA's defaults for "long" launch calls and delays (its charts' cut-offs)
LAUNCH_DELAY_CUTOFF_NS = 100_000
SERIES_POINTS = 400  # slices of the queue-length picture per stream (the least and greatest of each are kept)


def launches(kernels: pl.DataFrame, copies: pl.DataFrame, runtime: pl.DataFrame,
             names: tuple[str, ...] = LAUNCH_CALLS) -> pl.DataFrame:
    """One row per launch: correlation, device, stream, call (its name), call_start, start (the GPU operation's),
    cpu_duration, delay."""
    cols = ["device", "stream", "start", "end", "correlation"]
    gpu = pl.concat([kernels.select(cols), copies.select(cols)], how="vertical_relaxed").filter(
        pl.col("correlation").is_not_null())
    calls = runtime.filter(pl.col("name").is_in(list(names)) & pl.col("correlation").is_not_null()).select(
        pl.col("correlation").cast(gpu.schema["correlation"]), pl.col("name").cast(pl.Categorical).alias("call"),
        pl.col("start").alias("call_start"), pl.col("end").alias("call_end"))
    return calls.join(gpu.drop("end"), on="correlation", how="inner").select(
        "correlation", "device", "stream", "call", "call_start", "start",
        cpu_duration=(pl.col("call_end") - pl.col("call_start")),
        delay=(pl.col("start") - pl.col("call_end")).clip(lower_bound=0),
    )


def _quantile(sorted_values: pl.Series, q: float) -> int:
    """The nearest-rank quantile: the value at rank ceil(q * n) (1-based), an exact sample value."""
    n = sorted_values.len()
    rank = max(1, -(-int(q * 1000) * n // 1000))
    return int(sorted_values[rank - 1])


def distribution(values: pl.Series) -> dict[str, Any]:
    """count, mean, min, p50, p90, p99, max of integer ns (nearest-rank quantiles)."""
    if values.len() == 0:
        return {"count": 0}
    ordered = values.sort()
    return {
        "count": ordered.len(),
        "mean_ns": float(ordered.cast(pl.Float64).sum()) / ordered.len(),
        "min_ns": int(ordered[0]),
        "p50_ns": _quantile(ordered, 0.5),
        "p90_ns": _quantile(ordered, 0.9),
        "p99_ns": _quantile(ordered, 0.99),
        "max_ns": int(ordered[-1]),
    }


def _queue(part: pl.DataFrame) -> pl.DataFrame:
    """One stream's queue length after all events of each timestamp (ts, length): its +1/-1 events sorted by time,
    summed, and the last value of each timestamp kept. Lazy, so only the two columns of the answer are held at the
    end (a 1M-launch stream: 2M events)."""
    return (pl.concat([part.lazy().select(pl.col("call_start").alias("ts"), pl.lit(1, dtype=pl.Int8).alias("d")),
                       part.lazy().select(pl.col("start").alias("ts"), pl.lit(-1, dtype=pl.Int8).alias("d"))])
            .sort("ts")
            .with_columns(length=pl.col("d").cast(pl.Int64).cum_sum())
            .filter(pl.col("ts") != pl.col("ts").shift(-1, fill_value=None).fill_null(pl.col("ts") + 1))
            .select("ts", "length")
            .collect())


def _streams(launched: pl.DataFrame) -> list:
    """((device, stream), its launches' call_start and start), in the order streams first appear."""
    return list(launched.select("device", "stream", "call_start", "start").group_by("device", "stream",
                                                                                    maintain_order=True))


def queue_series(launched: pl.DataFrame) -> pl.DataFrame:
    """Per (device, stream) the queue length after all events of each timestamp: columns device, stream, ts, length."""
    parts = [_queue(part).select(pl.lit(device, dtype=pl.Int64).alias("device"),
                                 pl.lit(stream, dtype=pl.Int64).alias("stream"), "ts", "length")
             for (device, stream), part in _streams(launched)]
    return pl.concat(parts) if parts else pl.DataFrame(
        schema={"device": pl.Int64, "stream": pl.Int64, "ts": pl.Int64, "length": pl.Int64})


def _stream_summary(part: pl.DataFrame) -> dict[str, Any]:
    """Max, time-weighted mean and share of time empty, from the first to the last event of the stream."""
    ts, length = part["ts"], part["length"]
    span = int(ts[-1]) - int(ts[0])
    held = (pl.col("ts").shift(-1) - pl.col("ts")).fill_null(0).cast(pl.Int128)  # how long each value holds
    weighted, empty = part.lazy().select((held * pl.col("length").cast(pl.Int128)).sum().alias("weighted"),
                                         held.filter(pl.col("length") == 0).sum().alias("empty")).collect().row(0)
    weighted, empty = int(weighted), int(empty)
    step = max(1, part.height // SERIES_POINTS)
    picture = part.lazy().group_by((pl.int_range(pl.len(), dtype=pl.UInt32) // step).alias("slice"),
                                   maintain_order=True).agg(
        pl.col("ts").first(), pl.col("length").max(), pl.col("length").min().alias("low")).collect()
    return {
        "points": part.height,
        "max": int(length.max()),  # type: ignore[arg-type]
        "mean": weighted / span if span else None,
        "empty_share": empty / span if span else None,
        "series": [[int(t), int(v)] for t, v in zip(picture["ts"], picture["length"], strict=True)],
        "series_min": picture["low"].to_list(),  # the least of each slice: with `series`, the range it spans
        "series_end": int(ts[-1]),  # the last event: the last slice holds until then
    }


def analyze(kernels: pl.DataFrame, copies: pl.DataFrame, runtime: pl.DataFrame) -> dict[str, Any] | None:
    """Launch delay and launch-call duration distributions and the queue length per stream; None without links."""
    launched = launches(kernels, copies, runtime)
    if launched.height == 0:
        return None
    out = {
        "launches": launched.height,
        "delay": distribution(launched["delay"]),
        "delay_histogram": log_histogram.histogram(launched["delay"]),
        "cpu_duration": distribution(launched["cpu_duration"]),
        "long_calls": int((launched["cpu_duration"] > RUNTIME_CUTOFF_NS).sum()),
        "long_delays": int((launched["delay"] > LAUNCH_DELAY_CUTOFF_NS).sum()),
        "by_call": {str(n): int(c) for n, c in launched.group_by("call").len().sort("call").iter_rows()},
    }
    streams = _streams(launched)
    del launched  # only the columns of the queues are kept while their series are built
    out["streams"] = [{"device": device, "stream": stream} | _stream_summary(_queue(part))
                      for (device, stream), part in streams]  # a stream's series is summarised, then freed
    return out


def source_tables(src: TimingSource) -> TraceTables | None:
    """A timing source's trace tables; a Kineto source carries them from the reader's pass, and one that does not was
    not read by the reader (built by hand): it has none, rather than a second read of its file; nor has a source
    whose file is not there (built by hand)."""
    if src.tables is not None:
        return src.tables
    if src.cpu_operators or src.fmt == "kineto" or not inputs.is_regular(src.path):
        return None
    if src.fmt == "rocprofv3-csv" and api_trace_of(src.path) is None:
        return None  # no API calls, no launch links: nothing to read that the report has not (1M rows: seconds)
    return load_tables(src)


def analyze_run(run: RunData, timeline: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per process with launch links: `analyze`, labelled by origin and rank. None when no process has any."""
    ranks = {t["origin"]: t["rank"] for t in timeline}
    rows = []
    for src in run.timing:
        tables = source_tables(src)
        if tables is None or tables.runtime.height == 0:
            continue
        got = analyze(tables.kernels, tables.copies, tables.runtime)
        if got is not None:
            rows.append({"origin": src.process, "rank": ranks.get(src.process, tables.rank)} | got)
    return {"processes": rows} if rows else None
