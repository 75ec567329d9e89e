"""id_lookup (sorted ids, binary search) gives what a first/last-row dictionary lookup gives, whatever the order,
repeats, nulls and integer widths of the ids; dispatches.launch_times built on it equals that reference too."""

from __future__ import annotations

import random

import polars as pl
import pytest

from madengine_rocprof.reports import dispatches, id_lookup


def _table(r: random.Random, n: int, dtype) -> pl.DataFrame:
    ids = [r.choice([None, *range(-3, 15)]) for _ in range(n)]
    return pl.DataFrame({"id": ids, "value": [r.randint(0, 10**6) for _ in range(n)]},
                        schema={"id": dtype, "value": pl.Int64})


def _reference(table: pl.DataFrame, keep: str) -> dict[int, int]:
    found: dict[int, int] = {}
    for key, value in table.iter_rows():
        if key is not None and (keep == "last" or key not in found):
            found[key] = value
    return found


@pytest.mark.parametrize("keep", ["first", "last"])
@pytest.mark.parametrize("widths", [(pl.Int64, pl.Int64), (pl.Int32, pl.Int64), (pl.Int64, pl.Int32)])
def test_lookup_equals_a_dictionary_of_first_or_last_rows(keep, widths):
    table_type, id_type = widths
    for seed in range(150):
        r = random.Random(seed)
        table = _table(r, r.randint(0, 40), table_type)
        ids = pl.Series([r.choice([None, *range(-5, 18)]) for _ in range(r.randint(0, 40))], dtype=id_type)
        got = id_lookup.lookup(id_lookup.index(table, "id", keep=keep), "id", ids)
        want = _reference(table, keep)
        assert got["value"].to_list() == [None if i is None else want.get(i) for i in ids.to_list()], seed
        assert got.height == ids.len()


def test_an_id_wider_than_the_index_is_in_no_row():
    table = pl.DataFrame({"id": [1, 2], "value": [10, 20]}, schema={"id": pl.Int32, "value": pl.Int64})
    ids = pl.Series([2**40 + 1, 2, None], dtype=pl.Int64)
    assert id_lookup.lookup(id_lookup.index(table, "id"), "id", ids)["value"].to_list() == [None, 20, None]


def test_launch_times_take_the_first_call_of_an_id():
    for seed in range(200):
        r = random.Random(seed)
        runtime = _table(r, r.randint(0, 40), pl.Int64).rename({"id": "correlation", "value": "start"})
        gpu = pl.DataFrame({"correlation": [r.choice([None, *range(-3, 15)]) for _ in range(r.randint(0, 40))]},
                           schema={"correlation": pl.Int64})
        dispatches._LAUNCH_CALLS.update(frame=None)
        want = _reference(runtime, "first")
        got = dispatches.launch_times(gpu, runtime).to_list()
        assert got == [None if c is None else want.get(c) for c in gpu["correlation"].to_list()], seed
