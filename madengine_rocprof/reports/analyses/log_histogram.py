"""A histogram of non-negative integer nanoseconds on one fixed logarithmic grid, for a picture on a log axis.

The grid is the same for every process and run (so histograms add bin by bin): one bin for exactly 0, one for
1-99 ns, then ten bins per decade from 100 ns on, at the Renard R10 preferred numbers (100, 125, 160, 200, 250,
315, 400, 500, 630, 800, 1000, ...). Counts are exact; one vectorised search per value (O(n log bins)).
"""

from __future__ import annotations

import polars as pl

R10 = (100, 125, 160, 200, 250, 315, 400, 500, 630, 800)


def edges_up_to(top: int) -> list[int]:
    """The grid's lower edges, 0, 1, 100, 125, ..., up to the first edge above `top` (the last bin's end)."""
    edges, scale = [0, 1], 1
    while edges[-1] <= top:
        edges += [r * scale for r in R10]
        scale *= 10
    while len(edges) > 2 and edges[-2] > top:  # keep exactly one edge above top
        edges.pop()
    return edges


def histogram(values: pl.Series) -> list[list[int]]:
    """[[lo_ns, hi_ns, count], ...]: the bins [lo, hi) from the first to the last that holds a value (empty bins
    between them included, so the picture has no holes); [] for no values. Negative values are not expected
    (delays are clipped at 0); they would count in the first bin."""
    if values.len() == 0:
        return []
    edges = edges_up_to(int(values.max()))  # type: ignore[arg-type]
    grid = pl.Series(edges, dtype=pl.Int64)
    index = (grid.search_sorted(values.cast(pl.Int64), side="right").cast(pl.Int64) - 1).clip(lower_bound=0)
    counts = index.value_counts(name="n").sort(index.name)
    found = dict(zip(counts[index.name].to_list(), counts["n"].to_list(), strict=True))
    first, last = min(found), max(found)
    return [[edges[i], edges[i + 1], int(found.get(i, 0))] for i in range(first, last + 1)]
