"""The collectives section: the late rank, arrival skew, per-rank wait and transfer, bandwidth, and a per-rank
timeline picture (HTML) of when each rank reached each collective (reports/analyses/collectives.py computes it)."""

from __future__ import annotations

from html import escape

from madengine_rocprof.reports.blocks import Column, Lines, Picture, Section, Table
from madengine_rocprof.reports.formatting import DASH, ms, number, pct
from madengine_rocprof.reports.svg import CHAR_PX, FONT
from madengine_rocprof.wrapper.contracts import ReportRun

WAIT, TRANSFER = "#E69F00", "#0072B2"  # Okabe-Ito orange and blue, as in svg.py
SHOWN = 20  # collectives listed by skew; the JSON has all of them
DRAWN = 400  # collectives drawn in the timeline
RANKS_DRAWN = 16  # ranks given a timeline lane and a wait column: the late ranks first (the JSON has every rank)
IDLE_HINT = 0.5  # a late rank whose GPU is idle at least this share of its span is late on the host side

DEFINITIONS = (
    "Each collective runs as one NCCL/RCCL kernel on every rank of its group. No data moves before the last rank "
    "arrives, so a rank's kernel is wait (its start to the last start) and then transfer (the last start to its "
    "end). Skew = last start - first start; the late rank arrives last and the others wait on it; the run's late "
    "rank is the one whose late arrivals made the others wait longest in total. Transfer time of a collective = the "
    "late rank's kernel (it waited for no one); algbw = bytes / that time, busbw = algbw x nccl-tests' factor "
    "(allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast, reduce, send/recv 1); bytes = the "
    "whole buffer (nccl-tests' size) from record_param_comms. Exposed = not overlapped with compute kernels on the "
    "same rank. Definitions: docs/reports.md."
)


def _rank(rank) -> str:
    return DASH if rank is None else f"rank {rank}"


def _size(num_bytes) -> str:
    return DASH if num_bytes is None else f"{num_bytes / 1e6:,.3f}"


def section(run: ReportRun, top: int) -> Section | None:
    data = run.get("collectives")
    if not data:
        return None
    skew = data["skew_ns"]
    late = data["late_rank"]
    per_rank = data["per_rank"]
    facts = [
        f"**{data['count']}** collectives matched across ranks {', '.join(str(r) for r in data['ranks'])} "
        f"(by {data['matched_by']})",
        f"arrival skew: median {ms(skew['median'])} ms, p90 {ms(skew['p90'])} ms, max {ms(skew['max'])} ms",
    ]
    if late is None:
        facts.append("late rank: none (every collective started at the same time on every rank)")
    else:
        row = next(r for r in per_rank if r["rank"] == late)
        facts.append(
            f"**late rank: {late}**, the rank the others wait on: it arrived last at {row['late_count']} of "
            f"{data['count']} collectives and kept the others waiting {ms(row['caused_wait_ns'])} ms in all"
        )
        idle = next((r["idle_share"] for r in run.get("per_rank") or [] if r["rank"] == late), None)
        if idle is not None and idle >= IDLE_HINT:
            facts.append(f"rank {late}'s GPU is idle {pct(idle)} of its span: it reaches collectives late because "
                         "its host issues the work late (launches, Python, data), not because its GPU has more to do")
    blocks: list = [Lines(facts), Lines([DEFINITIONS], kind="meta")]
    if data["notes"]:
        blocks.append(Lines([f"note: {n}" for n in data["notes"]], kind="note"))
    blocks.append(Table(
        [Column("rank"), Column("collectives", "count"), Column("arrived last", "count"), Column("wait (ms)", "ms"),
         Column("transfer (ms)", "ms"), Column("others' wait caused (ms)", "ms"), Column("exposed wait (ms)", "ms"),
         Column("exposed transfer (ms)", "ms"), Column("unmatched", "count"), Column("trace")],
        [[_rank(r["rank"]), r["collectives"], r["late_count"], r["wait_ns"], r["transfer_ns"], r["caused_wait_ns"],
          r["exposed_wait_ns"], r["exposed_transfer_ns"], r["unmatched"], r["origin"]] for r in per_rank],
    ))
    # with many ranks, a lane and a column for each would make a picture of megabytes and a table of hundreds of
    # columns: the ranks that made others wait longest, then those that waited longest
    ranks = [r["rank"] for r in per_rank]
    if len(ranks) > RANKS_DRAWN:
        chosen = {r["rank"] for r in sorted(per_rank, key=lambda r: (-r["caused_wait_ns"], -r["wait_ns"],
                                                                     r["rank"]))[:RANKS_DRAWN]}
        ranks = [r for r in ranks if r in chosen]
        blocks.append(Lines([f"the picture and the per-collective table show {RANKS_DRAWN} of {len(per_rank)} "
                             "ranks: those that made the others wait longest, then those that waited longest"],
                            kind="meta"))
    blocks.append(Picture(timeline_svg(data["collectives"][:DRAWN], ranks)))
    if len(data["collectives"]) > DRAWN:
        blocks.append(Lines([f"the picture shows the first {DRAWN} of {len(data['collectives'])} collectives"],
                            kind="meta"))
    blocks.append(Table(
        [Column("collective"), Column("dtype"), Column("size (MB)"), Column("ranks", "count"), Column("count", "count"),
         Column("transfer (ms)", "ms"), Column("skew (ms)", "ms"), Column("max skew (ms)", "ms"),
         Column("algbw (GB/s)", "number"), Column("busbw (GB/s)", "number")],
        [[k["collective"], k["dtype"] or DASH, _size(k["bytes"]), k["group_size"], k["count"], k["time_ns_total"],
          k["skew_ns_total"], k["skew_ns_max"], k["algbw_gbps_median"], k["busbw_gbps_median"]]
         for k in data["by_kind"]],
        note="Per collective, dtype and size; bandwidths are medians over its calls (GB = 1e9 bytes).",
    ))
    worst = sorted(data["collectives"], key=lambda c: (-c["skew_ns"], c["number"]))[:SHOWN]
    blocks.append(Table(
        [Column("#"), Column("collective"), Column("late rank"), Column("skew (ms)", "ms"),
         Column("transfer (ms)", "ms"), Column("busbw (GB/s)", "number")]
        + [Column(f"rank {r} wait (ms)", "ms") for r in ranks],
        [[c["number"], c["collective"] or c["kernel"], _rank(c["late_rank"]), c["skew_ns"], c["time_ns"],
          c["busbw_gbps"]] + [_wait(c, r) for r in ranks] for c in worst],
        note=f"The {len(worst)} collectives with the largest arrival skew (the JSON report lists all "
        f"{len(data['collectives'])}).",
    ))
    return Section("Collectives across ranks", blocks=blocks)


def _wait(collective: dict, rank: int):
    return next((r["wait_ns"] for r in collective["ranks"] if r["rank"] == rank), None)


def timeline_svg(collectives: list[dict], ranks: list[int], width: int = 1000) -> str:
    """One lane per rank; each collective drawn as its wait (orange) then its transfer (blue) on that rank."""
    if not collectives:
        return ""
    t0 = min(c["first_start_ns"] for c in collectives)
    t1 = max(c["end_ns"] for c in collectives)
    label_w, lane, gap, axis = 9 * CHAR_PX, 22, 8, 34
    plot_w = width - label_w - 16
    scale = plot_w / max(t1 - t0, 1)
    lanes = {r: gap + n * (lane + gap) for n, r in enumerate(ranks)}
    height = gap + len(ranks) * (lane + gap) + axis + 22

    def x(t: int) -> float:
        return label_w + (t - t0) * scale

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" {FONT}>']
    for rank, y in lanes.items():
        parts.append(f'<text x="{label_w - 8:.1f}" y="{y + lane / 2 + 4:.1f}" text-anchor="end">rank {rank}</text>'
                     f'<rect x="{label_w:.1f}" y="{y}" width="{plot_w:.1f}" height="{lane}" fill="#f6f8fa"/>')
    for c in collectives:
        name = c["collective"] or c["kernel"]
        for r in c["ranks"]:
            lane_y = lanes.get(r["rank"])
            if lane_y is None:
                continue
            for what, start, end, colour in (("wait", r["start_ns"], c["last_start_ns"], WAIT),
                                             ("transfer", c["last_start_ns"], r["end_ns"], TRANSFER)):
                if end <= start:
                    continue
                title = f"rank {r['rank']}, #{c['number']} {name}: {what} {ms(end - start)} ms"
                parts.append(f'<rect x="{x(start):.2f}" y="{lane_y}" width="{max((end - start) * scale, 1.0):.2f}" '
                             f'height="{lane}" fill="{colour}"><title>{escape(title)}</title></rect>')
    base = gap + len(ranks) * (lane + gap)
    for n in range(6):  # an axis in ms from the first arrival
        t = t0 + (t1 - t0) * n // 5
        parts.append(f'<line x1="{x(t):.1f}" y1="{base}" x2="{x(t):.1f}" y2="{base + 5}" stroke="#57606a"/>'
                     f'<text x="{x(t):.1f}" y="{base + 18}" text-anchor="middle">{number((t - t0) / 1e6)} ms</text>')
    legend_y = base + axis
    parts.append(f'<rect x="{label_w:.1f}" y="{legend_y - 10}" width="12" height="12" fill="{WAIT}"/>'
                 f'<text x="{label_w + 16:.1f}" y="{legend_y}">wait (for the late rank)</text>'
                 f'<rect x="{label_w + 220:.1f}" y="{legend_y - 10}" width="12" height="12" fill="{TRANSFER}"/>'
                 f'<text x="{label_w + 236:.1f}" y="{legend_y}">transfer</text>')
    parts.append("</svg>")
    return "".join(parts)
