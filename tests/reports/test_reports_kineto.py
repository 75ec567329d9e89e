"""PyTorch profiler (Kineto) traces recorded by others (tests/fixtures/kineto, see PROVENANCE.md), read by the report.

Every figure is checked two ways: against an exact computation written here (the trace parsed with the standard
library, microseconds as Decimal, unions of intervals by hand), and against the values Holistic Trace Analysis 0.5.0
gave on the same files (hta_values.json, made by hta_values.py in the fixtures folder), where HTA's definitions are
the same as ours: kernel counts and per-kernel totals from HTA's parser, busy time of kernels per device.
"""

from __future__ import annotations

import gzip
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.reports import load_runs
from madengine_rocprof.reports.discover import classify
from madengine_rocprof.reports.kineto_reader import to_ns

from .reports_builders import exact_union

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "kineto"
HTA = json.loads((FIXTURES / "hta_values.json").read_text())
FOLDERS = sorted(HTA["folders"])
GPU_FOLDERS = [f for f in FOLDERS if f != "hta_cpu_only"]


# --- the exact computation, independent of the reader ----------------------------------------------------------------

def load_trace(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh, parse_float=Decimal)


def exact_ns(value) -> int:
    return int(Decimal(value) * 1000)


def events(trace: dict, *categories: str) -> list[dict]:
    wanted = {c.lower() for c in categories}
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and str(e.get("cat", "")).lower() in wanted]


def interval(trace: dict, event: dict) -> tuple[int, int]:
    start = int(trace.get("baseTimeNanoseconds") or 0) + exact_ns(event["ts"])
    return start, start + exact_ns(event["dur"])


def merged_groups(intervals) -> int:
    groups, until = 0, None
    for start, end in sorted(intervals):
        if until is None or start > until:
            groups += 1
        until = end if until is None else max(until, end)
    return groups


def assert_hta_union(ours: int, hta: int, trace: dict, device: str, *categories: str) -> None:
    """Equal to the nanosecond, except where HTA's float microseconds cannot hold nanoseconds: at 7e12 us
    (absolute ROCm clocks) a float's step is about 1 ns, so each merged interval of HTA's may be 1 ns off."""
    spans = [interval(trace, e) for e in events(trace, *categories)
             if f"GPU {(e.get('args') or {}).get('device', e.get('pid'))}" == device]
    slack = merged_groups(spans) if float_step_ns(trace) >= 0.5 else 0
    assert abs(ours - hta) <= slack, (ours, hta, slack)


def float_step_ns(trace: dict) -> float:
    """The spacing of float64 values at the trace's largest timestamp, in ns (how exact HTA's microseconds are)."""
    import math

    largest = max((abs(float(e["ts"])) for e in trace["traceEvents"] if "ts" in e), default=0.0)
    return math.ulp(largest) * 1000


GPU_EVENTS = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")


def on_device(trace: dict, device: str, *categories: str) -> list[tuple[int, int]]:
    return [interval(trace, e) for e in events(trace, *categories)
            if f"GPU {(e.get('args') or {}).get('device', e.get('pid'))}" == device]


def kernel_table(trace: dict) -> dict[str, tuple[int, int]]:
    table: dict[str, list[int]] = {}
    for e in events(trace, "kernel"):
        start, end = interval(trace, e)
        entry = table.setdefault(e["name"], [0, 0])
        entry[0] += 1
        entry[1] += end - start
    return {name: (calls, total) for name, (calls, total) in table.items()}


def busy_per_device(trace: dict, *categories: str) -> dict[str, int]:
    per: dict[str, list] = {}
    for e in events(trace, *categories):
        device = (e.get("args") or {}).get("device", e.get("pid"))
        per.setdefault(f"GPU {device}", []).append(interval(trace, e))
    return {device: exact_union(spans) for device, spans in per.items()}


def run_of(folder: str):
    (run,) = load_runs([FIXTURES / folder])
    return run


def source_of(run, name: str):
    (source,) = [s for s in run.timing if Path(s.rel).name == name]
    return source


# --- reading

@pytest.mark.parametrize("folder", FOLDERS)
def test_every_trace_is_found_as_a_kineto_trace(folder):
    files = sorted((FIXTURES / folder).glob("*.json*"))
    assert files and all(classify(f) == "kineto" for f in files)
    run = run_of(folder)
    assert sorted(s.rel for s in run.timing) == sorted(f.name for f in files)
    assert all(s.fmt == "kineto" for s in run.timing)


@pytest.mark.parametrize("folder", GPU_FOLDERS)
def test_kernels_and_busy_time_equal_the_exact_computation(folder):
    run = run_of(folder)
    for path in sorted((FIXTURES / folder).glob("*.json*")):
        trace = load_trace(path)
        source = source_of(run, path.name)
        expected = kernel_table(trace)
        assert {n: (k.calls, k.total_ns) for n, k in source.kernels.items()} == expected
        assert source.dispatches == sum(calls for calls, _ in expected.values())
        assert not source.cpu_operators
        # busy: kernels, memcpy and memset (docs/reports.md)
        busy = busy_per_device(trace, *GPU_EVENTS)
        assert {d.device: d.busy_ns for d in source.devices} == busy
        for d in source.devices:
            kernels = on_device(trace, d.device, "kernel")
            everything = on_device(trace, d.device, *GPU_EVENTS)
            assert d.dispatches == len(kernels)
            assert d.copies == len(everything) - len(kernels)
            assert d.span_ns == max(e for _, e in everything) - min(s for s, _ in everything)
            assert d.kernel_time_sum_ns == sum(e - s for s, e in kernels)


@pytest.mark.parametrize("folder", GPU_FOLDERS)
def test_kernels_and_busy_time_equal_holistic_trace_analysis(folder):
    """HTA's parser (every event kept) and its interval merge, recorded in hta_values.json."""
    run = run_of(folder)
    for name, hta in HTA["folders"][folder]["files"].items():
        source = source_of(run, name)
        assert {n: [k.calls, k.total_ns] for n, k in source.kernels.items()} == hta["kernels"]
        trace = load_trace(FIXTURES / folder / name)
        if {c.lower() for c in hta["gpu_events_by_category"]} <= set(GPU_EVENTS):
            hta_busy = {f"GPU {device}": v["busy_all_gpu_events_ns"] for device, v in hta["devices"].items()}
        else:  # HTA also counts cuda_sync events / CPU operators with a stream: compare the kernels' union
            assert not events(trace, *GPU_EVENTS[1:])  # (these traces have no copies: busy is the kernels')
            hta_busy = {f"GPU {device}": v["busy_kernels_ns"] for device, v in hta["devices"].items()
                        if v["busy_kernels_ns"]}
        assert {d.device for d in source.devices} == set(hta_busy)
        for d in source.devices:
            assert_hta_union(d.busy_ns, hta_busy[d.device], trace, d.device, *GPU_EVENTS)


def test_hta_counts_copies_as_busy_and_the_exact_computation_agrees():
    """HTA's busy time (kernels, memcpy and memset) equals the exact union of those events: the data for the
    report's HTA-definition view is there (dispatches.aggregate gets the copies)."""
    for folder in GPU_FOLDERS:
        for name, hta in HTA["folders"][folder]["files"].items():
            trace = load_trace(FIXTURES / folder / name)
            categories = {c.lower() for c in hta["gpu_events_by_category"]}
            if not categories <= {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}:
                continue  # HTA also counts cuda_sync / stream-tagged CPU ops as GPU events in some traces
            gpu = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
            exact = busy_per_device(trace, *gpu)
            assert set(exact) == {f"GPU {d}" for d in hta["devices"]}
            for d, v in hta["devices"].items():
                assert_hta_union(exact[f"GPU {d}"], v["busy_all_gpu_events_ns"], trace, f"GPU {d}", *gpu)


def test_copies_per_direction():
    run = run_of("hta_two_ranks")
    expected: dict[str, list[int]] = {}
    for path in sorted((FIXTURES / "hta_two_ranks").glob("*.json.gz")):
        trace = load_trace(path)
        for e in events(trace, "gpu_memcpy", "gpu_memset"):
            words = e["name"].split()
            key = "memset" if words[0] == "Memset" else {"HtoD": "host to device", "DtoH": "device to host",
                                                          "DtoD": "device to device"}[words[1]]
            start, end = interval(trace, e)
            entry = expected.setdefault(key, [0, 0])
            entry[0] += 1
            entry[1] += end - start
    assert {d: [c.calls, c.total_ns] for d, c in run.copies.items()} == expected
    assert set(expected) >= {"memset", "host to device"}


def test_rank_from_distributed_info():
    run = run_of("hta_two_ranks")
    assert {Path(s.rel).name: s.rank for s in run.timing} == {"sampled_rank-0.json.gz": 0, "sampled_rank-1.json.gz": 1}
    assert run_of("tracelens_h100_bert").timing[0].rank is None  # no distributedInfo: not distributed


@pytest.mark.parametrize("folder", ["kineto_tb_resnet50", "hta_two_ranks", "hta_mi250_minitoy", "tracelens_h100_bert"])
def test_profiler_steps_are_the_iterations(folder):
    run = run_of(folder)
    for path in sorted((FIXTURES / folder).glob("*.json*")):
        trace = load_trace(path)
        steps: dict[int, tuple[int, int]] = {}
        for e in trace["traceEvents"]:
            if (e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
                    and str(e.get("cat", "")).lower() != "gpu_user_annotation"):
                steps.setdefault(int(e["name"].split("#")[1]), interval(trace, e))
        source = source_of(run, path.name)
        assert [(i.number, i.start_ns, i.end_ns) for i in source.iterations] == sorted(
            (n, s, e) for n, (s, e) in steps.items())
        assert source.iterations


def test_peak_memory_from_memory_events():
    for folder in ("tracelens_h100_bert", "tracelens_mi300_falconsai"):
        (path,) = (FIXTURES / folder).glob("*.json.gz")
        trace = load_trace(path)
        peaks: dict[str, int] = {}
        for e in trace["traceEvents"]:
            if e.get("name") == "[memory]" and e.get("ph") in ("i", "I"):
                args = e["args"]
                label = "CPU" if args["Device Type"] == 0 else f"GPU {args['Device Id']}"
                peaks[label] = max(peaks.get(label, 0), args["Total Allocated"])
        assert run_of(folder).timing[0].peak_memory_bytes == peaks
        assert any(k.startswith("GPU") for k in peaks)


def test_cpu_only_trace_reports_operators_with_self_time():
    (path,) = (FIXTURES / "hta_cpu_only").glob("*.json.gz")
    trace = load_trace(path)
    source = run_of("hta_cpu_only").timing[0]
    assert source.cpu_operators and source.devices == []
    ops = [(e["name"], (e["pid"], e["tid"]), *interval(trace, e)) for e in events(trace, "cpu_op")
           if not e["name"].startswith("ProfilerStep#")]
    assert source.dispatches == len(ops)
    for name in {o[0] for o in ops}:
        stats = source.kernels[name]
        assert stats.calls == sum(o[0] == name for o in ops)
        per_thread: dict = {}
        for o in ops:
            if o[0] == name:
                per_thread.setdefault(o[1], []).append((o[2], o[3]))
        assert stats.total_ns == sum(exact_union(v) for v in per_thread.values())
    threads: dict = {}
    for o in ops:
        threads.setdefault(o[1], []).append((o[2], o[3]))
    assert sum(k.self_ns or 0 for k in source.kernels.values()) == sum(exact_union(v) for v in threads.values())


# --- exact time

@pytest.mark.parametrize(("text", "ns"), [
    (5, 5000), ("1.5", 1500), ("0.001", 1), ("1682725898236567.123", 1682725898236567123),
    ("2.0004", 2000), ("2.0005", 2000), ("2.0015", 2002), ("1e3", 1_000_000), ("-1.25", -1250),
])
def test_microseconds_to_exact_nanoseconds(text, ns):
    assert to_ns(text) == ns


def test_absolute_timestamps_keep_every_nanosecond(tmp_path):
    """ts in absolute microseconds (no baseTimeNanoseconds): ts * 1000 exceeds a float's exact integers."""
    text = """{"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1700000000000001.001, "dur": 1.5,
       "args": {"device": 0, "stream": 7}},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1700000000000003.003, "dur": 0.001,
       "args": {"device": 0, "stream": 7}}]}"""  # as text: Python floats cannot hold these values
    write(tmp_path / "run" / "t.json", None, text=text)
    source = load_runs([tmp_path / "run"])[0].timing[0]
    assert source.first_start_ns == 1700000000000001001
    assert source.last_end_ns == 1700000000000003004
    assert source.kernels["k"].total_ns == 1501
    assert float("1700000000000001.001") * 1000 != 1700000000000001001  # what a float round trip would give


def test_base_time_is_added(tmp_path):
    text = """{"schemaVersion": 1, "baseTimeNanoseconds": 1751410836000000000, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1414456661601.577, "dur": 2.5}]}"""
    write(tmp_path / "run" / "t.json.gz", None, text=text)
    source = load_runs([tmp_path / "run"])[0].timing[0]
    assert (source.first_start_ns, source.last_end_ns) == (1751410836000000000 + 1414456661601577,
                                                           1751410836000000000 + 1414456661604077)


# --- commands

def test_report_command_on_a_folder_of_traces(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["report", str(FIXTURES / "hta_two_ranks"), "--json", str(out), "--perfetto", str(tmp_path / "pf"),
                 "--html", str(tmp_path / "r.html")]) == 0
    report = json.loads(out.read_text())["runs"][0]
    assert report["summary"]["processes"] == 2
    assert report["summary"]["dispatches"] == 1154 + 1104
    assert {s["format"] for s in report["sources"]} == {"kineto"}
    (trace,) = (tmp_path / "pf").glob("*.perfetto.json")
    assert sum(e["ph"] == "X" for e in json.loads(trace.read_text())["traceEvents"]) == 1154 + 1104
    assert "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t" in capsys.readouterr().out


def test_report_compares_an_h100_and_an_mi300_trace(tmp_path):
    out = tmp_path / "r.json"
    assert main(["report", str(FIXTURES / "tracelens_h100_bert"), str(FIXTURES / "tracelens_mi300_bert"),
                 "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert [r["label"] for r in report["comparison"]] == ["tracelens_h100_bert", "tracelens_mi300_bert"]
    assert all(r["dispatches"] == 60 for r in report["comparison"])


def test_compare_and_gate_on_kineto_traces(tmp_path, capsys):
    """A folder of repeated runs, one subfolder of traces per run, on each side: compare and gate take them."""
    base, new = tmp_path / "base", tmp_path / "new"
    for side in (base, new):
        for repeat in ("r1", "r2", "r3"):
            shutil.copytree(FIXTURES / "tracelens_h100_falconsai", side / repeat)
    out = tmp_path / "c.json"
    assert main(["compare", str(base), str(new), "--json", str(out), "-q", "--min-share", "0"]) == 0
    assert main(["compare", str(base), str(new), "--gate", "-q"]) == 0  # the same trace: no regression
    capsys.readouterr()
    result = json.loads(out.read_text())
    assert [Path(r).name for r in result["base"]["runs"]] == ["r1", "r2", "r3"]  # each trace folder is a run
    trace = kernel_table(load_trace(next((base / "r1").glob("*.json.gz"))))
    kernels = {m["name"]: m for m in result["metrics"] if m["kind"] == "kernel"}
    assert kernels and set(kernels) <= set(trace)


def test_kernels_classify_run_on_a_kineto_trace(tmp_path, capsys):
    assert main(["kernels", "classify", "--run", str(FIXTURES / "tracelens_mi300_falconsai")]) == 0
    out = capsys.readouterr().out
    (path,) = (FIXTURES / "tracelens_mi300_falconsai").glob("*.json.gz")
    names = set(kernel_table(load_trace(path)))
    assert sum(line.startswith("| Cijk_") for line in out.splitlines()) == sum(n.startswith("Cijk_") for n in names)



def test_kernels_classify_run_lists_the_longest_kernels_first(capsys):
    """`kernels classify --run --json` in the run's order of total kernel time (ties by name), the same every time."""
    import json as _json

    from madengine_rocprof.reports import load_runs
    from madengine_rocprof.reports.analysis import merge_kernels

    run_dir = FIXTURES / "tracelens_mi300_falconsai"
    assert main(["kernels", "classify", "--run", str(run_dir), "--json"]) == 0
    listed = [row["name"] for row in _json.loads(capsys.readouterr().out)]
    (run,) = load_runs([run_dir])
    totals = merge_kernels(run)
    assert listed == sorted(totals, key=lambda n: (-totals[n].total_ns, n))

# --- strict reading: bad input is exit 2 with the file and the place --------------------------------------------------

def write(path: Path, trace, *, text: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (text if text is not None else json.dumps(trace)).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def report_error(run: Path, capsys) -> str:
    assert main(["report", str(run), "-q"]) == 2
    return capsys.readouterr().err


def test_truncated_gzip(tmp_path, capsys):
    good = (FIXTURES / "tracelens_h100_bert" / "gaunernst_bert-small-uncased__1016001.json.gz").read_bytes()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "t.json.gz").write_bytes(good[: len(good) // 2])
    err = report_error(tmp_path / "run", capsys)
    assert "t.json.gz" in err and "Traceback" not in err


def test_truncated_json_names_line_and_column(tmp_path, capsys):
    text = json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.5}] * 3}, indent=1)
    write(tmp_path / "run" / "t.pt.trace.json", None, text=text[:-40])
    err = report_error(tmp_path / "run", capsys)
    assert "t.pt.trace.json:" in err and "not valid JSON" in err


def test_garbage_named_like_a_torch_trace(tmp_path, capsys):
    write(tmp_path / "run" / "w.pt.trace.json", None, text="this is not json")
    err = report_error(tmp_path / "run", capsys)
    assert "w.pt.trace.json" in err and "traceEvents" in err


@pytest.mark.parametrize(("event", "words"), [
    ({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": -2.5}, "negative dur"),
    ({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 2.5}, "not numbers"),
    ({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7}, "not numbers"),
    ({"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.5}, "has no name"),
])
def test_bad_event_names_its_index(tmp_path, capsys, event, words):
    good = {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 1.0, "dur": 1.0}
    write(tmp_path / "run" / "t.json", {"schemaVersion": 1, "traceEvents": [good, good, event]})
    err = report_error(tmp_path / "run", capsys)
    assert "$.traceEvents[2]" in err and words in err


def test_wrong_type_names_its_json_path(tmp_path, capsys):
    write(tmp_path / "run" / "t.json", {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 1.0, "dur": 1.0, "args": [1]}]})
    err = report_error(tmp_path / "run", capsys)
    assert "$.traceEvents[0].args" in err


def test_bad_rank(tmp_path, capsys):
    write(tmp_path / "run" / "t.json", {"schemaVersion": 1, "distributedInfo": {"rank": "zero"}, "traceEvents": []})
    assert "distributedInfo.rank" in report_error(tmp_path / "run", capsys)


def test_other_json_files_are_not_traces(tmp_path):
    write(tmp_path / "config.json", {"model": "x", "traceEvents_note": 1})
    write(tmp_path / "chrome.json", {"traceEvents": [{"ph": "X", "cat": "gemm", "name": "k", "ts": 1, "dur": 1}]})
    assert classify(tmp_path / "config.json") is None
    assert classify(tmp_path / "chrome.json") is None  # e.g. the report's own Perfetto output


def test_the_readme_example_works_as_written(tmp_path, repo):
    """The README's torch.profiler snippet, run as written, then `madengine-rocprof report my_torch_traces/`."""
    pytest.importorskip("torch")
    import re
    import subprocess
    import sys

    readme = (repo / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Reports on the PyTorch profiler traces"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code and "madengine-rocprof report my_torch_traces/" in section
    (tmp_path / "record.py").write_text(code.group(1))
    proc = subprocess.run([sys.executable, "record.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "r.json"
    assert main(["report", str(tmp_path / "my_torch_traces"), "--json", str(out), "-q"]) == 0
    (run,) = load_runs([tmp_path / "my_torch_traces"])
    (source,) = run.timing
    assert source.fmt == "kineto" and source.iterations  # the 3 active steps of the schedule
    assert [i.number for i in source.iterations] == sorted(i.number for i in source.iterations)
    if source.cpu_operators:  # no GPU here: CPU operators, self time never more than inclusive time
        assert "aten::mm" in source.kernels or "aten::addmm" in source.kernels
        assert all(0 <= (k.self_ns or 0) <= k.total_ns for k in source.kernels.values())
        assert source.peak_memory_bytes.get("CPU", 0) > 0  # profile_memory=True


def test_escalate_says_why_a_trace_folder_does_not_apply(capsys):
    """escalate re-runs a model with counters: a folder of traces has no model to re-run."""
    assert main(["escalate", str(FIXTURES / "tracelens_h100_bert"), "--dry-run"]) == 2
    assert "needs a run directory" in capsys.readouterr().err


def test_timeline_rows_carry_the_trace_rank(tmp_path):
    out = tmp_path / "r.json"
    assert main(["report", str(FIXTURES / "hta_two_ranks"), "--json", str(out), "-q"]) == 0
    rows = json.loads(out.read_text())["runs"][0]["timeline"]
    assert sorted(r["rank"] for r in rows) == [0, 1]


@pytest.mark.parametrize("separator", [",\n  ", " , ", ","])
def test_blocks_split_anywhere_give_the_same_result(tmp_path, monkeypatch, separator):
    """Tiny blocks, kernel names holding `}, {` (a tentative block boundary inside a string), other writers'
    spacing: the reader must still see every event once."""
    from madengine_rocprof.reports import kineto_reader

    monkeypatch.setattr(kineto_reader, "CHUNK", 97)
    events = [
        {"ph": "X", "cat": "kernel", "name": f"void k<{{lambda()#{i % 3}}}, {{x}}>(int)" + "}, {" * (i % 2),
         "pid": 0, "tid": 7, "ts": 1000 + 10 * i, "dur": 1 + i % 5, "args": {"device": i % 2, "stream": 7}}
        for i in range(300)
    ] + [{"ph": "s", "id": 1, "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 1, "ts": 5}]
    body = separator.join(json.dumps(e) for e in events)
    text = '{"schemaVersion": 1, "traceEvents": [' + body + '], "deviceProperties": [{"id": 0}], "x": [[1], [2]]}'
    write(tmp_path / "run" / "t.json", None, text=text)
    source = load_runs([tmp_path / "run"])[0].timing[0]
    trace = json.loads(text, parse_float=Decimal)
    assert {n: (k.calls, k.total_ns) for n, k in source.kernels.items()} == kernel_table(trace)
    assert {d.device: d.busy_ns for d in source.devices} == busy_per_device(trace, "kernel")


@pytest.mark.parametrize("folder", ["tracelens_h100_bert", "tracelens_mi300_bert", "tracelens_h100_falconsai",
                                    "tracelens_mi300_falconsai", "tracelens_mi210_gpu_only"])
def test_hta_definitions_equal_htas_temporal_breakdown(folder):
    """Where HTA analyses every event (at most one ProfilerStep; only kernels, memcpy and memset on the GPU), the
    report's HTA-definition figures equal HTA 0.5.0's get_temporal_breakdown: span, idle and compute time.
    (With several ProfilerSteps HTA keeps only the kernels launched in complete iterations, e.g. ours_h200_tt_*.)"""
    hta = HTA["folders"][folder]
    (name, files), = hta["files"].items()
    assert {c.lower() for c in files["gpu_events_by_category"]} <= set(GPU_EVENTS)
    (row,) = hta["temporal_breakdown"]
    (device,) = run_of(folder).timing[0].devices
    # HTA's microseconds are floats relative to the trace's first event: exact to well under a nanosecond here
    assert abs(device.span_ns - row["kernel_time(us)"] * 1000) < 1
    assert abs(device.span_ns - device.busy_ns - row["idle_time(us)"] * 1000) < 1
    assert abs(device.hta_compute_busy_ns - row["compute_time(us)"] * 1000) < 1
