"""The idle-time section: what bounds the run in one line, then each device's idle time by cause (reports/analyses/
idle.py computes it; the JSON has it under `idle_causes`)."""

from __future__ import annotations

from madengine_rocprof.reports.blocks import Block, Column, Lines, Section, Stacked, Table
from madengine_rocprof.wrapper.contracts import ReportRun

ITERATION_ROWS = 20  # iterations listed per device; the JSON has all of them
DEFINITIONS = (
    "Idle time (no kernel, copy or memset running) split by what the host did when the device ran dry. Launch-bound: "
    "the next operation had not been launched yet and the host was not blocked; synchronization: the host was in a "
    "device/stream/event synchronize or a blocking copy; other ranks: the host was in a collective; other: the next "
    "operation was already queued (dependencies, launch latency), has no launch link, the host was loading data, or "
    "the time lies before the device's first or after its last operation. The parts add up to the idle time."
)


def _label(row: dict) -> str:
    rank = f"rank {row['rank']}, " if row.get("rank") is not None else ""
    return f"{rank}`{row['origin']}`, {row['device']}"


def _cells(row: dict) -> list:
    span = row["span_ns"]
    other = row["other"]
    return [row["idle_ns"], row["idle_ns"] / span if span else None,
            row["launch_ns"], row["sync_ns"], row["other_ranks_ns"], row["other_ns"],
            other["queued_ns"], other["unlinked_ns"], other["data_loading_ns"], other["edges_ns"]]


COLUMNS = [Column("idle (ms)", "ms"), Column("idle", "pct"), Column("launch-bound (ms)", "ms"),
           Column("sync (ms)", "ms"), Column("other ranks (ms)", "ms"), Column("other (ms)", "ms"),
           Column("queued (ms)", "ms"), Column("unlinked (ms)", "ms"), Column("data loading (ms)", "ms"),
           Column("edges (ms)", "ms")]


def section(run: ReportRun, top: int) -> Section | None:
    causes = run.get("idle_causes")
    if not causes:
        return None
    blocks: list[Block] = [Lines([f"**{causes['bound']['line']}**"])]
    blocks += [Lines(causes["notes"], kind="note")] if causes.get("notes") else []
    devices = causes["devices"]
    if not devices or causes["bound"]["bound"] == "unknown":  # no launch links: every gap is "unlinked"
        return Section("Where idle time comes from", blocks=blocks)
    blocks.append(Lines([DEFINITIONS], kind="meta"))
    blocks.append(Table([Column("process and device"), Column("span (ms)", "ms")] + COLUMNS,
                        [[_label(r), r["span_ns"]] + _cells(r) for r in devices]))
    blocks.append(Stacked([(_label(r), [("busy", (r["span_ns"] - r["idle_ns"]) / 1e6),
                                          ("launch-bound", r["launch_ns"] / 1e6), ("sync", r["sync_ns"] / 1e6),
                                          ("other ranks", r["other_ranks_ns"] / 1e6), ("other", r["other_ns"] / 1e6)])
                           for r in devices], [f"{r['span_ns'] / 1e6:.3f} ms" for r in devices], normalize=True))
    for r in devices:
        shown = r["iterations"][:ITERATION_ROWS]
        if not shown:
            continue
        more = len(r["iterations"]) - len(shown)
        blocks.append(Lines([f"Per iteration, {_label(r)}:"]))
        blocks.append(Table([Column("iteration")] + COLUMNS,
                            [[str(it["iteration"])] + _cells(it) for it in shown],
                            note=f"{more} more iterations in the JSON report" if more else None))
    return Section("Where idle time comes from", blocks=blocks)
