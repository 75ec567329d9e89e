"""The kernel-launch section: launch delay (host call end to GPU start) and launch-call duration distributions, and
the queue length per stream (reports/analyses/launch.py; the JSON has it under `launch`)."""

from __future__ import annotations

from madengine_rocprof.reports.blocks import Block, Column, Lines, Picture, Section, Table
from madengine_rocprof.reports.views import launch_pictures
from madengine_rocprof.wrapper.contracts import ReportRun

DEFINITIONS = (
    "As Holistic Trace Analysis defines them: launch delay = GPU start - end of the launching call (cudaLaunchKernel, "
    "hipLaunchKernel, cudaMemcpyAsync, ...; 0 when the GPU started first); queue length = operations launched on a "
    "stream and not yet started, from each launch call's start to its operation's start. Long: calls over 50 us, "
    "delays over 100 us (HTA's cut-offs)."
)


def _label(row: dict) -> str:
    rank = f"rank {row['rank']}, " if row.get("rank") is not None else ""
    return f"{rank}`{row['origin']}`"


def section(run: ReportRun, top: int) -> Section | None:
    launch = run.get("launch")
    if not launch or not launch["processes"]:
        return None
    rows = launch["processes"]
    blocks: list[Block] = [Lines([DEFINITIONS], kind="meta")]
    blocks.append(Table(
        [Column("process"), Column("launches", "count"), Column("delay p50 (us)", "us"),
         Column("delay p90 (us)", "us"), Column("delay p99 (us)", "us"), Column("delay max (us)", "us"),
         Column("call p50 (us)", "us"), Column("call p99 (us)", "us"), Column("long calls", "count"),
         Column("long delays", "count")],
        [[_label(r), r["launches"], r["delay"]["p50_ns"], r["delay"]["p90_ns"], r["delay"]["p99_ns"],
          r["delay"]["max_ns"], r["cpu_duration"]["p50_ns"], r["cpu_duration"]["p99_ns"], r["long_calls"],
          r["long_delays"]] for r in rows]))
    blocks.append(Table(
        [Column("process"), Column("device"), Column("stream"), Column("max queued", "count"),
         Column("mean queued", "number"), Column("time with nothing queued", "pct")],
        [[_label(r), str(s["device"]), str(s["stream"]), s["max"], s["mean"], s["empty_share"]]
         for r in rows for s in r["streams"]]))
    blocks += [Picture(svg) for svg in launch_pictures.pictures(rows)]
    if len(rows) > launch_pictures.PROCESSES_DRAWN:
        blocks.append(Lines([f"the pictures show the first {launch_pictures.PROCESSES_DRAWN} of {len(rows)} "
                             "processes"], kind="meta"))
    return Section("Kernel launches", blocks=blocks)
