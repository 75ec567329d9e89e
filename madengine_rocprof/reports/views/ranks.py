"""Per-rank headline facts and per-rank top-kernel tables (reports/analyses/ranks.py computes them)."""

from __future__ import annotations

from madengine_rocprof.reports.blocks import Column, Lines, Section, Table
from madengine_rocprof.reports.formatting import ms, pct
from madengine_rocprof.wrapper.contracts import ReportRun

HEADLINE_RANKS = 8  # ranks named one by one in the headline; beyond, the least and the most idle


def headline(run: ReportRun) -> list[str]:
    """One fact per rank (busy, idle, its share) and the spread, for the run's heading; [] for one process."""
    rows = [r for r in run.get("per_rank") or [] if r["busy_ns"] is not None]
    if len(rows) < 2:
        return []
    shares = [r["idle_share"] for r in rows if r["idle_share"] is not None]
    # a collective kernel that waits for the late rank keeps its GPU busy: say how much of busy is such waiting
    # by trace, not by rank number: two files that claim one rank are numbered apart by the collectives analysis
    waiting = {r["origin"]: r["wait_ns"] for r in (run.get("collectives") or {}).get("per_rank", [])}
    shown, head = rows, "per rank: "
    if len(rows) > HEADLINE_RANKS:  # one fact per rank of hundreds is no headline: the extremes, then the spread
        by_idle = sorted(rows, key=lambda r: (r["idle_share"] is None, r["idle_share"] or 0.0))
        shown, head = [by_idle[0], by_idle[-1]], f"{len(rows)} ranks, the least and the most idle: "
    facts = [head + "; ".join(
        f"**{r['label']}** busy {ms(r['busy_ns'])} ms"
        + (f" ({ms(waiting[r['origin']])} ms of it waiting at collectives)" if waiting.get(r["origin"]) else "")
        + f", idle {ms(r['idle_ns'])} ms ({pct(r['idle_share'])})"
        for r in shown)]
    if shares:
        facts.append(f"idle share across ranks: {pct(min(shares))} to {pct(max(shares))} "
                     f"(spread {pct(max(shares) - min(shares))})")
    return facts


def top_kernels(run: ReportRun, top: int) -> Section | None:
    """The top kernels of each rank, labelled by rank (the run's top-kernel table merges them)."""
    rows = run.get("per_rank") or []
    if len(rows) < 2:
        return None
    blocks: list = [Lines(["The run's top-kernel table sums every rank; here each rank alone."], kind="meta")]
    for r in rows:
        kernels = r["kernels"][:top]
        blocks += [
            Lines([f"**{r['label']}** (`{r['origin']}`): {ms(r['gpu_time_ns'])} ms kernel time"]),
            Table(
                [Column("#"), Column("kernel", "kernel"), Column("category"), Column("calls", "count"),
                 Column("total (ms)", "ms"), Column("avg (us)", "us"), Column("share", "pct")],
                [[i + 1, k["name"], k["category"], k["calls"], k["total_ns"], k["average_ns"], k["share"]]
                 for i, k in enumerate(kernels)],
            ),
        ]
    return Section("Top kernels per rank", blocks=blocks)
