"""Which host event encloses which, by time, on each thread: the call tree of CPU operators, in polars.

`parents(ops)` gives each op its enclosing op on the same thread (-1 for none), by the rule of a stack swept over
the thread's ops in (start, longest first) order: an op that ended at or before this one starts is closed; the
innermost op still open is the parent when it ends at or after this one ends, else (a partial overlap) there is no
parent. `reference_parents` is that sweep, one op at a time in Python.

Millions of operators make the sweep seconds of Python, so `parents` computes the same answer with whole-column
operations where the thread's ops nest properly (every op ends within the innermost op open at its start, which
real traces give): an op's depth is the number of earlier ops still open at its start, and its parent is the last
earlier op one level up. That holds exactly when each op ends within the parent so found (checked for every op);
a thread with a partial overlap, or an op that ends before it starts, takes the sweep.
"""

from __future__ import annotations

import polars as pl

_COLUMNS = ("op", "pid", "tid", "start", "end")


def _order(ops: pl.DataFrame) -> pl.DataFrame:
    """The ops in sweep order: by thread, start, then the longer first (ties keep the frame's order)."""
    return ops.select(*_COLUMNS).sort(["pid", "tid", "start", "end"], descending=[False, False, False, True],
                                      maintain_order=True)


def reference_parents(ops: pl.DataFrame) -> dict[int, int]:
    """The stack sweep: each op's enclosing op on its thread (-1 for none), keyed by the `op` column."""
    parent: dict[int, int] = {}
    stack: list[tuple[int, int]] = []  # (end, op) of the ops still open at this point of the thread
    thread = None
    order = _order(ops)
    for i, pid, tid, start, end in zip(*(order[c].to_list() for c in _COLUMNS), strict=True):
        if (pid, tid) != thread:
            thread, stack = (pid, tid), []
        while stack and stack[-1][0] <= start:
            stack.pop()
        # an op that started earlier and ends within this one overlaps it without enclosing it: no parent
        parent[i] = stack[-1][1] if stack and stack[-1][0] >= end else -1
        stack.append((end, i))
    return parent


def tree(ops: pl.DataFrame) -> pl.DataFrame | None:
    """`op`, `parent` (-1 for none) and `depth` (0 at the top) of every op, in sweep order; None where some thread's
    ops do not nest properly, or the times span more than 2^62 ns over the threads (then only `reference_parents`
    gives the answer)."""
    s = _order(ops).with_row_index("pos").with_columns(
        (pl.col("pid").ne_missing(pl.col("pid").shift(1)) | pl.col("tid").ne_missing(pl.col("tid").shift(1)))
        .cum_sum().cast(pl.Int64).alias("thread"))
    if s.height and s.select((pl.col("start").is_null() | pl.col("end").is_null()
                              | (pl.col("end") < pl.col("start"))).any()).item():
        return None
    if not s.height:
        return s.select("op", pl.lit(0, pl.Int64).alias("depth"), pl.lit(-1, pl.Int64).alias("parent"))
    # a time on its thread as one sortable Int64: thread * (span + 1) + (t - first start), where that fits (any real
    # trace); binary searches of such keys replace sorts of every op's start and end events (a million ops: a
    # quarter of the memory and half the time)
    first, last = s.select(pl.col("start").min(), pl.col("end").max()).row(0)
    threads = int(s["thread"][-1]) + 1
    if threads * (int(last) - int(first) + 1) >= 2**62:
        return None
    span = int(last) - int(first) + 1

    def key(column: str) -> pl.Series:
        return s.select(pl.col("thread") * span + (pl.col(column) - first).cast(pl.Int64)).to_series()

    # depth: earlier ops of the thread still open at an op's start. The ends at or before each start (ends of the
    # threads before included, one per op, so the thread's first position) less the earlier ops gives the depth,
    # once the zero-length ops at that very start that sort at or after the op are given back
    closed = key("end").sort().search_sorted(key("start"), side="right").cast(pl.Int64)
    s = s.with_columns(depth=pl.col("pos").cast(pl.Int64) - closed)
    del closed
    zero = pl.col("start") == pl.col("end")
    if s.select(zero.any()).item():
        at = s.filter(zero).select("thread", "start").unique()
        back = (s.join(at, on=["thread", "start"], how="semi")
                .select("pos", zero.cast(pl.Int64).cum_sum(reverse=True).over("thread", "start").alias("_zero")))
        s = s.with_columns(pl.col("depth") + _by_position(s.height, back["pos"], back["_zero"]))
    # parent: the last earlier op of the thread one level up, found by a search of (level, position) keys: each op
    # as a candidate at its depth, each op with a depth as a query one level up
    level_at = s.select(pl.col("depth") * 2**32 + pl.col("pos").cast(pl.Int64)).to_series()
    order = level_at.arg_sort()
    ranked = level_at.gather(order)
    del level_at
    queries = s.filter(pl.col("depth") > 0).select("pos", "thread", "depth", "end")
    wanted = queries.select((pl.col("depth") - 1) * 2**32 + pl.col("pos").cast(pl.Int64)).to_series()
    index = ranked.search_sorted(wanted, side="left").cast(pl.Int64) - 1
    found = order.gather(index.clip(lower_bound=0))  # the candidate's position
    # nested properly exactly when every op ends within the parent found so (by induction over the sweep: with the
    # ops before it nested, the ops open at its start are one chain whose innermost is that parent)
    if queries.height and not ((index >= 0) & (ranked.gather(index.clip(lower_bound=0)) // 2**32 == wanted // 2**32)
                               & (s["thread"].gather(found) == queries["thread"])
                               & (s["end"].gather(found) >= queries["end"])).all():
        return None
    parent = _by_position(s.height, queries["pos"], s["op"].gather(found).cast(pl.Int64), missing=-1).alias("parent")
    return s.select("op", "depth").with_columns(parent)


def _by_position(n: int, positions: pl.Series, values: pl.Series, missing: int = 0) -> pl.Series:
    """`values` placed at `positions` of a column of n (`missing` elsewhere): one pass, no sort."""
    return pl.Series(values.name, [missing], dtype=values.dtype).extend_constant(missing, n - 1) \
        .scatter(positions, values) if n else pl.Series(values.name, [], dtype=values.dtype)


def parents(ops: pl.DataFrame) -> dict[int, int]:
    """Each op's enclosing op on its thread (-1 for none), keyed by the `op` column: `reference_parents`' answer."""
    found = tree(ops)
    if found is None:
        return reference_parents(ops)
    return dict(zip(found["op"].to_list(), found["parent"].to_list(), strict=True))
