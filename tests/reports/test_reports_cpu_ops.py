"""cpu_ops: inclusive time counted once per name and self time of nested CPU operators, against a brute force.

The brute force walks every nanosecond of small random traces: at each instant, per thread, the innermost running
call owns the instant (self time) and each name running at all owns it once (inclusive time).
"""

from __future__ import annotations

import random

import pytest

from madengine_rocprof.reports.cpu_ops import operator_stats


def nested_calls(rng: random.Random, thread: str, start: int, end: int, depth: int, names: list[str]) -> list:
    """Properly nested calls inside [start, end): siblings in order, each with its own children."""
    calls = []
    t = start
    while t < end and depth < 4 and rng.random() < 0.8:
        s = rng.randrange(t, end)
        e = rng.randrange(s, end) + 1
        calls.append((rng.choice(names), thread, s, e))
        calls += nested_calls(rng, thread, s, e, depth + 1, names)
        t = e
    return calls


def brute_force(calls) -> dict[str, tuple[int, int, int]]:
    """name -> (calls, inclusive ns, self ns), by walking each nanosecond."""
    out: dict[str, list[int]] = {}
    for name, *_ in calls:
        out.setdefault(name, [0, 0, 0])[0] += 1
    threads = {c[1] for c in calls}
    for thread in threads:
        mine = [(c, position) for position, c in enumerate(calls) if c[1] == thread]
        for t in range(min(c[2] for c, _ in mine), max(c[3] for c, _ in mine)):
            running = [(c, position) for c, position in mine if c[2] <= t < c[3]]
            if not running:
                continue
            for name in {c[0] for c, _ in running}:
                out[name][1] += 1
            # innermost: the latest start, the shortest among equal starts, the later in the input among equal
            # intervals (the order the sweep nests them)
            innermost, _ = max(running, key=lambda item: (item[0][2], -item[0][3], item[1]))
            out[innermost[0]][2] += 1
    return {name: (c, i, s) for name, (c, i, s) in out.items()}


@pytest.mark.parametrize("seed", range(40))
def test_random_nested_traces_equal_the_brute_force(seed):
    rng = random.Random(seed)
    names = ["aten::linear", "aten::matmul", "aten::mm", "aten::to"][: rng.randrange(1, 5)]
    calls = []
    for thread in ("main", "backward")[: rng.randrange(1, 3)]:
        calls += nested_calls(rng, thread, 0, 200, 0, names)
    if not calls:
        return
    rng.shuffle(calls)  # the input order is free
    stats = operator_stats(calls)
    assert {n: (k.calls, k.total_ns, k.self_ns) for n, k in stats.items()} == brute_force(calls)
    for name, k in stats.items():
        durations = [c[3] - c[2] for c in calls if c[0] == name]
        assert (k.min_ns, k.max_ns) == (min(durations), max(durations))


def test_a_name_nested_in_itself_counts_once():
    stats = operator_stats([("aten::to", 1, 0, 100), ("aten::to", 1, 10, 60), ("aten::copy_", 1, 20, 50)])
    assert (stats["aten::to"].calls, stats["aten::to"].total_ns, stats["aten::to"].self_ns) == (2, 100, 70)
    assert (stats["aten::copy_"].total_ns, stats["aten::copy_"].self_ns) == (30, 30)


def test_the_linear_matmul_mm_chain():
    """aten::linear > aten::matmul > aten::mm: summing durations would count the mm's time three times."""
    stats = operator_stats([("aten::linear", 7, 0, 100), ("aten::matmul", 7, 5, 95), ("aten::mm", 7, 10, 90)])
    assert {n: (k.total_ns, k.self_ns) for n, k in stats.items()} == {
        "aten::linear": (100, 10), "aten::matmul": (90, 10), "aten::mm": (80, 80)}
    assert sum(k.self_ns or 0 for k in stats.values()) == 100  # the thread's busy time, once


def test_threads_are_separate():
    stats = operator_stats([("op", "a", 0, 100), ("op", "b", 50, 150)])  # overlapping in time, not nested
    assert (stats["op"].total_ns, stats["op"].self_ns) == (200, 200)


def test_a_child_running_past_its_parent_is_clipped_for_the_parents_self_time():
    """Rounded timestamps can make a child end after its parent: the parent's self time never goes negative."""
    stats = operator_stats([("parent", 1, 0, 100), ("child", 1, 90, 105)])
    assert (stats["parent"].self_ns, stats["child"].self_ns) == (90, 15)
    assert stats["child"].total_ns == 15


def test_zero_length_and_empty():
    assert operator_stats([]) == {}
    stats = operator_stats([("op", 1, 5, 5), ("outer", 1, 0, 10)])
    assert (stats["op"].calls, stats["op"].total_ns, stats["op"].self_ns) == (1, 0, 0)
    assert stats["outer"].self_ns == 10
