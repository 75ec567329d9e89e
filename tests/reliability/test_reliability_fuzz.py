"""Issue 25, item 3: property-based fuzzing of every input kind against the exit-code contract.

Each test starts from a valid file of one kind, lets hypothesis mutate it (truncation, duplicated and deleted lines,
inserted bytes: NUL, quotes, separators, newlines, unicode; swapped fields; odd values: NaN, Infinity, huge and
negative integers, text; for JSON also swapped types, duplicated keys, nesting) and runs the command that reads it.
The contract: exit 0, 1 or 2, never a traceback, never the internal-error handler (cli.BUG_MARK); and where an
independent computation exists (plain Python integers over the file as written), exit 0 gives exactly its numbers
and a file the independent parser accepts is not refused.

Time: the `madengine-fuzz-ci` profile (the default) is derandomized (a fixed seed: the same cases every run) with a
per-example deadline, sized so the whole module takes well under 3 minutes on 2 cores. Set
MADENGINE_ROCPROF_FUZZ=long for a longer, randomized local run (`madengine-fuzz-long`); cases it finds go into
test_reliability_strict_inputs.py as explicit regression tests."""
from __future__ import annotations

import copy
import csv
import decimal
import io
import json
import os
import re
import sqlite3
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.reports import categories

from .contract_helpers import (
    STATS_HEADER,
    assert_contract,
    cli,
    kernel_trace_text,
    kt_row,
    strict_json,
    write_rocpd,
)

settings.register_profile(
    "madengine-fuzz-ci", max_examples=120, derandomize=True, deadline=timedelta(seconds=10), database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], print_blob=True)
settings.register_profile(
    "madengine-fuzz-long", max_examples=2000, derandomize=False, deadline=timedelta(seconds=20), database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], print_blob=True)
PROFILE = "madengine-fuzz-long" if os.environ.get("MADENGINE_ROCPROF_FUZZ") == "long" else "madengine-fuzz-ci"
FUZZ = settings.get_profile(PROFILE)
CASES = FUZZ.max_examples  # per test; the module docstring and docs/architecture.md give the total

# ---------------------------------------------------------------- mutations

ODD_VALUES = ["", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1", "0", "+5", " 7", "7 ", str(2**62),
              str(2**63 - 1), str(2**63), str(2**64), "1.5", "1e3", "1000.0", "abc", "1_000", "\u0663", "\u0000",
              "\u00e9", '"', ",", "\n", "\r\n", "0x10", "-0", "9" * 30, "1e-400", "\ufeff"]
INSERTS = st.sampled_from(["\x00", '"', ",", "\n", "\r", "\ufeff", "\u00e9", "\u202e", "\\", "\t", ",,", '""', "{",
                           "]", "\ud7ff", "NaN", "-", "9" * 25])


@st.composite
def mutated_text(draw: st.DrawFn, text: str, numeric: re.Pattern = re.compile(r"-?\d+(?:\.\d+)?")) -> str:
    """`text` with 0-3 mutations (0: the valid file itself also runs)."""
    for _ in range(draw(st.integers(0, 3))):
        lines = text.split("\n")
        kind = draw(st.sampled_from(["truncate", "dup_line", "drop_line", "insert", "value", "swap_fields",
                                     "blank_line", "odd_text"]))
        if kind == "truncate":
            text = text[: draw(st.integers(0, len(text)))]
        elif kind == "dup_line" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif kind == "drop_line" and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
            text = "\n".join(lines)
        elif kind == "insert":
            i = draw(st.integers(0, len(text)))
            text = text[:i] + draw(INSERTS) + text[i:]
        elif kind == "value":
            spots = list(numeric.finditer(text))
            if spots:
                spot = spots[draw(st.integers(0, len(spots) - 1))]
                text = text[: spot.start()] + draw(st.sampled_from(ODD_VALUES)) + text[spot.end():]
        elif kind == "swap_fields" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            fields = lines[i].split(",")
            if len(fields) > 1:
                a, b = draw(st.integers(0, len(fields) - 1)), draw(st.integers(0, len(fields) - 1))
                fields[a], fields[b] = fields[b], fields[a]
                lines[i] = ",".join(fields)
                text = "\n".join(lines)
        elif kind == "blank_line":
            lines.insert(draw(st.integers(0, len(lines))), "")
            text = "\n".join(lines)
        else:
            i = draw(st.integers(0, len(text)))
            text = text[:i] + draw(st.text(max_size=8)) + text[i:]
    return text


ODD_JSON = st.sampled_from([None, True, False, 0, -1, 1.5, 2**63, 2**64, 10**40, "", "x", "\x00", [], {}, [1, "a"],
                            {"a": None}, "NaN", 1e308])


@st.composite
def mutated_json(draw: st.DrawFn, data: Any) -> str:
    """Structure-level mutations (a value of another type; a key dropped, added or duplicated with another value;
    deeper nesting), then text-level ones (tokens NaN / Infinity, truncation...)."""
    data = json.loads(json.dumps(data))
    for _ in range(draw(st.integers(0, 3))):
        paths = list(_paths(data))
        path = paths[draw(st.integers(0, len(paths) - 1))]
        kind = draw(st.sampled_from(["retype", "drop", "add", "nest", "wrap"]))
        parent, key = _parent(data, path)
        if parent is None:
            if kind == "wrap":
                data = [data]
            continue
        if kind == "retype":
            parent[key] = copy.deepcopy(draw(ODD_JSON))
        elif kind == "drop" and isinstance(parent, dict):
            del parent[key]
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "_comment", str(key) + "x"]))] = copy.deepcopy(draw(ODD_JSON))
        elif kind == "nest":
            parent[key] = {"k": parent[key]} if draw(st.booleans()) else [parent[key]]
        elif kind == "wrap":
            parent[key] = [parent[key], copy.deepcopy(parent[key])]
    text = json.dumps(data, indent=1)
    choice = draw(st.integers(0, 5))
    if choice == 1:  # a duplicated key: the same key again with another value
        spots = [m for m in re.finditer(r'\n(\s*)("[^"\n]+"): ', text)]
        if spots:
            spot = spots[draw(st.integers(0, len(spots) - 1))]
            again = json.dumps(draw(ODD_JSON))
            text = text[: spot.start()] + f"\n{spot.group(1)}{spot.group(2)}: {again}," + text[spot.start():]
    elif choice == 2:  # non-standard tokens where a number stood
        text = re.sub(r"(?<=: )-?\d+(\.\d+)?", draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999",
                                                                     "9" * 50])), text, count=1)
    elif choice == 3:
        text = draw(mutated_text(text))
    return text


def _paths(value: Any, path: tuple = ()) -> Any:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _parent(data: Any, path: tuple) -> tuple[Any, Any]:
    if not path:
        return None, None
    node = data
    for part in path[:-1]:
        node = node[part]
    return node, path[-1]


# ---------------------------------------------------------------- independent readers (the oracle)

INT = re.compile(r"[ \t]*[+-]?[0-9]+[ \t]*")
NUM = re.compile(r"[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*")


def _int_or_none(text: str) -> int | None:
    if INT.fullmatch(text):
        return int(text)
    if NUM.fullmatch(text) and len(text) < 100:
        return int(decimal.Decimal(text.strip()))
    return None


def oracle_kernel_trace(text: str) -> dict[str, tuple[int, int]] | None:
    """Per kernel (calls, total ns) by the rules of docs/architecture.md ("Input contract"), in Python integers, or
    None where the file must be refused. Independent of the project's readers (no polars, no shared helpers)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or not rows[0]:
        return None
    header = [h.strip().lstrip("\ufeff").lower().replace("_", "").replace(" ", "") for h in rows[0]]
    aliases = (("kernelname",), ("starttimestamp", "beginns", "start"), ("endtimestamp", "endns", "end"))
    found = [next((header.index(a) for a in names if a in header), -1) for names in aliases]
    if -1 in found:
        return None
    i_name, i_start, i_end = found
    out: dict[str, tuple[int, int]] = {}
    for row in rows[1:]:
        if not row:
            continue
        if len(row) != len(header):
            return None
        start, end = _int_or_none(row[i_start]), _int_or_none(row[i_end])
        if start is None or end is None or not 0 <= start <= end <= 2**64 - 1:  # uint64 timestamps
            return None
        calls, ns = out.get(row[i_name], (0, 0))
        out[row[i_name]] = (calls + 1, ns + end - start)
    return out


def _report(run: Path, *extra: str) -> tuple[int, dict | None, str]:
    out = run.parent / "report.json"
    code, _, err = cli("report", run, "--json", out, "-q", "--top", "100000", *extra)
    assert_contract(code, err)
    return code, (strict_json(out.read_text()) if code == 0 else None), err


def _kernels(report: dict) -> dict[str, tuple[int, int]]:
    return {k["name"]: (k["calls"], k["total_ns"]) for k in report["runs"][0]["kernels"]}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


class _Home:
    """A throwaway MADENGINE_ROCPROF_HOME and no registered kernel rules, per example."""

    def __enter__(self) -> Path:
        self._dir = tempfile.TemporaryDirectory(prefix="fuzz_")
        self._old = {k: os.environ.get(k) for k in ("MADENGINE_ROCPROF_HOME", categories.RULES_ENV)}
        os.environ["MADENGINE_ROCPROF_HOME"] = str(Path(self._dir.name) / "home")
        os.environ.pop(categories.RULES_ENV, None)
        categories.set_rules(())
        return Path(self._dir.name)

    def __exit__(self, *exc: object) -> None:
        for key, value in self._old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        categories.set_rules(())
        self._dir.cleanup()


# ---------------------------------------------------------------- valid seeds

NAMES = ["Cijk_Alik_Bljk_SB_MT128x128x16", "void at::native::vectorized_elementwise_kernel<4, float>(int, float*)",
         "kB<int,float>(x)", "_attn_fwd_kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
TRACE_ROWS = [kt_row(NAMES[i % len(NAMES)], 1000 + 3000 * i, 1000 + 3000 * i + 700 + 113 * i, agent=4 + i % 2, n=i + 1)
              for i in range(8)]
TRACE_TEXT = kernel_trace_text(TRACE_ROWS)


# ---------------------------------------------------------------- the properties


@FUZZ
@given(text=mutated_text(TRACE_TEXT))
def test_fuzz_kernel_trace_report_is_exact_or_refused(text):
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node0" / "4242_kernel_trace.csv", text)
        code, report, err = _report(run)
        expected = oracle_kernel_trace(text)
        if code == 0:
            assert report is not None and expected is not None, err
            assert _kernels(report) == expected
            assert report["runs"][0]["summary"]["gpu_time_ns"] == sum(ns for _, ns in expected.values())
        else:
            assert code == 2 and "4242_kernel_trace.csv" in err, err
            assert expected is None, (err, expected)  # refused, so the oracle must refuse it too


@FUZZ
@given(text=mutated_text(TRACE_TEXT))
def test_fuzz_kernel_trace_three_readers_agree(text):
    """report, report --perfetto and compare read kernel traces through one parser: the file is refused by all three
    or by none (compare may still say there is nothing to compare), and the Perfetto trace has every dispatch."""
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node0" / "4242_kernel_trace.csv", text)
        refused, codes = [], []
        commands: list[list[str | Path]] = [["report", run, "-q"], ["report", run, "-q", "--perfetto", tmp / "pf"],
                                            ["compare", run, run, "-q", "--json", tmp / "c.json"]]
        for argv in commands:
            code, _, err = cli(*argv)
            assert_contract(code, err)
            refused.append(code == 2 and "4242_kernel_trace.csv" in err)
            codes.append(code)
        assert len(set(refused)) == 1, (refused, codes)
        expected = oracle_kernel_trace(text)
        assert (expected is None) == refused[0], (expected, codes)
        if codes[1] == 0 and expected:
            events = strict_json((tmp / "pf" / "run.perfetto.json").read_text())["traceEvents"]
            spans = [e for e in events if e.get("ph") == "X"]
            assert len(spans) == sum(calls for calls, _ in expected.values())


LEGACY_TEXT = "Index,KernelName,gpu-id,queue-id,BeginNs,EndNs,DurationNs\n" + "".join(
    f'{i},"{NAMES[i % 3]}",{i % 2},0,{100 + 1000 * i},{300 + 1000 * i + 7 * i},{200 + 7 * i}\n' for i in range(6))


@FUZZ
@given(text=mutated_text(LEGACY_TEXT))
def test_fuzz_legacy_rocprof_results_csv(text):
    """Legacy rocprof results.csv, recognised by its header: exact or refused, like the rocprofv3 trace."""
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node0" / "results.csv", text)
        _write(run / "node1" / "4343_kernel_trace.csv", TRACE_TEXT)  # so the run is never empty
        code, report, err = _report(run)
        legacy = oracle_kernel_trace(text)
        if code == 0 and legacy is not None:
            assert report is not None
            expected = dict(oracle_kernel_trace(TRACE_TEXT) or {})
            for name, (calls, ns) in legacy.items():
                old = expected.get(name, (0, 0))
                expected[name] = (old[0] + calls, old[1] + ns)
            assert _kernels(report) == expected


COPY_TEXT = ('"Kind","Direction","Source_Agent_Id","Destination_Agent_Id","Correlation_Id","Start_Timestamp",'
             '"End_Timestamp"\n' + "".join(
                 f'"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",0,1,{i},{100 * i},{100 * i + 40}\n' for i in range(4)))


@FUZZ
@given(text=mutated_text(COPY_TEXT))
def test_fuzz_memory_copy_trace(text):
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node0" / "4242_memory_copy_trace.csv", text)
        _write(run / "node0" / "4242_kernel_trace.csv", TRACE_TEXT)
        _report(run)


STATS_TEXT = ",".join(STATS_HEADER) + "\n" + "\n".join(
    f'"{n}",{c},{t},{t // c},{p},{t // c - 5},{t // c + 5},1.5' for n, c, t, p in
    [("kA", 3, 3000, 60.0), ("kB<int, float>", 2, 2000, 40.0)]) + "\n"


@FUZZ
@given(text=mutated_text(STATS_TEXT))
def test_fuzz_kernel_stats(text):
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node0" / "4242_kernel_stats.csv", text)
        code, report, err = _report(run)
        if code == 0:
            assert report is not None
            for k in report["runs"][0]["kernels"]:
                assert k["calls"] >= 0 and k["total_ns"] >= 0


COUNTER_TEXT = ("Correlation_Id,Dispatch_Id,Agent_Id,Kernel_Name,Counter_Name,Counter_Value,Start_Timestamp,"
                "End_Timestamp\n" + "\n".join(
                    f'{i},{i},4,"k{i % 2}",{c},{v},{100 * i},{100 * i + 50}'
                    for i in range(1, 4) for c, v in (("SQ_WAVES", 12), ("GRBM_COUNT", 3.5))) + "\n")


@FUZZ
@given(text=mutated_text(COUNTER_TEXT))
def test_fuzz_counter_collection(text):
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node0" / "4242_counter_collection.csv", text)
        _report(run)


RESULTS_JSON = {"rocprofiler-sdk-tool": [{
    "kernel_symbols": [{"kernel_id": 7, "formatted_kernel_name": "kA"}, {"kernel_id": 8, "kernel_name": "kB"}],
    "buffer_records": {"kernel_dispatch": [
        {"dispatch_info": {"kernel_id": 7 + i % 2, "agent_id": {"handle": 4}, "queue_id": {"handle": 1}},
         "start_timestamp": 100 + 1000 * i, "end_timestamp": 400 + 1000 * i + i} for i in range(4)]}}]}


def _oracle_results_json(text: str) -> dict[str, tuple[int, int]] | None:
    try:
        doc = strict_json(text)
        out: dict[str, tuple[int, int]] = {}
        for tool in doc["rocprofiler-sdk-tool"]:
            names = {s["kernel_id"]: s.get("formatted_kernel_name") or s.get("demangled_kernel_name")
                     or s.get("kernel_name") or "?" for s in tool["kernel_symbols"]}
            for rec in tool["buffer_records"]["kernel_dispatch"]:
                start, end = rec["start_timestamp"], rec["end_timestamp"]
                calls, ns = out.get(names[rec["dispatch_info"]["kernel_id"]], (0, 0))
                out[names[rec["dispatch_info"]["kernel_id"]]] = (calls + 1, ns + end - start)
        return out
    except (KeyError, TypeError, ValueError, IndexError):
        return None


@FUZZ
@given(text=mutated_json(RESULTS_JSON))
def test_fuzz_rocprofv3_results_json(text):
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node0" / "4242_results.json", text)
        code, report, err = _report(run)
        if code == 0 and report is not None and report["runs"][0]["kernels"]:
            assert _kernels(report) == _oracle_results_json(text)


SQL_VALUES = st.one_of(st.integers(-5, 10_000), st.sampled_from([None, "text", "", 5.5, 2.0, float("nan"),
                                                                 float("inf"), 2**63 - 1, -(2**63), b"\x00blob"]))


@FUZZ
@given(kernels=st.lists(st.tuples(st.one_of(st.sampled_from(NAMES), SQL_VALUES), SQL_VALUES, SQL_VALUES,
                                  st.one_of(st.integers(0, 3), st.none()), st.integers(0, 3)), max_size=6),
       top=st.booleans())
def test_fuzz_rocpd_values_of_any_type(kernels, top):
    with _Home() as tmp:
        run = tmp / "run"
        db = run / "node0" / "4242_results.db"
        if top:
            write_rocpd(db, top=[k[:3] for k in kernels])
        else:
            write_rocpd(db, kernels=kernels)
        code, report, err = _report(run)
        valid = all(isinstance(n, str) and all(type(v) is int for v in (s, e)) and 0 <= s <= e and a is not None
                    for n, s, e, a, _ in kernels)
        if not top and code == 0:
            expected: dict[str, tuple[int, int]] = {}
            for n, s, e, _, _ in kernels:
                calls, ns = expected.get(n, (0, 0))
                expected[n] = (calls + 1, ns + e - s)
            assert report is not None and _kernels(report) == expected
        if not top and valid and kernels:
            assert code == 0, err
        code2, _, err2 = cli("report", run, "-q", "--perfetto", tmp / "pf")
        assert_contract(code2, err2)


CONTEXT = {"gpu_vendor": "AMD", "guest_os": "UBUNTU", "tools": [{"name": "rocprofv3_lightweight"}],
           "docker_env_vars": {"HIP_VISIBLE_DEVICES": "0"}, "timeout": 600}


@FUZZ
@given(text=mutated_json(CONTEXT))
def test_fuzz_additional_context_validate(text):
    with _Home() as tmp:
        code, _, err = cli("validate", _write(tmp / "ctx.json", text))
        assert_contract(code, err)


TOOL = {"name": "my_trace", "profiler": "rocprofv3", "core_profile": "lightweight", "overhead": "low",
        "description": "a user tool", "env_vars": {"ROCPROF_X": "1"}}


@FUZZ
@given(text=mutated_json(TOOL))
def test_fuzz_tool_definition_register(text):
    with _Home() as tmp:
        code, _, err = cli("tools", "register", _write(tmp / "tool.json", text))
        assert_contract(code, err)


MODELS = [{"name": "tiny_llama_v1", "dockerfile": "docker/tiny", "scripts": "scripts/tiny/run.sh", "n_gpus": "1",
           "tags": ["tiny", "v1"], "args": "--batch-size 8", "timeout": 600, "training_precision": "fp32"}]


@FUZZ
@given(text=mutated_json(MODELS))
def test_fuzz_models_json(text):
    """A tag that matches nothing: the file is read and checked, nothing runs."""
    with _Home() as tmp:
        code, _, err = cli("run", "--tags", "no_such_tag_zz", "--models", _write(tmp / "models.json", text),
                           "--output-dir", tmp / "out", "--runner", "local")
        assert_contract(code, err, allowed=(2,))


RULES = {"rules": [{"match": "my_fused_mlp", "category": "GEMM", "role": "fused MLP"},
                   {"match": "(a+)+$", "category": "elementwise", "library": "mine"}]}


@FUZZ
@given(text=mutated_json(RULES), pattern=st.text(alphabet="a+*?()[]{}|^$\\.b1,dw", max_size=12))
def test_fuzz_kernel_rules(text, pattern):
    with _Home() as tmp:
        rules = _write(tmp / "rules.json", text)
        code, _, err = cli("kernels", "check", rules)
        assert_contract(code, err)
        own = _write(tmp / "own.json", json.dumps({"rules": [{"match": pattern, "category": "GEMM"}]}))
        code, _, err = cli("kernels", "classify", "a" * 60 + "!", "my_fused_mlp_x", "--kernel-rules", own)
        assert_contract(code, err)


COUNTER_FILE = "pmc: SQ_WAVES SQ_INSTS_VALU\npmc: GRBM_COUNT\n"


@FUZZ
@given(text=mutated_text(COUNTER_FILE, re.compile(r"[A-Z_]+")))
def test_fuzz_counter_file_validate(text):
    with _Home() as tmp:
        code, _, err = cli("validate", _write(tmp / "counters.txt", text), "--arch", "gfx942")
        assert_contract(code, err)


RUN_JSON = {"schema_version": 1, "model": "m", "status": "SUCCESS", "card": {"name": "m", "args": ""}, "args": "",
            "runner": "local", "context": {"gpu_vendor": "AMD"}, "chain": {"tools": ["rocprofv3_lightweight"]},
            "performance": {"value": 12.5, "metric": "tokens_per_second"}}
MANIFEST = {"schema_version": 1, "tool": "madengine-rocprof-wrapper", "outcome": "ok", "dispatch_count": 8,
            "profiler": {"name": "rocprofv3", "version": "1.0.0"}, "outputs": []}
WORKLOAD = {"schema_version": 1, "model": "m", "status": "ok", "device": {"type": "cuda", "name": "x"},
            "metrics": {"tokens_per_second": 10.0, "step_time_ms": {"median": 20.0}}, "step_times_ms": [20.0, 21.0]}


@FUZZ
@given(which=st.sampled_from(["run.json", "manifest.json", "workload_result.json"]), data=st.data())
def test_fuzz_run_files_report_compare_escalate(which, data):
    seed = {"run.json": RUN_JSON, "manifest.json": MANIFEST, "workload_result.json": WORKLOAD}[which]
    text = data.draw(mutated_json(seed))
    with _Home() as tmp:
        run = tmp / "out" / "m__rocprofv3_lightweight"
        _write(run / "profiler" / "node0" / "4242_kernel_trace.csv", TRACE_TEXT)
        for name, value in (("run.json", RUN_JSON), ("workload_result.json", WORKLOAD)):
            _write(run / name, json.dumps(value))
        _write(run / ("profiler/manifest.json" if which == "manifest.json" else which), text)
        code, report, err = _report(run)
        if code == 0:
            assert report is not None and _kernels(report) == oracle_kernel_trace(TRACE_TEXT)
        other = tmp / "other"
        _write(other / "node0" / "4242_kernel_trace.csv", TRACE_TEXT)
        _write(other / "workload_result.json", json.dumps(WORKLOAD))
        code, _, err = cli("compare", other, run, "-q", "--gate")
        assert_contract(code, err)
        code, _, err = cli("escalate", run, "--dry-run")
        assert_contract(code, err)


PLAN = {"first_pass": "x", "model": "m", "tag": "m", "context": {}, "runner": "local", "output_dir": "x",
        "targets": [{"name": NAMES[0], "category": "GEMM", "role": "GEMM", "calls": 2, "total_ns": 5.0, "share": 1.0,
                     "profile": "compute_bound", "reason": ""}],
        "passes": [{"profile": "compute_bound", "tool": "t", "kernels": [NAMES[0]], "kernel_include_regex": "Cijk",
                    "env": {}, "run_dir": None, "exit_code": 0}]}


@FUZZ
@given(text=mutated_json(PLAN))
def test_fuzz_escalation_plan_join(text):
    with _Home() as tmp:
        run = tmp / "out" / "m__rocprofv3_lightweight"
        _write(run / "profiler" / "node0" / "4242_kernel_trace.csv", TRACE_TEXT)
        _write(run / "run.json", json.dumps(RUN_JSON))
        _write(run.parent / f"{run.name}.escalate" / "escalation_plan.json", text)
        code, _, err = cli("escalate", run, "--join-only")
        assert_contract(code, err)


@FUZZ
@given(kind=st.sampled_from(["fifo", "dir", "devnull", "dangling", "empty"]),
       name=st.sampled_from(["node0/4242_kernel_trace.csv", "node0/4242_results.json", "node0/4242_results.db",
                             "node0/4242_counter_collection.csv", "run.json", "workload_result.json",
                             "node0/results.csv"]))
def test_fuzz_special_files_in_a_run(kind, name):
    with _Home() as tmp:
        run = tmp / "run"
        _write(run / "node1" / "4343_kernel_trace.csv", TRACE_TEXT)
        path = run / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        elif kind == "devnull":
            os.symlink("/dev/null", path)
        elif kind == "dangling":
            os.symlink(tmp / "nowhere", path)
        else:
            path.write_bytes(b"")
        code, _, err = cli("report", run, "-q")
        assert_contract(code, err)
        code, _, err = cli("compare", run, run, "-q")
        assert_contract(code, err)


def test_fuzz_profile_is_bounded_and_fixed():
    """CI runs the same cases every time (derandomize: a fixed seed) within a deadline per example."""
    profile = settings.get_profile("madengine-fuzz-ci")
    assert profile.derandomize and profile.deadline is not None and profile.max_examples <= 200


def test_sqlite_is_the_oracle_s_engine():
    """The rocpd generator's databases are real SQLite files (sanity of the fuzzer itself)."""
    with tempfile.TemporaryDirectory() as d:
        db = write_rocpd(Path(d) / "x.db", kernels=[("kA", 1, 2, 0, 0)])
        assert sqlite3.connect(db).execute("SELECT count(*) FROM kernels").fetchone() == (1,)
