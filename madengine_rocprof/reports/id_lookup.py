"""Look rows up by an integer id (a correlation id, an External id) with a binary search over sorted ids.

The trace tables link a million kernels to a million runtime calls and millions of CPU operators by id. A hash join
of such frames costs a hash table and a joined copy of both sides (~0.1-0.15 GB at a 1M-kernel report's peak); a
sorted index of the ids (one sort, often skipped: traces write ids in order) and a search per looked-up id cost
only the index and the gathered columns.
"""

from __future__ import annotations

from typing import Literal

import polars as pl


def index(table: pl.DataFrame, key: str, keep: Literal["first", "last"] = "first") -> pl.DataFrame:
    """`table` sorted by `key`, one row per distinct non-null id: its first or last row in the table's order."""
    rows = table.filter(pl.col(key).is_not_null())
    if not rows[key].is_sorted():
        rows = rows.sort(key, maintain_order=True)  # stable: rows of one id keep the table's order
    same_as_next = pl.col(key).eq_missing(pl.col(key).shift(-1))
    same_as_before = pl.col(key).eq_missing(pl.col(key).shift(1))
    return rows.filter(~(same_as_next if keep == "last" else same_as_before))


def lookup(indexed: pl.DataFrame, key: str, ids: pl.Series) -> pl.DataFrame:
    """Per value of `ids`, the other columns of `indexed` (from `index`) at the row of that id; nulls where the id
    is null or not there. Rows in the order of `ids`."""
    columns = [c for c in indexed.columns if c != key]
    if not indexed.height or not ids.len():
        return pl.DataFrame({c: pl.repeat(None, ids.len(), dtype=indexed.schema[c], eager=True) for c in columns})
    keys = indexed[key]
    ids = ids.cast(keys.dtype, strict=False)  # an id the index's type cannot hold is in no row
    at = keys.search_sorted(ids.fill_null(keys[0]), side="left").clip(upper_bound=indexed.height - 1)
    found = (keys.gather(at) == ids).fill_null(False)
    return indexed.select(columns).gather(at).select(pl.when(pl.lit(found)).then(pl.col(c)).alias(c)
                                                     for c in columns)
