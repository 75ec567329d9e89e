"""The call tree of host events in polars (reports/analyses/nesting.py) gives the stack sweep's answer, and the report
code that was moved from per-row Python to polars (efficiency's owners and groups, collectives' exposed time) gives
the answers of the per-row computations it replaced, also on tables whose names are Categorical."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.insights.peaks import device_peak
from madengine_rocprof.reports.analyses import collectives, efficiency, nesting

from ..reports.kineto_frames import load
from ..reports.reports_builders import exact_union

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kineto"
SCHEMA = {"op": pl.UInt32, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64}


def _frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame([(i, *row) for i, row in enumerate(rows)], schema=SCHEMA, orient="row")


def _calls(rng: random.Random, start: int, end: int, depth: int, out: list[tuple[int, int]]) -> None:
    """Properly nested calls inside [start, end): children that touch, zero-length calls, twins of one span."""
    at = start
    while at < end and rng.random() < 0.8:
        length = rng.randint(0, max(0, min(end - at, 50 >> depth)))
        out.append((at, at + length))
        if rng.random() < 0.1:
            out.append((at, at + length))  # the same span twice: the first encloses the second
        if depth < 6 and length > 1:
            _calls(rng, at, at + length, depth + 1, out)
        at += length + rng.choice((0, 0, 1, 3))


def _nested(seed: int) -> list[tuple]:
    rng = random.Random(seed)
    rows = []
    for pid, tid in ((1, 1), (1, 2), (2, 1), (None, 7)):
        calls: list[tuple[int, int]] = []
        _calls(rng, 0, 400, 0, calls)
        rows += [(pid, tid, s, e) for s, e in calls]
    rng.shuffle(rows)  # the frame's order is not the time order
    return rows


def test_the_sweep_on_a_hand_made_thread():
    # A [0, 10) holds B [1, 4) and C [4, 10) (C starts as B ends: not inside B); D [4, 4) is a zero-length call
    # at C's start, inside C; E [8, 12) overlaps C's end: no parent; F on another thread has none
    rows = [(1, 1, 0, 10), (1, 1, 1, 4), (1, 1, 4, 10), (1, 1, 4, 4), (1, 1, 8, 12), (1, 2, 2, 3)]
    assert nesting.reference_parents(_frame(rows)) == {0: -1, 1: 0, 2: 0, 3: 2, 4: -1, 5: -1}


@pytest.mark.parametrize("seed", range(12))
def test_the_tree_equals_the_sweep_on_nested_calls(seed):
    ops = _frame(_nested(seed))
    tree = nesting.tree(ops)
    assert tree is not None  # nested properly: the whole-column answer, not the fallback
    assert dict(zip(tree["op"].to_list(), tree["parent"].to_list(), strict=True)) == nesting.reference_parents(ops)
    # depth: the length of the chain of parents
    parent = nesting.reference_parents(ops)
    for op, depth in zip(tree["op"].to_list(), tree["depth"].to_list(), strict=True):
        chain, i = 0, parent[op]
        while i != -1:
            chain, i = chain + 1, parent[i]
        assert depth == chain


@pytest.mark.parametrize("seed", range(12))
def test_a_partial_overlap_takes_the_sweep(seed):
    rows = _nested(seed)
    rng = random.Random(seed)
    pid, tid, start, end = rng.choice([r for r in rows if r[3] - r[2] >= 2])
    rows.append((pid, tid, start + 1, end + rng.randint(1, 50)))  # starts inside that call, ends after it
    ops = _frame(rows)
    assert nesting.tree(ops) is None
    assert nesting.parents(ops) == nesting.reference_parents(ops)


def test_an_op_that_ends_before_it_starts_takes_the_sweep():
    ops = _frame([(1, 1, 0, 10), (1, 1, 5, 3)])
    assert nesting.tree(ops) is None
    assert nesting.parents(ops) == nesting.reference_parents(ops) == {0: -1, 1: 0}


@pytest.mark.parametrize("seed", range(8))
def test_owners_equal_the_walk_up_each_chain(seed):
    rng = random.Random(seed)
    rows = _nested(seed)
    if seed % 2:  # a partial overlap: the walk itself answers
        rows.append((1, 1, 100, 260))
    ops = _frame(rows).with_columns(pl.Series("key", [rng.randrange(6) for _ in rows], dtype=pl.UInt32))
    modelled = [rng.random() < 0.5 for _ in range(6)]
    composite = [m and rng.random() < 0.4 for m in modelled]
    launchers = ops["op"].filter(pl.Series([rng.random() < 0.6 for _ in rows]))
    got = efficiency._owners(ops, launchers, modelled, composite).sort("op")
    walked = efficiency._owners_by_walk(ops, launchers, modelled, composite).sort("op")
    assert got.rows() == walked.rows() and got.height == launchers.len()


def test_owners_of_a_chain_deeper_than_the_limit_follow_it_as_far_as_the_walk():
    depth = efficiency.CHAIN_LIMIT + 5
    rows = [(1, 1, i, 2 * depth - i) for i in range(depth)]  # each call inside the one before
    ops = _frame(rows).with_columns(pl.Series("key", [0] + [1] * (depth - 1), dtype=pl.UInt32))
    launchers = pl.Series("op", [depth - 1], dtype=pl.UInt32)
    # the outermost call is the only one with a model, and it is beyond the limit from the innermost
    got = efficiency._owners(ops, launchers, [True, False], [False, False])
    assert got.rows() == efficiency._owners_by_walk(ops, launchers, [True, False], [False, False]).rows()
    assert got.rows() == [(depth - 1, depth - 1)]


def test_no_ops_and_one_op():
    empty = _frame([]).with_columns(pl.Series("key", [], dtype=pl.UInt32))
    assert nesting.parents(empty) == {}
    assert efficiency._owners(empty, empty["op"], [], []).height == 0
    one = _frame([(1, 1, 5, 9)]).with_columns(pl.Series("key", [0], dtype=pl.UInt32))
    assert nesting.parents(one) == {0: -1}
    assert efficiency._owners(one, one["op"], [False], [False]).rows() == [(0, 0)]


def test_union_length_equals_the_exact_union():
    rng = random.Random(3)
    frames = []
    for _ in range(3):
        pairs = []
        for _ in range(rng.randint(0, 40)):
            start = rng.randint(0, 1_000)
            pairs.append((start, start + rng.randint(-5, 120)))  # some empty or reversed: no length
        frames.append(pl.DataFrame(pairs, schema={"start": pl.Int64, "end": pl.Int64}, orient="row"))
    every = [pair for f in frames for pair in f.rows() if pair[1] > pair[0]]
    assert collectives.union_length(*frames) == exact_union(every)
    assert collectives.union_length(frames[0].clear()) == 0


@pytest.mark.parametrize("trace", ["tracelens_h100_bert/gaunernst_bert-small-uncased__1016001.json.gz",
                                   "ours_h100_tt_v1_eager/v1_eager_1gpu.pt.trace.json.gz"])
def test_efficiency_is_the_same_on_categorical_tables(trace):
    t = load(FIXTURES / trace)
    name = t["device_properties"][0]["name"] if t["device_properties"] else None
    text = ["name", "input_dims", "input_types", "input_strides", "concrete_inputs"]
    plain = efficiency.analyse(t["cpu_ops"], t["runtime"], t["kernels"], device_peak(name), name)
    coded = efficiency.analyse(t["cpu_ops"].with_columns(pl.col(text).cast(pl.Categorical)),
                               t["runtime"].with_columns(pl.col("name").cast(pl.Categorical)),
                               t["kernels"].with_columns(pl.col("name").cast(pl.Categorical)), device_peak(name), name)
    assert plain is not None and plain["rows"]
    assert coded == plain
