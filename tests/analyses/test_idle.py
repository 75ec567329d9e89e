"""Where idle time comes from (reports/analyses/idle.py): a hand-made timeline with one gap of each cause, and the
fixture traces against a plain computation (loops over the events), the four parts adding up to the idle time."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.reports.analyses import idle

from .trace_frames import FIXTURES, frames

I64 = pl.Int64


def ops_frame(rows):
    return pl.DataFrame(rows, schema={"start": I64, "end": I64, "launch": I64}, orient="row")


def host_frame(rows, name="x"):
    return pl.DataFrame([{"name": name, "pid": 1, "tid": 1, "start": s, "end": e, "correlation": None}
                         for s, e in rows], schema={"name": pl.String, "pid": I64, "tid": I64, "start": I64,
                                                    "end": I64, "correlation": I64})


def hand_made():
    ops = ops_frame([
        (100, 200, 50),
        (300, 400, 250),  # gap 200-300: launched at 250, host doing nothing we know: launch-bound
        (500, 600, 450),  # gap 400-500: host in cudaStreamSynchronize at 400: synchronization
        (700, 800, 650),  # gap 600-700: host in a collective at 600: other ranks
        (900, 950, 850),  # gap 800-900: host in the data loader at 800: other (data loading)
        (1000, 1100, 880),  # gap 950-1000: launched at 880, before the device ran dry: other (queued)
        (1200, 1300, None),  # gap 1100-1200: no launch link: other (unlinked)
        (1250, 1400, 1100),  # overlaps: no gap
        (1500, 1600, 1450),  # gap 1400-1500: host in a sync inside a collective: other ranks wins
    ])
    runtime = pl.concat([host_frame([(380, 480), (1390, 1450)], "cudaStreamSynchronize"),
                         host_frame([(10, 20)], "cudaLaunchKernel")])
    cpu_ops = host_frame([(780, 840)], "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__").drop(
        "correlation")
    comms = host_frame([(590, 620), (1300, 1420)], "record_param_comms").drop("correlation")
    return ops, idle.host_activity(runtime, cpu_ops, comms)


def test_each_gap_gets_its_cause():
    ops, host = hand_made()
    got = idle.device_causes(ops, host, [(1, 0, 450), (2, 450, 2000)])
    assert {k: got[k] for k in ("span_ns", "idle_ns", "launch_ns", "sync_ns", "other_ranks_ns", "other_ns")} == {
        "span_ns": 1500, "idle_ns": 650, "launch_ns": 100, "sync_ns": 100, "other_ranks_ns": 200, "other_ns": 250}
    assert got["other"] == {"queued_ns": 50, "unlinked_ns": 100, "data_loading_ns": 100,
                            "edges_ns": 0}
    assert got["gaps"] == 7
    first, second = got["iterations"]
    # window 0-450: before the first op (100), the launch-bound gap, half the sync gap; busy 200
    assert first == {"iteration": 1, "span_ns": 450, "idle_ns": 250, "launch_ns": 100, "sync_ns": 50,
                     "other_ranks_ns": 0, "other_ns": 100,
                     "other": {"queued_ns": 0, "unlinked_ns": 0, "data_loading_ns": 0, "edges_ns": 100}}
    assert second["idle_ns"] == 1550 - (100 + 100 + 50 + 100 + 200 + 100)  # window - busy in it
    assert (second["sync_ns"], second["other_ranks_ns"], second["other"]["edges_ns"]) == (50, 200, 400)


def plain_gaps(ops: list[tuple], host: dict[str, list[tuple[int, int]]]) -> list[tuple[int, int, str]]:
    """Gaps of the union and their cause, by loops: the op that opens a gap is the earliest-launched of those that
    start when the gap ends; the host state is any interval holding the gap's start."""
    ordered = sorted(ops, key=lambda o: (o[0], o[2] is None, o[2] or 0))
    out, until = [], None
    for start, end, launched in ordered:
        if until is not None and start > until:
            def inside(kind, t=until):
                return any(s <= t < e for s, e in host[kind])
            if launched is None:
                cause = "unlinked"
            elif launched < until:
                cause = "queued"
            elif inside("comms"):
                cause = "other_ranks"
            elif inside("sync"):
                cause = "sync"
            elif inside("data"):
                cause = "data_loading"
            else:
                cause = "launch"
            out.append((until, start, cause))
        until = end if until is None else max(until, end)
    return out


def plain_ops(f: dict, device: int) -> list[tuple]:
    calls: dict[int, int] = {}
    for r in f["rows"]["runtime"]:
        if r["correlation"] is not None:
            calls.setdefault(r["correlation"], r["start"])
    return [(o["start"], o["end"], calls.get(o["correlation"])) for o in f["rows"]["kernels"] + f["rows"]["copies"]
            if o["device"] == device]


CASES = [(folder, path.name) for folder in ("ours_h200_tt_v1", "ours_h200_tt_v4", "hta_two_ranks",
                                            "hta_mi250_minitoy", "tracelens_h100_bert", "kineto_tb_resnet50")
         for path in sorted((FIXTURES / "kineto" / folder).glob("*.json*"))]


@pytest.mark.parametrize("folder,name", CASES)
def test_fixture_traces_equal_a_plain_computation(folder, name):
    f = frames(FIXTURES / "kineto" / folder / name)
    host = idle.host_activity(f["runtime"], f["cpu_ops"], f["comms"])
    plain_host = {
        "comms": [(r["start"], r["end"]) for r in f["rows"]["comms"]],
        "sync": [(r["start"], r["end"]) for r in f["rows"]["runtime"] if idle.SYNC_CALL.match(r["name"])],
        "data": [(r["start"], r["end"]) for r in f["rows"]["cpu_ops"] if r["name"].startswith("enumerate(DataLoader)")],
    }
    ops = idle.operations(f["kernels"], f["copies"], f["runtime"])
    for device in sorted(ops["device"].unique().to_list()):
        plain = plain_ops(f, device)
        gaps = plain_gaps(plain, plain_host)
        got = idle.device_causes(ops.filter(pl.col("device") == device), host, f["steps"])
        span = max(e for _, e, _ in plain) - min(s for s, _, _ in plain)
        want = {c: sum(b - a for a, b, k in gaps if k == c) for c in
                ("launch", "sync", "other_ranks", "queued", "unlinked", "data_loading")}
        assert got["span_ns"] == span
        assert got["idle_ns"] == sum(b - a for a, b, _ in gaps)
        assert got["launch_ns"] + got["sync_ns"] + got["other_ranks_ns"] + got["other_ns"] == got["idle_ns"]
        assert {c: got[f"{c}_ns"] for c in ("launch", "sync", "other_ranks")} | {
            c: got["other"][f"{c}_ns"] for c in ("queued", "unlinked", "data_loading")} == want
        for (number, lo, hi), it in zip(f["steps"], got["iterations"], strict=True):
            inside = [(max(s, lo), min(e, hi)) for s, e, _ in plain if s < hi and e > lo]
            busy, until = 0, None
            for s, e in sorted(inside):
                busy += max(0, e - max(s, until if until is not None else s))
                until = e if until is None else max(until, e)
            assert it["iteration"] == number
            assert it["idle_ns"] == (hi - lo) - busy
            assert it["launch_ns"] + it["sync_ns"] + it["other_ranks_ns"] + it["other_ns"] == it["idle_ns"]
            assert it["launch_ns"] == sum(max(0, min(b, hi) - max(a, lo)) for a, b, k in gaps if k == "launch")


def causes_of(folder: str) -> dict:
    rows = []
    for path in sorted((FIXTURES / "kineto" / folder).glob("*.json*")):
        f = frames(path)
        ops = idle.operations(f["kernels"], f["copies"], f["runtime"])
        host = idle.host_activity(f["runtime"], f["cpu_ops"], f["comms"])
        rows += [idle.device_causes(ops.filter(pl.col("device") == d), host, [])
                 for d in sorted(ops["device"].unique().to_list())]
    return idle.verdict(rows, has_runtime=True) | {"rows": rows}


def test_tinytransformer_v1_eager_is_launch_bound_and_v4_graph_is_not():
    v1, v4 = causes_of("ours_h200_tt_v1"), causes_of("ours_h200_tt_v4")
    assert v1["bound"] == "launch"
    [row] = v1["rows"]
    assert v1["line"].startswith(f"launch-bound: {100 * row['launch_ns'] / row['span_ns']:.1f}% of the device span")
    assert row["launch_ns"] / row["span_ns"] > 0.5
    assert v4["bound"] == "device" and "launch-bound" not in v4["line"].split(":")[0]


def test_without_runtime_calls_the_verdict_says_what_it_cannot_tell():
    f = frames(next((FIXTURES / "kineto" / "ours_h200_tt_v1").glob("*.json.gz")))
    ops = idle.operations(f["kernels"], f["copies"], f["runtime"].clear())
    host = idle.host_activity(f["runtime"].clear(), f["cpu_ops"], f["comms"])
    row = idle.device_causes(ops, host, [])
    assert row["other"]["unlinked_ns"] == row["idle_ns"] > 0 and row["launch_ns"] == 0
    got = idle.verdict([row], has_runtime=False)
    assert got["bound"] == "unknown" and "--hip-trace" in got["line"]


def test_no_operations():
    ops, host = hand_made()
    got = idle.device_causes(ops.clear(), host, [(1, 0, 10)])
    assert got["idle_ns"] == 0 and got["iterations"] == []
    assert Path(__file__).exists()
