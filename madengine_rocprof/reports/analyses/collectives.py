"""Collectives matched across ranks: who arrives late, who waits, how long the transfer takes (docs/reports.md).

One collective runs as one NCCL/RCCL kernel on every rank of its process group. A rank's kernel starts when that
rank reaches the collective, but no data moves until the last rank of the group has arrived, so each rank's kernel
splits into waiting (its start to the last start) and transfer (the last start to its end). The rank that arrives
last is the late rank: the others wait on it. The rank that waits longest is the opposite of a straggler.

Matching: when PyTorch's `record_param_comms` gives every collective kernel a process group and a sequence number
(`Seq`), kernels match across ranks by (group, Seq); otherwise by their order within the group (the group from
`record_param_comms` where every kernel has one, else one group of all collective kernels, in start order: the same
rule as TraceLens's NcclAnalyser). Ranks come from `distributedInfo` or from the per-rank file names.

Everything here is exact integer arithmetic on nanosecond timestamps, except bandwidths (bytes per ns = GB/s).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import statistics
from dataclasses import dataclass
from typing import Any

import polars as pl

from madengine_rocprof.reports.analyses.ranks import rank_of
from madengine_rocprof.reports.categories import categorize
from madengine_rocprof.reports.model import RunData
from madengine_rocprof.reports.trace_tables import load_tables

COMMUNICATION, COPY = "communication", "memory copy"
TABLE_FORMATS = ("kineto", "rocprofv3-csv")  # the formats trace_tables reads per dispatch, with the launch links

# nccl-tests' bus-bandwidth factors (doc/PERFORMANCE.md), by collective kind and group size n
BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}

# bytes per element of the c10 ScalarType names record_param_comms writes as `dtype`
DTYPE_BYTES = {
    "Bool": 1, "Byte": 1, "Char": 1, "UInt8": 1, "Int8": 1, "QInt8": 1, "QUInt8": 1,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "Float8_e8m0fnu": 1,
    "Short": 2, "Half": 2, "BFloat16": 2, "UInt16": 2, "ComplexHalf": 4,
    "Int": 4, "Float": 4, "UInt32": 4, "QInt32": 4, "ComplexFloat": 8,
    "Long": 8, "Double": 8, "UInt64": 8, "ComplexDouble": 16,
}

# the collective in a kernel name: ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllGather_RING_LL, RCCL's
# ncclDevKernel_... (RCCL keeps NCCL's names; its Generic kernels name no collective)
KERNEL_OP = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+?)(?:_|\(|$)", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # a few names, asked for once per pair of collectives compared
def collective_kind(name: str | None) -> str | None:
    """allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, or None (unknown) from a
    record_param_comms collective name (`allreduce`, `_allgather_base`, `reduce_scatter_tensor_coalesced`, ...), an
    annotation (`nccl:all_reduce`) or a kernel's collective (`AllReduce`, `SendRecv`)."""
    if not name:
        return None
    key = name.lower().removeprefix("nccl:").replace("_", "")
    for kind in ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast"):
        if kind in key:
            return kind
    if key in ("send", "recv", "sendrecv") or key.startswith(("send", "recv")):
        return "sendrecv"
    if key.startswith("reduce"):
        return "reduce"
    return None


@dataclass
class RankTrace:
    """One rank's trace, as frames with the columns of trace_tables.TraceTables (docs in /coord TABLES):
    kernels (name, start, end; stream and correlation used where present), runtime (pid, tid, start, correlation)
    and comms (name, pid, tid, start, end, collective, in_nelems, out_nelems, dtype, group_size, pg_name, seq)."""

    rank: int
    origin: str
    kernels: pl.DataFrame
    runtime: pl.DataFrame | None = None
    comms: pl.DataFrame | None = None


@dataclass
class _Instance:
    """One collective kernel (or the kernels of one collective) on one rank."""

    rank: int
    start: int
    end: int
    kernel: str
    collective: str | None = None
    group: str | None = None
    seq: int | None = None
    dtype: str | None = None
    in_nelems: int | None = None
    out_nelems: int | None = None
    group_size: int | None = None


def _links(trace: RankTrace, kernels: pl.DataFrame) -> list[dict | None]:
    """The record_param_comms (or nccl:* annotation) around the host call that launched each kernel, or None.

    The kernel's correlation id names its launching runtime call; the innermost comms row on the same thread whose
    span holds that call's start describes the collective (its args, else the `nccl:NAME` annotation's name)."""
    runtime, comms = trace.runtime, trace.comms
    if runtime is None or comms is None or not comms.height or "correlation" not in kernels.columns:
        return [None] * kernels.height
    wanted = kernels["correlation"].drop_nulls()
    launch = {c: (p, t, s) for c, p, t, s in runtime.filter(pl.col("correlation").is_in(wanted.implode()))
              .select("correlation", "pid", "tid", "start").iter_rows()}
    # one sweep per thread over the comms rows and the launches in time order (rows first at equal times: a row
    # starting at the launch holds it), keeping the rows still open: linear in rows and kernels however long a row
    # is (an annotation spanning the whole trace once made every lookup scan every earlier row)
    by_thread: dict[tuple, list[tuple]] = {}
    for n, row in enumerate(comms.sort("start").iter_rows(named=True)):
        by_thread.setdefault((row["pid"], row["tid"]), []).append((row["start"], 0, n, row))
    out: list[dict | None] = [None] * kernels.height
    for index, correlation in enumerate(kernels["correlation"].to_list()):
        found = launch.get(correlation) if correlation is not None else None
        if found is not None and (found[0], found[1]) in by_thread:
            by_thread[(found[0], found[1])].append((found[2], 1, index, None))
    for items in by_thread.values():
        items.sort(key=lambda item: (item[0], item[1], item[2]))
        open_rows: list[dict] = []  # in start order
        for at, kind, index, row in items:
            while open_rows and open_rows[-1]["end"] < at:
                open_rows.pop()
            if kind == 0:
                open_rows.append(row)
                continue
            if any(r["end"] < at for r in open_rows):  # ended under a row that is still open
                open_rows = [r for r in open_rows if r["end"] >= at]
            # innermost first (latest start): the row with the collective's args wins, else an nccl:NAME annotation
            out[index] = next((r for r in reversed(open_rows) if r.get("collective")), None) or next(
                (r for r in reversed(open_rows) if str(r["name"]).startswith("nccl:")), None)
    return out


def _instances(trace: RankTrace) -> list[_Instance]:
    names = [n for n in trace.kernels["name"].unique().to_list() if categorize(n) == COMMUNICATION]
    kernels = trace.kernels.filter(pl.col("name").is_in(names)).sort("start")
    found: list[_Instance] = []
    for row, link in zip(kernels.iter_rows(named=True), _links(trace, kernels), strict=True):
        op = KERNEL_OP.search(row["name"])
        inst = _Instance(trace.rank, int(row["start"]), int(row["end"]), row["name"],
                         collective=op.group(1) if op and op.group(1).lower() != "generic" else None)
        if link is not None:
            inst.collective = link.get("collective") or str(link["name"]).removeprefix("nccl:") or inst.collective
            inst.group = link.get("pg_name")
            inst.seq = link.get("seq")
            inst.dtype = link.get("dtype")
            inst.in_nelems, inst.out_nelems = link.get("in_nelems"), link.get("out_nelems")
            inst.group_size = link.get("group_size")
        found.append(inst)
    return found


def _merge_same_key(items: list[_Instance]) -> _Instance:
    """The kernels of one collective on one rank (coalesced ops): first start to last end."""
    first = items[0]
    first.start, first.end = min(i.start for i in items), max(i.end for i in items)
    return first


def match(per_rank: dict[int, list[_Instance]]) -> tuple[str, list[dict[int, _Instance]], dict[int, int]]:
    """(how, matched collectives as {rank: instance}, unmatched kernels per rank), collectives in start order."""
    every = [i for items in per_rank.values() for i in items]
    by_seq = bool(every) and all(i.group is not None and i.seq is not None for i in every)
    keyed: dict[tuple, dict[int, list[_Instance]]] = {}
    if by_seq:
        how = "sequence number"
        for rank, items in per_rank.items():
            for inst in items:
                keyed.setdefault((inst.group, inst.seq), {}).setdefault(rank, []).append(inst)
    else:
        # by process group where every rank names some (its unlinked kernels form a group of their own)
        grouped = all(any(i.group is not None for i in items) for items in per_rank.values() if items)
        how = "order within process group" if grouped else "order (one group: no process-group metadata)"
        sequences: dict[Any, dict[int, list[_Instance]]] = {}
        for rank, items in per_rank.items():
            for inst in items:  # start order
                sequences.setdefault(inst.group if grouped else "all", {}).setdefault(rank, []).append(inst)
        for group, ranks in sequences.items():
            reference = min(ranks)
            for rank, items in ranks.items():
                shift = 0 if rank == reference else best_offset(ranks[reference], items)
                for n, inst in enumerate(items):
                    keyed.setdefault((group, n + shift), {}).setdefault(rank, []).append(inst)
    matched, unmatched = [], dict.fromkeys(per_rank, 0)
    for ranks in keyed.values():
        if len(ranks) < 2:
            for rank, items in ranks.items():
                unmatched[rank] += len(items)
            continue
        matched.append({rank: _merge_same_key(items) for rank, items in sorted(ranks.items())})
    matched.sort(key=lambda c: (min(i.start for i in c.values()), min(c)))
    return how, matched, unmatched


EDGE = 8  # collectives of a group that one rank's profiling window may hold and another's not, at either end
SAMPLE = 2_001  # pairs compared per candidate shift (all of them up to this many; evenly spaced beyond)
CANDIDATES = 4 * EDGE + 1  # shifts compared at most: the work stays linear in the number of collectives


def _spaced(n: int) -> range:
    """At most SAMPLE evenly spaced indices of range(n) (all of them for short sequences)."""
    return range(0, n, max(1, -(-n // SAMPLE)))


def best_offset(reference: list[_Instance], other: list[_Instance]) -> int:
    """The shift that pairs `other[j]` with `reference[j + shift]`, for traces whose windows began at different
    collectives: among shifts that leave at most EDGE collectives of the shorter sequence unpaired, the one with the
    smallest median difference of end times (the ranks of one collective finish together: it completes only when
    every rank's data has arrived), then the fewest pairs of different collective kinds, then the smallest shift.

    Bounded work on long sequences: only shifts that pair enough collectives are candidates (a range computed, not
    searched); where the sequences' lengths differ so much that more than CANDIDATES shifts qualify, the candidates
    are the shifts most often voted for by pairing sampled collectives with the one of nearest end time; each
    candidate is scored on at most SAMPLE evenly spaced pairs."""
    n_ref, n_other = len(reference), len(other)
    if not n_ref or not n_other:
        return 0
    need = max(1, min(n_ref, n_other) - EDGE)
    # pairs of shift s: j in [max(0, -s), min(n_other, n_ref - s)); at least `need` of them
    low, high = need - n_other, n_ref - need
    if low > high:
        return 0
    shifts: list[int] = list(range(low, high + 1))
    if len(shifts) > CANDIDATES:
        ends = sorted((inst.end, i) for i, inst in enumerate(reference))
        keys = [e for e, _ in ends]
        votes: dict[int, int] = {}
        for j in _spaced(n_other):
            at = bisect.bisect_left(keys, other[j].end)
            near = min((k for k in (at - 1, at) if 0 <= k < len(ends)), key=lambda k: abs(keys[k] - other[j].end))
            shift = ends[near][1] - j
            if low <= shift <= high:
                votes[shift] = votes.get(shift, 0) + 1
        shifts = sorted(votes, key=lambda s: (-votes[s], abs(s)))[:CANDIDATES] or [min(shifts, key=abs)]
    best: tuple | None = None
    for shift in shifts:
        first, last = max(0, -shift), min(n_other, n_ref - shift)
        pairs = [(reference[j + shift], other[j]) for j in (first + k for k in _spaced(last - first))]
        differ = sum(1 for a, b in pairs if a.collective and b.collective
                     and collective_kind(a.collective) != collective_kind(b.collective))
        score = (statistics.median(abs(a.end - b.end) for a, b in pairs), differ, abs(shift))
        if best is None or score < best[0]:
            best = (score, shift)
    return 0 if best is None else best[1]


def _bytes(first: _Instance) -> int | None:
    """nccl-tests' size S: the whole buffer (allgather: the gathered output; reducescatter: the whole input), i.e.
    the larger of the input and output element counts times the element size."""
    counts = [n for n in (first.in_nelems, first.out_nelems) if n is not None and n >= 0]  # a negative: corrupt
    size = DTYPE_BYTES.get(first.dtype or "")
    return max(counts) * size if counts and size else None


def collective_row(number: int, ranks: dict[int, _Instance]) -> dict[str, Any]:
    """Skew, late rank, per-rank wait and transfer, bytes and bandwidth of one matched collective."""
    first_start = min(i.start for i in ranks.values())
    last_start = max(i.start for i in ranks.values())
    late = min(r for r, i in ranks.items() if i.start == last_start)
    described = next((i for i in ranks.values() if i.collective), next(iter(ranks.values())))
    kind = collective_kind(described.collective)
    # a group smaller than the ranks that ran the collective is not this collective's (corrupt or wrongly typed)
    n = described.group_size if described.group_size is not None and described.group_size >= len(ranks) \
        else len(ranks)
    size = _bytes(described)
    time_ns = ranks[late].end - last_start  # the late rank waited for no one: its whole kernel is transfer
    algbw = size / time_ns if size is not None and time_ns > 0 else None  # bytes per ns = GB/s
    return {
        "number": number,
        "collective": described.collective,
        "kind": kind,
        "kernel": described.kernel,
        "group": described.group,
        "seq": described.seq,
        "dtype": described.dtype,
        "group_size": n,
        "bytes": size,
        "first_start_ns": first_start,
        "last_start_ns": last_start,
        "end_ns": max(i.end for i in ranks.values()),
        "skew_ns": last_start - first_start,
        "late_rank": late if last_start > first_start else None,
        "time_ns": time_ns,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * BUS_FACTOR[kind](n) if algbw is not None and kind in BUS_FACTOR else None,
        "ranks": [
            {"rank": r, "start_ns": i.start, "end_ns": i.end, "wait_ns": min(last_start, i.end) - i.start,
             "transfer_ns": max(i.end - last_start, 0)}
            for r, i in ranks.items()
        ],
    }


def percentile(values: list[int], q: float) -> int:
    """Nearest-rank percentile: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def union_length(*frames: pl.DataFrame) -> int:
    """The length of the union of the [start, end) intervals of all `frames` (columns start, end), in whole ns:
    sorted by start, an interval opens a new run where it starts after every earlier one has ended."""
    spans = pl.concat([f.select(pl.col("start").cast(pl.Int128), pl.col("end").cast(pl.Int128)) for f in frames])
    spans = spans.filter(pl.col("end") > pl.col("start")).sort("start", "end")
    if not spans.height:
        return 0
    runs = (spans.with_columns((pl.col("start") > pl.col("end").cum_max().shift(1)).fill_null(True).cum_sum()
                               .alias("run"))
            .group_by("run").agg((pl.col("end").max() - pl.col("start").min()).alias("length")))
    return int(runs["length"].sum())


def _intervals(pairs: list[tuple[int, int]]) -> pl.DataFrame:
    return pl.DataFrame(pairs, schema={"start": pl.Int128, "end": pl.Int128}, orient="row")


def _compute_intervals(trace: RankTrace) -> pl.DataFrame:
    """Kernels other than communication and copies on this rank (our busy-time definition of compute)."""
    names = trace.kernels["name"].unique().to_list()
    compute = [n for n in names if categorize(n) not in (COMMUNICATION, COPY)]
    return trace.kernels.filter(pl.col("name").is_in(compute)).select("start", "end")


def analyze(traces: list[RankTrace], detail_rows: int | None = None) -> dict[str, Any] | None:
    """The `collectives` object of the report, or None when fewer than two ranks have collective kernels."""
    per_rank = {t.rank: _instances(t) for t in traces}
    if sum(1 for items in per_rank.values() if items) < 2:
        return None
    how, matched, unmatched = match(per_rank)
    rows = [collective_row(n, c) for n, c in enumerate(matched, 1)]
    skews = [r["skew_ns"] for r in rows]
    totals: dict[int, dict[str, int]] = {t.rank: {"wait": 0, "transfer": 0, "caused": 0, "late": 0, "count": 0}
                                         for t in traces}
    waits: dict[int, list[tuple[int, int]]] = {t.rank: [] for t in traces}
    transfers: dict[int, list[tuple[int, int]]] = {t.rank: [] for t in traces}
    for row in rows:
        if row["late_rank"] is not None:
            totals[row["late_rank"]]["late"] += 1
            totals[row["late_rank"]]["caused"] += sum(r["wait_ns"] for r in row["ranks"])
        for r in row["ranks"]:
            t = totals[r["rank"]]
            t["count"] += 1
            t["wait"] += r["wait_ns"]
            t["transfer"] += r["transfer_ns"]
            waits[r["rank"]].append((r["start_ns"], r["start_ns"] + r["wait_ns"]))
            transfers[r["rank"]].append((row["last_start_ns"], r["end_ns"]))
    per_rank_rows: list[dict[str, Any]] = []
    for trace in sorted(traces, key=lambda t: t.rank):
        t, compute = totals[trace.rank], _compute_intervals(trace)
        moving = _intervals(transfers[trace.rank])
        busy = union_length(compute)
        busy_or_moving = union_length(compute, moving)
        per_rank_rows.append({
            "rank": trace.rank,
            "origin": trace.origin,
            "collectives": t["count"],
            "unmatched": unmatched.get(trace.rank, 0),
            "late_count": t["late"],
            "wait_ns": t["wait"],
            "transfer_ns": t["transfer"],
            "caused_wait_ns": t["caused"],
            # not overlapped with compute on this rank; a moment both waiting (one collective) and moving data
            # (another) counts as transfer
            # (what a union adds to another: the length of both together less the other's)
            "exposed_transfer_ns": busy_or_moving - busy,
            "exposed_wait_ns": union_length(compute, moving, _intervals(waits[trace.rank])) - busy_or_moving,
        })
    caused: dict[int, int] = {r["rank"]: r["caused_wait_ns"] for r in per_rank_rows}
    top = max(caused.values(), default=0)
    late_rank = min(r for r, v in caused.items() if v == top) if top > 0 else None
    notes = []
    if any(unmatched.values()):
        notes.append(
            "collective kernels found on some ranks only (not matched): "
            + ", ".join(f"rank {r}: {n}" for r, n in sorted(unmatched.items()) if n)
            + " (a profiling window that starts or ends at a different collective on each rank, or ranks whose "
            "traces are missing)")
    differ = sum(1 for c in matched if len({collective_kind(i.collective) for i in c.values() if i.collective}) > 1)
    if differ:
        notes.append(f"{differ} matched collectives are named differently on different ranks: matching by "
                     f"{how} paired kernels of different collectives")
    early = sum(1 for row in rows for r in row["ranks"] if r["end_ns"] < row["last_start_ns"])
    if early:
        notes.append(f"{early} collective kernels ended before the last rank started the collective: a root "
                     "that sent a small broadcast into its peers' buffers without waiting, ranks' clocks that "
                     "disagree (traces from different hosts), or kernels paired wrongly; such a kernel counts as all "
                     "wait, no transfer")
    return {
        "count": len(rows),
        "matched_by": how,
        "ranks": sorted(per_rank),
        "groups": sorted({str(r["group"]) for r in rows if r["group"] is not None}),
        "skew_ns": {"median": statistics.median(skews), "p90": percentile(skews, 0.9), "max": max(skews)}
        if skews else {"median": None, "p90": None, "max": None},
        "late_rank": late_rank,
        "per_rank": per_rank_rows,
        "by_kind": _by_kind(rows),
        "collectives": rows if detail_rows is None else rows[:detail_rows],
        "notes": notes,
    }


def _by_kind(rows: list[dict]) -> list[dict[str, Any]]:
    """One row per (collective, dtype, bytes, group size): count, skew and transfer time totals, median bandwidth."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["collective"] or r["kernel"], r["dtype"], r["bytes"], r["group_size"]), []).append(r)
    out = []
    for (name, dtype, size, n), items in groups.items():
        algbw = [r["algbw_gbps"] for r in items if r["algbw_gbps"] is not None]
        busbw = [r["busbw_gbps"] for r in items if r["busbw_gbps"] is not None]
        out.append({
            "collective": name, "dtype": dtype, "bytes": size, "group_size": n, "count": len(items),
            "skew_ns_total": sum(r["skew_ns"] for r in items), "skew_ns_max": max(r["skew_ns"] for r in items),
            "time_ns_total": sum(r["time_ns"] for r in items),
            "algbw_gbps_median": statistics.median(algbw) if algbw else None,
            "busbw_gbps_median": statistics.median(busbw) if busbw else None,
        })
    return sorted(out, key=lambda g: (-g["skew_ns_total"] - g["time_ns_total"], str(g["collective"])))


def of_run(run: RunData) -> dict[str, Any] | None:
    """The run's collectives, from the per-dispatch tables of its Kineto traces and rocprofv3-format kernel traces
    (one per rank); None with fewer than two such traces."""
    # only traces with collective kernels (their names are known before any table is read); a source built in
    # memory (by a caller of build_report, not read from a file) has no tables to read
    sources = [s for s in run.timing if s.has_timeline and not s.cpu_operators and s.fmt in TABLE_FORMATS
               and any(categorize(name) == COMMUNICATION for name in s.kernels)
               and (s.tables is not None or s.path.is_file())]
    if len(sources) < 2:
        return None
    traces: list[RankTrace] = []
    for source in sources:
        tables = load_tables(source)
        if tables is None:
            continue
        rank = tables.rank if tables.rank is not None else rank_of(source)
        traces.append(RankTrace(-1 if rank is None else rank, source.process, tables.kernels,
                                tables.runtime if tables.runtime.height else None,
                                tables.comms if tables.comms.height else None))
    if len(traces) < 2:
        return None
    named = [t.rank for t in traces]
    numbered = -1 in named or len(set(named)) < len(named)
    if numbered:  # ranks unnamed or named twice: number the traces in file order
        for n, trace in enumerate(traces):
            trace.rank = n
    result = analyze(traces)
    if result is not None and numbered:
        result["notes"].append("the traces do not name distinct ranks (distributedInfo or rank<N> in the file "
                               "names): ranks are numbered in file order: "
                               + ", ".join(f"{t.rank} = {t.origin}" for t in traces))
    return result
