"""Per-name time of nested CPU operators (torch.profiler's `cpu_op` events, the embedded tracer's CPU rows).

CPU operators nest on their thread (aten::linear > aten::matmul > aten::mm), so summing every operator's duration
counts the same wall time at every level. Per operator name this computes:

- inclusive time (`KernelStats.total_ns`): the time during which at least one call of the name ran, per thread,
  summed over threads. A name nested in itself (aten::to inside aten::to) is counted once.
- exclusive or self time (`KernelStats.self_ns`): each call's duration less the parts covered by its direct
  children on the same thread. Self times of all names add up to the time the thread spent in any operator.

Calls, min and max are per call (min/max of the inclusive duration of single calls).

Intervals are half-open [start, end) in integer nanoseconds. A child that starts inside its parent but ends after it
(timestamps rounded by the profiler) is clipped to its parent for the parent's self time.
"""

from __future__ import annotations

from collections.abc import Iterable

from madengine_rocprof.reports.model import KernelStats


def operator_stats(intervals: Iterable[tuple[str, object, int, int]]) -> dict[str, KernelStats]:
    """(name, thread, start ns, end ns) of every operator call -> per-name stats with inclusive and self time.

    `thread` is any hashable key (Kineto's (pid, tid), the tracer's Thread_Id). The order of the input is free.
    """
    by_thread: dict[object, list[tuple[int, int, str]]] = {}
    for name, thread, start, end in intervals:
        by_thread.setdefault(thread, []).append((start, -end, name))
    stats: dict[str, KernelStats] = {}
    for calls in by_thread.values():
        calls.sort(key=lambda c: (c[0], c[1]))  # by start, the longer first: a parent comes before its children
        _thread_stats(calls, stats)
    return stats


def operator_stats_sorted(threads: Iterable[Iterable[tuple[int, int, str]]]) -> dict[str, KernelStats]:
    """The same figures from calls already grouped by thread, each thread's as (start, -end, name) sorted by start
    and then longest first: consumed one call at a time, so a caller streaming them keeps no list of calls."""
    stats: dict[str, KernelStats] = {}
    for calls in threads:
        _thread_stats(calls, stats)
    return stats


def _thread_stats(calls: Iterable[tuple[int, int, str]], stats: dict[str, KernelStats]) -> None:
    # stack of open calls: [end, name, self time so far]; covered_until[name]: the end of the union of the name's
    # calls seen so far on this thread (calls arrive in start order, so the union grows at its right end only)
    stack: list[list] = []
    covered_until: dict[str, int] = {}
    for start, neg_end, name in calls:
        end = -neg_end
        while stack and stack[-1][0] <= start:
            _close(stack.pop(), stats)
        if stack:
            parent = stack[-1]
            parent[2] -= min(end, parent[0]) - start  # the child's part inside its parent is not the parent's self
        entry = stats.get(name)
        if entry is None:
            entry = stats[name] = KernelStats(self_ns=0)
        duration = end - start
        entry.calls += 1
        entry.min_ns = duration if entry.min_ns is None or duration < entry.min_ns else entry.min_ns
        entry.max_ns = duration if entry.max_ns is None or duration > entry.max_ns else entry.max_ns
        until = covered_until.get(name)
        if until is None or start >= until:
            entry.total_ns += duration
            covered_until[name] = end
        elif end > until:
            entry.total_ns += end - until
            covered_until[name] = end
        stack.append([end, name, duration])
    while stack:
        _close(stack.pop(), stats)


def _close(call: list, stats: dict[str, KernelStats]) -> None:
    entry = stats[call[1]]
    entry.self_ns = (entry.self_ns or 0) + call[2]
