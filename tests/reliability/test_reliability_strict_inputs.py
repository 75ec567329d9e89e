"""Issue 25, "Wrong numbers, silently" and "Crashes and hangs": every case measured from outside, as a regression test.

Each of these failed on main before the input layer (madengine_rocprof/inputs.py): wrong numbers with exit 0, a
traceback, a hang, or exit 1 for a crash. Now: exit 2 naming the file and place, or exact numbers."""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from madengine_rocprof import inputs

from .contract_helpers import (
    BUG_MARK,
    KT_HEADER,
    STATS_HEADER,
    assert_contract,
    cli,
    cli_subprocess,
    expected_kernels,
    kernel_trace_text,
    kt_row,
    report_json,
    report_kernels,
    time_limit,
    write_kernel_trace,
    write_rocpd,
)

ROWS = [kt_row("kA", 1_000, 2_000, n=1), kt_row("kB<int, float>(x)", 3_000, 7_000, n=2),
        kt_row("kC", 8_000, 9_500, n=3)]
NAME_COLUMN = KT_HEADER.index("Kernel_Name")


def _three_readers(tmp_path: Path, run: Path) -> list[tuple[int, str]]:
    """(exit code, stderr) of report, report --perfetto and compare on the same run."""
    other = tmp_path / "other"
    write_kernel_trace(other, ROWS)
    results = []
    commands: list[list[str | Path]] = [["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp_path / "pf"],
                                        ["compare", other, run, "-q"]]
    for argv in commands:
        code, _, err = cli(*argv)
        assert_contract(code, err)
        results.append((code, err))
    return results


# ---------------------------------------------------------------- wrong numbers, silently


def test_unquoted_name_with_a_comma_is_refused_by_all_three_readers(tmp_path):
    """The issue's case: `kB<int,float>(x)` unquoted shifted the columns: kernel `kB<int`, 4,998 ns."""
    text = kernel_trace_text(ROWS).replace('"kB<int, float>(x)"', "kB<int,float>(x)")
    run = tmp_path / "run"
    write_kernel_trace(run, ROWS, text)
    for code, err in _three_readers(tmp_path, run):
        assert code == 2 and "4242_kernel_trace.csv:3" in err and "fields but the header has" in err, err


def _ragged_variants() -> list[tuple[str, str]]:
    """15 truncated / extra-field variants of one valid file (each row: one field short, one extra, an unquoted
    comma in the name; the last line cut inside a field, after a separator, before the end timestamp ...)."""
    text = kernel_trace_text(ROWS)
    lines = text.splitlines()
    out = []
    for i in (1, 2, 3):
        fields = lines[i].split(",")
        out.append((f"row {i} one field short", "\n".join(lines[:i] + [",".join(fields[:-1])] + lines[i + 1:])))
        out.append((f"row {i} one extra field", "\n".join(lines[:i] + [lines[i] + ",7"] + lines[i + 1:])))
        out.append((f"row {i} extra empty field", "\n".join(lines[:i] + [lines[i] + ","] + lines[i + 1:])))
    last = lines[3]
    for cut in (len(last) // 3, last.index("9500"), last.rindex(","), len(last) - 2):
        out.append((f"last row cut at {cut}", "\n".join(lines[:3] + [last[:cut]])))
    out.append(("header one field short", "\n".join([lines[0].rsplit(",", 1)[0]] + lines[1:])))
    out.append(("name split by an unquoted comma", text.replace('"kA"', "kA,x")))
    return out


@pytest.mark.parametrize("label, text", _ragged_variants(), ids=[v[0] for v in _ragged_variants()])
def test_ragged_kernel_traces_are_refused_alike(tmp_path, label, text):
    run = tmp_path / "run"
    write_kernel_trace(run, ROWS, text + "\n")
    results = _three_readers(tmp_path, run)
    codes = {code for code, _ in results}
    assert codes == {2}, (label, results)
    assert all("4242_kernel_trace.csv:" in err for _, err in results)


def test_durations_of_2_62_ns_do_not_wrap(tmp_path):
    """Two dispatches of 2^62 ns each: the sum is exactly 2^63 ns (it was -9,223,372,036,854 ms, then refused)."""
    rows = [kt_row("kA", 0, 2**62, n=1), kt_row("kA", 0, 2**62, n=2)]
    run = tmp_path / "run"
    write_kernel_trace(run, rows)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None, err
    assert report_kernels(report) == {"kA": (2, 2**63)}
    assert report["runs"][0]["summary"]["gpu_time_ns"] == 2**63


def test_one_2_62_duration_is_exact(tmp_path):
    rows = [kt_row("kA", 5, 5 + 2**62, n=1), kt_row("kB", 2**62, 2**62 + 3, n=2)]
    run = tmp_path / "run"
    write_kernel_trace(run, rows)
    code, report, _ = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None
    assert report_kernels(report) == expected_kernels(rows)
    assert report["runs"][0]["summary"]["gpu_time_ns"] == 2**62 + 3


@pytest.mark.parametrize("start, end", [(2**63, 2**63 + 10), (5, 2**63), (5, 2**64 - 1)])
def test_timestamps_at_or_over_2_63_are_exact(tmp_path, start, end):
    """A uint64 timestamp of 2^63 or more was a traceback, then refused: it is valid, and read exactly."""
    run = tmp_path / "run"
    rows = [kt_row("kA", start, end)]
    write_kernel_trace(run, rows)
    for code, err in _three_readers(tmp_path, run):
        assert code in (0, 2) and "4242_kernel_trace.csv" not in err, err  # compare: one run, nothing to judge
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None and report_kernels(report) == expected_kernels(rows), err


def _stats_file(run: Path, value: str, column: str) -> None:
    row = {"Name": "kA", "Calls": "3", "TotalDurationNs": "3000", "AverageNs": "1000", "Percentage": "100",
           "MinNs": "900", "MaxNs": "1100", "StdDev": "1"}
    row[column] = value
    path = run / "node0" / "4242_kernel_stats.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(",".join(STATS_HEADER) + "\n" + ",".join(row[h] for h in STATS_HEADER) + "\n")


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-Infinity", "1e400", "-3"])
@pytest.mark.parametrize("column", ["Calls", "TotalDurationNs", "MinNs", "MaxNs"])
def test_kernel_stats_refuse_nan_infinity_and_negatives(tmp_path, value, column):
    run = tmp_path / "run"
    _stats_file(run, value, column)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 2 and "4242_kernel_stats.csv:2" in err and column in err, err


def _counter_file(run: Path, value: str) -> None:
    path = run / "node0" / "4242_counter_collection.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "Correlation_Id,Dispatch_Id,Agent_Id,Kernel_Name,Counter_Name,Counter_Value,Start_Timestamp,End_Timestamp"
    path.write_text(f"{head}\n1,1,4,kA,SQ_WAVES,12,100,200\n2,2,4,kA,SQ_WAVES,{value},300,400\n")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "1e31"])
def test_counter_collection_refuses_nan_and_infinity(tmp_path, value):
    run = tmp_path / "run"
    _counter_file(run, value)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 2 and "4242_counter_collection.csv:3" in err and "Counter_Value" in err, err


@pytest.mark.parametrize("top, what", [
    ([("kA", 3, float("nan"))], "total_duration"),
    ([("kA", 3, float("inf"))], "total_duration"),
    ([("kA", -3, 10.0)], "total_calls"),
    ([("kA", 3, -10.0)], "total_duration"),
    ([("kA", None, 10.0)], "total_calls"),
    ([("kA", "three", 10.0)], "total_calls"),
    ([(None, 3, 10.0)], "name"),
    ([("kA", 3, "ten")], "total_duration"),
])
def test_rocpd_top_kernels_refuse_nan_negative_null_and_text(tmp_path, top, what):
    run = tmp_path / "run"
    write_rocpd(run / "node0" / "4242_results.db", top=top)
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 2 and "4242_results.db" in err and what in err, err


def test_a_report_never_writes_nan_tokens(tmp_path):
    """Every JSON the project writes uses allow_nan=False: a NaN is refused on input, and could not be written."""
    run = tmp_path / "run"
    _counter_file(run, "7")
    write_kernel_trace(run, ROWS)
    code, report, _ = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None
    with pytest.raises(ValueError):
        inputs.dumps({"x": math.nan})


# ---------------------------------------------------------------- crashes instead of exit 2


@pytest.mark.parametrize("kernels, what", [
    ([("kA", None, 10, 1, 1)], "NULL time"),
    ([("kA", 5, None, 1, 1)], "NULL time"),
    ([(None, 5, 10, 1, 1)], "no kernel symbol"),
    ([("kA", "five", 10, 1, 1)], ""),
    ([("kA", 5, "ten", 1, 1)], ""),
    ([("kA", 5.5, 10, 1, 1)], ""),
])
def test_rocpd_kernels_with_null_or_text_values_are_exit_2(tmp_path, kernels, what):
    run = tmp_path / "run"
    write_rocpd(run / "node0" / "4242_results.db", kernels=kernels)
    for argv in (["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp_path / "pf"]):
        code, _, err = cli(*argv)
        assert_contract(code, err)
        assert code == 2 and "4242_results.db" in err and what in err, err


@pytest.mark.parametrize("value", [None, "many", float("nan")])
def test_rocpd_counters_with_null_text_or_nan_are_exit_2(tmp_path, value):
    run = tmp_path / "run"
    write_rocpd(run / "node0" / "4242_results.db", kernels=[("kA", 5, 10, 1, 1)],
                counters=[("kA", "SQ_WAVES", value, "g", 1, 5, 10)])
    code, _, err = cli("report", run, "-q")
    assert_contract(code, err)
    assert code == 2 and "counters_collection row 1" in err, err


def _results_json(dispatch: object, symbols: object = None) -> dict:
    return {"rocprofiler-sdk-tool": [{
        "kernel_symbols": [{"kernel_id": 7, "formatted_kernel_name": "kA"}] if symbols is None else symbols,
        "buffer_records": {"kernel_dispatch": [dispatch]}}]}


GOOD_DISPATCH = {"dispatch_info": {"kernel_id": 7, "agent_id": {"handle": 4}, "queue_id": {"handle": 1}},
                 "start_timestamp": 100, "end_timestamp": 250}


@pytest.mark.parametrize("doc, where", [
    (_results_json(GOOD_DISPATCH | {"start_timestamp": "100"}), "start_timestamp"),
    (_results_json(GOOD_DISPATCH | {"start_timestamp": None}), "start_timestamp"),
    (_results_json(GOOD_DISPATCH | {"end_timestamp": 1.5}), "end_timestamp"),
    (_results_json(GOOD_DISPATCH | {"end_timestamp": 2**64}), "end_timestamp"),
    (_results_json(GOOD_DISPATCH | {"dispatch_info": [7]}), "dispatch_info"),
    (_results_json(GOOD_DISPATCH | {"dispatch_info": {"kernel_id": {"id": 7}}}), "kernel_id"),
    (_results_json(GOOD_DISPATCH, symbols=[{"kernel_id": [7]}]), "kernel_symbols[0].kernel_id"),
    (_results_json(GOOD_DISPATCH, symbols=[{"kernel_id": 7, "formatted_kernel_name": 12}]), "kernel_symbols[0]"),
    (_results_json(GOOD_DISPATCH, symbols="kA"), "kernel_symbols"),
    ({"rocprofiler-sdk-tool": [{"kernel_symbols": [], "buffer_records": []}]}, "buffer_records"),
    ({"rocprofiler-sdk-tool": [{"kernel_symbols": [], "buffer_records": {"kernel_dispatch": 3}}]}, "kernel_dispatch"),
    (_results_json("dispatch"), "kernel_dispatch[0]"),
])
def test_results_json_with_odd_types_is_exit_2(tmp_path, doc, where):
    run = tmp_path / "run"
    path = run / "node0" / "4242_results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    for argv in (["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp_path / "pf"]):
        code, _, err = cli(*argv)
        assert_contract(code, err)
        assert code == 2 and "4242_results.json" in err and where in err, err


def test_results_json_valid_numbers_are_exact(tmp_path):
    run = tmp_path / "run"
    path = run / "node0" / "4242_results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_results_json(GOOD_DISPATCH)))
    code, report, _ = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None and report_kernels(report) == {"kA": (1, 150)}


@pytest.mark.parametrize("text", ['{"rocprofiler-sdk-tool": [], "x": NaN}', '{"rocprofiler-sdk-tool": [Infinity]}',
                                  '{"rocprofiler-sdk-tool": [], "rocprofiler-sdk-tool": {}}'])
def test_results_json_is_strict_json(tmp_path, text):
    run = tmp_path / "run"
    path = run / "node0" / "4242_results.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    code, _, err = cli("report", run, "-q")
    assert_contract(code, err)
    assert code == 2 and "4242_results.json" in err, err


def _first_pass(root: Path, run_json: object) -> Path:
    run = root / "out" / "m__rocprofv3_lightweight"
    write_kernel_trace(run / "profiler", ROWS)
    (run / "run.json").write_text(run_json if isinstance(run_json, str) else json.dumps(run_json))
    return run


RUN_JSON = {"schema_version": 1, "model": "m", "status": "SUCCESS", "card": {"name": "m", "args": ""}, "args": "",
            "runner": "local", "context": {"gpu_vendor": "AMD"}, "chain": {"tools": ["rocprofv3_lightweight"]}}


@pytest.mark.parametrize("run_json, what", [
    ("{not json", "invalid JSON"),
    ([RUN_JSON], "expected a JSON object"),
    (RUN_JSON | {"context": "AMD"}, "context"),
    (RUN_JSON | {"model": 7}, "model"),
    (RUN_JSON | {"card": ["m"]}, "card"),
    (RUN_JSON | {"args": ["--x"]}, "args"),
])
def test_escalate_on_a_garbled_run_json_is_exit_2(tmp_path, monkeypatch, run_json, what):
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "home"))
    run = _first_pass(tmp_path, run_json)
    code, _, err = cli("escalate", run, "--dry-run")
    assert_contract(code, err)
    assert code == 2 and "run.json" in err and what in err, err


PLAN = {"first_pass": "x", "model": "m", "tag": "m", "context": {}, "runner": "local", "output_dir": "x",
        "targets": [{"name": "kA", "category": "GEMM", "role": "GEMM", "calls": 1, "total_ns": 5.0, "share": 1.0,
                     "profile": "compute_bound", "reason": ""}],
        "passes": [{"profile": "compute_bound", "tool": "t", "kernels": ["kA"], "kernel_include_regex": "kA",
                    "env": {}, "run_dir": None, "exit_code": 0}]}


@pytest.mark.parametrize("plan, where", [
    ("[1, 2", None),
    ([PLAN], None),
    (PLAN | {"targets": [{"name": "kA"}]}, "targets[0]"),
    (PLAN | {"targets": [PLAN["targets"][0] | {"calls": "1"}]}, "targets[0].calls"),  # type: ignore[index]
    (PLAN | {"passes": {"profile": "x"}}, "passes"),
    (PLAN | {"passes": [{"tool": "t"}]}, "passes[0]"),
    (PLAN | {"passes": [PLAN["passes"][0] | {"run_dir": 5}]}, "passes[0].run_dir"),  # type: ignore[index]
])
def test_escalate_join_on_a_garbled_plan_is_exit_2(tmp_path, monkeypatch, plan, where):
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "home"))
    run = _first_pass(tmp_path, RUN_JSON)
    folder = run.parent / f"{run.name}.escalate"
    folder.mkdir()
    (folder / "escalation_plan.json").write_text(plan if isinstance(plan, str) else json.dumps(plan))
    code, _, err = cli("escalate", run, "--join-only")
    assert_contract(code, err)
    assert code == 2 and "escalation_plan.json" in err and (where is None or where in err), err


# ---------------------------------------------------------------- special files: FIFOs, /dev/zero


def _valid_run(root: Path) -> Path:
    run = root / "run"
    write_kernel_trace(run, ROWS)
    return run


# Every file argument of the list; `{f}` is the special file, `{run}` a valid run, `{ok}` a valid models.json
SPECIAL_FILE_ARGS = {
    "report RUN (discovered kernel trace)": ["report", "{special_run}", "-q"],
    "report RUN (discovered run.json)": ["report", "{special_runjson}", "-q"],
    "compare": ["compare", "{run}", "{special_run}", "-q"],
    "validate": ["validate", "{f}"],
    "report --kernel-rules": ["report", "{run}", "-q", "--kernel-rules", "{f}"],
    "kernels register": ["kernels", "register", "{f}"],
    "kernels check": ["kernels", "check", "{f}"],
    "tools register": ["tools", "register", "{f}"],
    "run --additional-context-file": ["run", "--tags", "x", "--models", "{ok}", "--additional-context-file", "{f}"],
    "run --models": ["run", "--tags", "x", "--models", "{f}"],
}


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("command", sorted(SPECIAL_FILE_ARGS))
def test_special_files_are_refused_without_hanging(tmp_path, command, special):
    """A FIFO or /dev/zero as any file argument (or a discovered file) hung or exhausted memory."""
    f = tmp_path / "special.json"
    if special == "fifo":
        os.mkfifo(f)
    else:
        f = Path("/dev/zero")
    run = _valid_run(tmp_path)
    special_run = tmp_path / "special_run"
    (special_run / "node0").mkdir(parents=True)
    special_runjson = tmp_path / "special_runjson"
    write_kernel_trace(special_runjson, ROWS)
    if special == "fifo":
        os.mkfifo(special_run / "node0" / "4242_kernel_trace.csv")
        os.mkfifo(special_runjson / "run.json")
    else:
        os.symlink("/dev/zero", special_run / "node0" / "4242_kernel_trace.csv")
        os.symlink("/dev/zero", special_runjson / "run.json")
    ok = tmp_path / "models.json"
    ok.write_text(json.dumps([{"name": "x", "dockerfile": "docker/x", "scripts": "scripts/x", "tags": ["x"]}]))
    names = {"f": f, "run": run, "special_run": special_run, "special_runjson": special_runjson, "ok": ok}
    argv = [a.format(**names) for a in SPECIAL_FILE_ARGS[command]]
    env_home = tmp_path / "home"
    os.environ["MADENGINE_ROCPROF_HOME"] = str(env_home)
    try:
        code, _, err = cli_subprocess(*argv, timeout=60)
    finally:
        del os.environ["MADENGINE_ROCPROF_HOME"]
    assert code == 2, (command, code, err[-1500:])
    assert "not a regular file" in err and "Traceback" not in err and BUG_MARK not in err, err[-1500:]


# ---------------------------------------------------------------- regexes, and the gate's contract


def test_a_backtracking_rule_cannot_hang_a_report(tmp_path):
    """`(a+)+$` made every report hang (Python re backtracks); user rules run on RE2, in linear time."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"match": "(a+)+$", "category": "GEMM"}]}))
    code, out, err = cli("kernels", "check", rules)
    assert code == 0 and "1 rule(s), valid" in out
    name = "a" * 40 + "!"
    run = tmp_path / "run"
    write_kernel_trace(run, [kt_row(name, 10, 20), kt_row("a" * 30, 30, 45, n=2)])
    started = time.monotonic()
    with time_limit(60):
        code, report, err = report_json(run, tmp_path / "r.json", "--kernel-rules", str(rules))
    assert code == 0 and report is not None and time.monotonic() - started < 30
    categories = {k["name"]: k["category"] for k in report["runs"][0]["kernels"]}
    assert categories == {name: "unknown", "a" * 30: "GEMM"}  # `$` right after a's: only the second matches


@pytest.mark.parametrize("pattern, why", [("(a)\\1", "escape"), ("(?<=x)a", "perl operator"), ("(x", "missing )")])
def test_patterns_re2_cannot_run_are_refused_with_the_reason(tmp_path, pattern, why):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"match": pattern, "category": "GEMM"}]}))
    for argv in (["kernels", "check", rules], ["kernels", "register", rules]):
        code, _, err = cli(*argv)
        assert_contract(code, err)
        assert code == 2 and "rules[0].match" in err and why in err and "RE2" in err, err


def test_a_crash_inside_compare_gate_is_exit_2_not_the_regression_code(tmp_path, monkeypatch):
    """CI could not tell a crash (exit 1) from a regression (exit 1)."""
    from madengine_rocprof.insights import compare as compare_module

    def broken(*args, **kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(compare_module, "compare_sides", broken)
    base, new = _valid_run(tmp_path / "a"), _valid_run(tmp_path / "b")
    code, _, err = cli("compare", base, new, "--gate", "-q")
    assert code == 2 and BUG_MARK in err and "simulated bug" in err and "Traceback" not in err


@pytest.mark.parametrize("token", ["Infinity", "NaN", "-Infinity", "1e999"])
def test_infinity_in_new_step_times_does_not_pass_the_gate(tmp_path, token):
    base, new = tmp_path / "base", tmp_path / "new"
    for side, steps in ((base, "[10.0, 10.1, 9.9]"), (new, f"[10.0, {token}, 9.9]")):
        side.mkdir()
        (side / "workload_result.json").write_text(f'{{"schema_version": 1, "step_times_ms": {steps}}}')
    code, _, err = cli("compare", base, new, "--gate", "-q")
    assert_contract(code, err)
    assert code == 2 and "workload_result.json" in err, err


# ---------------------------------------------------------------- found by the fuzzer (MADENGINE_ROCPROF_FUZZ=long)


@pytest.mark.parametrize("before, after", [
    ('"kB<int, float>(x)"', '\x00"kB<int,float>(x)"'),  # a byte before the opening quote: not a quoted field
    ('"kB<int, float>(x)",2', 'float>(x)","kB<int,2'),  # quotes inside fields, swapped by a corrupt writer
    ('"kA"', 'k"A"'),
    ('"kC"', '"kC"x'),
])
def test_quotes_that_do_not_delimit_a_whole_field_are_read_by_the_csv_rules(tmp_path, before, after):
    """polars and the csv module disagree on such quotes; the file goes to the csv module, whose reading is exact
    and is the one every reader shares (refused here: the field count changes)."""
    text = kernel_trace_text(ROWS).replace(before, after, 1)
    assert text != kernel_trace_text(ROWS)
    run = tmp_path / "run"
    write_kernel_trace(run, ROWS, text)
    results = _three_readers(tmp_path, run)
    assert len({code for code, _ in results}) == 1, results


def test_a_quote_inside_a_field_that_keeps_the_count_is_read_exactly(tmp_path):
    text = kernel_trace_text(ROWS).replace('"kA"', 'k"A', 1)  # the csv module keeps a mid-field quote as a character
    run = tmp_path / "run"
    write_kernel_trace(run, ROWS, text)
    code, report, err = report_json(run, tmp_path / "r.json", "--top", "100")
    assert code == 0 and report is not None, err
    assert report_kernels(report) == {'k"A': (1, 1000), "kB<int, float>(x)": (1, 4000), "kC": (1, 1500)}


def test_rocpd_numbers_among_kernel_names_are_refused_by_report_and_perfetto(tmp_path):
    run = tmp_path / "run"
    write_rocpd(run / "node0" / "4242_results.db", kernels=[("kA", 5, 10, 1, 1), (0, 20, 30, 1, 1)])
    for argv in (["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp_path / "pf"]):
        code, _, err = cli(*argv)
        assert_contract(code, err)
        assert code == 2 and "not text" in err, err


def test_results_json_symbol_without_a_name_is_counted_as_question_mark(tmp_path):
    run = tmp_path / "run"
    path = run / "node0" / "4242_results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_results_json(GOOD_DISPATCH, symbols=[{"kernel_id": 7}])))
    code, report, _ = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None and report_kernels(report) == {"?": (1, 150)}


def test_a_header_cut_to_the_end_alias_is_read_as_the_end_column(tmp_path):
    """Found by the fuzzer: `End` (cut from End_Timestamp) is the accepted alias `end`; an empty table is exit 0
    for report, and compare says there is nothing to compare (not a file error)."""
    run = tmp_path / "run"
    write_kernel_trace(run, [], ",".join(f'"{h}"' for h in KT_HEADER[:10]) + ',"End')
    code, report, _ = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None and report["runs"][0]["summary"]["dispatches"] == 0


def test_an_empty_device_field_in_a_legacy_trace_is_read_like_the_csv_module_reads_it(tmp_path):
    """Found by the fuzzer: an empty gpu-id became a null device in polars and crashed the busy-time split."""
    run = tmp_path / "run"
    path = run / "node0" / "results.csv"
    path.parent.mkdir(parents=True)
    path.write_text("Index,KernelName,gpu-id,queue-id,BeginNs,EndNs\n0,kA,,0,100,300\n1,kB,1,0,400,450\n")
    code, report, err = report_json(run, tmp_path / "r.json")
    assert code == 0 and report is not None, err
    assert report_kernels(report) == {"kA": (1, 200), "kB": (1, 50)}


def test_a_rocpd_dispatch_without_an_agent_is_exit_2(tmp_path):
    run = tmp_path / "run"
    write_rocpd(run / "node0" / "4242_results.db", kernels=[("kA", 5, 10, None, 1), ("kB", 20, 30, 1, 1)])
    code, _, err = cli("report", run, "-q")
    assert_contract(code, err)
    assert code == 2 and "no agent" in err, err


@pytest.mark.parametrize("end, what", [
    ("1e550151853075237", "1e550151853075237 is outside [0, 18446744073709551615] (over 2^64-1 ns"),
    ("-1e550151853075237", "-1e550151853075237 is outside [0, 18446744073709551615]"),
    ("1e99999999999999999999", "'1e99999999999999999999' has an exponent out of range"),
    ("9" * 5000, "is outside [0, 18446744073709551615] (over 2^64-1 ns"),
], ids=["exponent 5e17", "negative, exponent 5e17", "exponent 1e20", "5000 digits"])
def test_timestamps_no_integer_can_hold_are_exit_2(tmp_path, end, what):
    """Found by tests/reports/test_reports_csv_native.py's mutations: an exponent of 5e17 (int() of it raised
    MemoryError), one past decimal's range (InvalidOperation) and 5,000 digits (int()'s 4,300-digit limit) were
    internal errors; the csv-module path now refuses them, naming the line."""
    text = kernel_trace_text(ROWS).replace("7000", end, 1)
    run = tmp_path / "run"
    write_kernel_trace(run, ROWS, text)
    for code, err in _three_readers(tmp_path, run):
        assert code == 2 and BUG_MARK not in err and "4242_kernel_trace.csv:3:" in err and what in err, err


@pytest.mark.parametrize("end, duration", [("4e3", 1000), ("0.7e4", 4000), ("1e-550151853075237", None),
                                           ("0" * 5000 + "7000", 4000)],
                         ids=["4e3", "0.7e4", "exponent -5e17", "5000 leading zeros"])
def test_decimal_timestamps_are_read_exactly(tmp_path, end, duration):
    """The same rows in decimal notation: truncated toward zero, exactly (a tiny exponent reads as 0: end before
    start, refused)."""
    text = kernel_trace_text(ROWS).replace("7000", end, 1)
    run = tmp_path / "run"
    write_kernel_trace(run, ROWS, text)
    code, report, err = report_json(run, tmp_path / "r.json")
    if duration is None:
        assert code == 2 and "End_Timestamp 0 is before Start_Timestamp 3000" in err, err
    else:
        assert code == 0 and report is not None, err
        assert report_kernels(report)["kB<int, float>(x)"] == (1, duration)
