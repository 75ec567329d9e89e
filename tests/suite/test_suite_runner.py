"""The benchmark suite's runner, rows and generated tables: every area has its cases, a run records its rows with
their provenance, GPU and missing cases are refused before anything runs, and RESULTS.md and the README's table are
what the committed rows render to."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as suite
from benchmarks import cases, environment, render
from benchmarks import rows as rowlib

REPO = Path(__file__).resolve().parents[2]
ISSUE_AREAS = ("workloads", "tracer", "reports", "escalate", "slurm", "gate")  # issue 27's list


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = suite.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_a_case_for_every_area(capsys):
    code, out, _ = run_main(capsys, "list")
    assert code == 0
    for area in ISSUE_AREAS:
        assert f"\n{area}:\n" in f"\n{out}"
        assert any(c.area == area for c in cases.CASES.values())
    for name, case in cases.CASES.items():
        line = next(line for line in out.splitlines() if line.strip().startswith(name + " "))
        assert f"needs {case.needs}" in line
        assert ("[not available" in line) == (case.script_path() is None)
    assert {"workloads.b8s128", "workloads.b32s512", "tracer.product-path", "reports.csv-1m", "reports.csv-10m",
            "reports.rocpd-10m", "reports.kineto", "escalate.ncu-top5", "slurm.local-cluster"} <= set(cases.CASES)


LINES_SCRIPT = '''
import argparse, json, pathlib
p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int); p.add_argument("--out"); p.add_argument("--steps", type=int)
a = p.parse_args()
out = pathlib.Path(a.out); out.mkdir(parents=True)
times = [10.0 + i for i in range(a.rounds)]
with (out / "results.jsonl").open("w") as fh:
    fh.write(json.dumps({"variant": "plain", "step_ms": {"min": min(times), "median": sorted(times)[len(times) // 2],
                         "max": max(times)}, "dispatches": 80879, "steps": a.steps}) + "\\n")
    fh.write(json.dumps({"variant": "traced", "figures": [{"name": "overhead", "unit": "%", "min": 1.0,
                         "median": 2.0, "max": 4.0}]}) + "\\n")
    # product_path.py's form: the variant after the case's "/", figures as an object, checks per round
    fh.write(json.dumps({"case": "product_path/kernel_trace", "rounds": a.rounds, "figures": {
        "step_ms": {"min": 22.8, "median": 23.5, "max": 24.6}, "overhead_pct": None},
        "checks": {"dropped_records": [0], "kernel_rows": [80879, 80880]}, "device": "H100, driver 580"}) + "\\n")
(out / "runs.jsonl").write_text(json.dumps({"variant": "plain", "round": 0, "step_ms": 10.0}) + "\\n")
'''


@pytest.fixture
def fake_case(tmp_path, monkeypatch) -> cases.Case:
    script = tmp_path / "fake_bench.py"
    script.write_text(LINES_SCRIPT)
    case = cases.Case("gate.fake", "cpu", "a fake JSON-lines benchmark", str(script), cases.json_lines_script,
                      ("steps",))
    monkeypatch.setitem(cases.CASES, case.name, case)
    monkeypatch.setitem(suite.CASES, case.name, case)
    return case


def test_a_run_appends_rows_with_figures_and_provenance(capsys, tmp_path, fake_case):
    results = tmp_path / "results"
    code, out, err = run_main(capsys, "run", "gate.fake", "--rounds", "3", "--steps", "7",
                              "--out", str(tmp_path / "out"), "--results", str(results))
    assert code == 0, err
    rows = rowlib.load(results / "gate.jsonl")
    assert [r["variant"] for r in rows] == ["plain", "traced", "kernel_trace"]  # results.jsonl only, not runs.jsonl
    plain, traced, product = rows
    step_ms = product["figures"][0]
    assert (step_ms["name"], step_ms["unit"], step_ms["median"], step_ms["n"]) == ("step_ms", "ms", 23.5, 3)
    assert {"name": "dropped_records", "unit": "", "value": 0} in product["figures"]
    assert {"name": "kernel_rows", "unit": "", "value": "80879, 80880"} in product["figures"]
    assert product["details"]["script_output"]["device"] == "H100, driver 580"
    step = next(f for f in plain["figures"] if f["name"] == "step_ms")
    assert (step["min"], step["median"], step["max"], step["unit"]) == (10.0, 11.0, 12.0, "ms")
    assert {"name": "dispatches", "unit": "", "value": 80879} in plain["figures"]
    assert traced["figures"][0]["median"] == 2.0 and traced["figures"][0]["unit"] == "%"
    assert plain["command"] == "python -m benchmarks run gate.fake --rounds 3 --steps 7"
    argv = plain["details"]["argv"][0]
    assert "fake_bench.py --rounds 3 --out" in argv and argv.endswith("--steps 7")
    assert plain["source"] == {"kind": "measured"}
    assert plain["device"]["name"] and plain["versions"]["python"] == environment.versions()["python"]
    assert plain["commit"] == environment.commit() and len(plain["date"]) == 20
    assert (tmp_path / "out" / "gate.fake" / "rows.jsonl").read_text().count("\n") == 3
    # a second run appends: the history is kept
    run_main(capsys, "run", "gate.fake", "--rounds", "1", "--out", str(tmp_path / "out2"), "--results", str(results))
    assert len(rowlib.load(results / "gate.jsonl")) == 6


def test_a_run_records_only_when_asked(capsys, tmp_path, fake_case, monkeypatch):
    """A user's measurement leaves the tracked results alone: without --record the rows are printed and written to
    --out only; --record appends them to benchmarks/results and re-renders RESULTS.md (here a stand-in folder)."""
    tracked = tmp_path / "tracked"
    rendered: list[int] = []

    def write() -> list[Path]:
        rendered.append(1)
        return [tmp_path / "RESULTS.md"]

    monkeypatch.setattr(rowlib, "RESULTS_DIR", tracked.resolve())
    monkeypatch.setattr(render, "write", write)
    code, out, err = run_main(capsys, "run", "gate.fake", "--rounds", "1", "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert not tracked.exists() and not rendered
    assert "not recorded: --record appends them to" in out and "plain: step_ms" in out
    assert (tmp_path / "out" / "gate.fake" / "rows.jsonl").read_text().count("\n") == 3
    code, out, err = run_main(capsys, "run", "gate.fake", "--rounds", "1", "--out", str(tmp_path / "out"), "--record")
    assert code == 0, err
    assert len(rowlib.load(tracked / "gate.jsonl")) == 3 and rendered == [1]
    assert f"wrote {tmp_path / 'RESULTS.md'}" in out


def test_smoke_runs_record_nothing(capsys, tmp_path, fake_case):
    code, out, _ = run_main(capsys, "run", "gate.fake", "--rounds", "1", "--smoke", "--out", str(tmp_path / "out"),
                            "--results", str(tmp_path / "results"))
    assert code == 0 and "not recorded" in out
    assert not (tmp_path / "results").exists()


def bench_summary(path: Path, tokens: float, gates_pass: bool, rc: int = 0) -> Path:
    metrics = {"tokens_per_second": tokens, "tokens_per_second_end_to_end": tokens * 0.99,
               "step_time_ms": {"median": 8192 / tokens * 1000, "p10": 1.0, "p90": 2.0}, "mfu": tokens / 5e6,
               "peak_memory_allocated_bytes": 806 * 2**20}
    result = {"metrics": metrics, "validation": {"parity": {"passed": gates_pass}, "coverage": {"passed": True}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"results": {"B8_S128/v4": {"rc": rc, "result": result},
                                            "B32_S512/v4": {"rc": 0, "result": None}}}))
    return path


def test_workload_rows_take_min_median_max_over_processes_and_report_a_failed_gate(tmp_path):
    files = [bench_summary(tmp_path / f"r{i}" / "bench_results.json", tokens, gates_pass=i != 1, rc=int(i == 1))
             for i, tokens in enumerate([780_000.0, 790_000.0, 785_000.0])]
    env = {"device": {"name": "NVIDIA H200"}, "versions": {"python": "3.12"}, "commit": "abc", "date": "2026-01-01"}
    ctx = cases.Context(3, 60, tmp_path, env, "python -m benchmarks run workloads.b8s128 --rounds 3")
    [row] = cases.workload_rows(cases.CASES["workloads.b8s128"], ctx, files)
    figs = {f["name"]: f for f in row["figures"]}
    tokens = figs["tokens/s, device step"]
    assert (tokens["min"], tokens["median"], tokens["max"], tokens["n"]) == (780_000.0, 785_000.0, 790_000.0, 3)
    assert figs["peak memory allocated"]["median"] == 806.0
    assert figs["gates"]["value"] == "FAIL: parity"
    assert row["variant"] == "v4" and row["details"]["failed_rounds"] == 1
    # the other config's key in the same files is not this case's
    with pytest.raises(cases.CaseFailed, match="no round produced a result"):
        cases.workload_rows(cases.CASES["workloads.b32s512"], ctx, files)


def test_gpu_cases_are_refused_without_a_gpu_before_anything_runs(capsys, tmp_path, monkeypatch, fake_case):
    monkeypatch.setattr(environment, "gpus", lambda: [])
    monkeypatch.setattr(environment, "amd_gpu", lambda: None)
    code, _, err = run_main(capsys, "run", "gate.fake", "workloads.b8s128", "--results", str(tmp_path / "res"),
                            "--out", str(tmp_path / "out"))
    assert code == suite.EXIT_BAD_INPUT
    assert "workloads.b8s128 needs a GPU (here: the device machine)" in err and "python -m benchmarks add" in err
    assert not (tmp_path / "res").exists() and not (tmp_path / "out").exists()  # not even the CPU case ran


def test_a_missing_script_is_not_available_and_unknown_names_are_bad_input(capsys, tmp_path, monkeypatch):
    missing = cases.Case("gate.missing", "cpu", "comes later", "benchmarks/insights/no_such_script.py",
                         cases.json_lines_script)
    monkeypatch.setitem(suite.CASES, missing.name, missing)
    code, _, err = run_main(capsys, "run", "gate.missing", "--results", str(tmp_path))
    assert code == 2 and "gate.missing: not available in this checkout" in err
    code, _, err = run_main(capsys, "run", "nope.case", "--results", str(tmp_path))
    assert code == 2 and "unknown case 'nope.case'" in err
    code, _, err = run_main(capsys, "run", "reports.csv-1m", "--rounds", "0", "--results", str(tmp_path))
    assert code == 2 and "--rounds" in err
    assert list(tmp_path.iterdir()) == []


def test_every_committed_row_is_valid_and_the_generated_files_are_current(capsys):
    all_rows = rowlib.load_all()
    assert {r["area"] for r in all_rows} >= {"workloads", "tracer", "reports", "escalate", "slurm"}
    assert all(r["source"]["kind"] in rowlib.SOURCES for r in all_rows)
    assert render.stale() == [], "run `python -m benchmarks render`"
    code, _, err = run_main(capsys, "render", "--check")
    assert code == 0, err


def test_render_check_fails_when_a_row_is_added(capsys, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    for path in rowlib.RESULTS_DIR.glob("*.jsonl"):
        (results / path.name).write_text(path.read_text())
    readme = tmp_path / "README.md"
    readme.write_text(render.README.read_text())
    assert render.stale(results, readme) == []
    row = dict(rowlib.load(results / "reports.jsonl")[0], date="2099-01-01T00:00:00Z", variant="a new variant")
    rowlib.append([row], results)
    assert render.stale(results, readme) == [render.RESULTS_MD, readme]
    assert "a new variant" in render.expected(results, readme)[readme]


def test_bad_rows_are_refused_with_their_place(capsys, tmp_path):
    good = rowlib.load(rowlib.RESULTS_DIR / "reports.jsonl")[0]
    bad = json.loads(json.dumps(good))
    bad["figures"][0].update(min=3.0, median=2.0, max=4.0)
    f = tmp_path / "reports.jsonl"
    f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(rowlib.BadRow, match=r"reports.jsonl:2.figures\[0\]: min <= median <= max"):
        rowlib.load(f)
    results = tmp_path / "results"
    code, _, err = run_main(capsys, "add", str(f), "--results", str(results))
    assert code == 2 and "reports.jsonl:2" in err and not results.exists()
    imported = dict(good, source={"kind": "imported", "from": "somewhere"})
    with pytest.raises(rowlib.BadRow, match="names the file it came `from` and the `commit`"):
        rowlib.validate(imported)


def test_add_brings_rows_back_once(capsys, tmp_path):
    rows = rowlib.load(rowlib.RESULTS_DIR / "escalate.jsonl")
    brought = tmp_path / "escalate.jsonl"
    brought.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = tmp_path / "results"
    code, out, _ = run_main(capsys, "add", str(brought), "--results", str(results))
    assert code == 0 and f"{len(rows)} new row(s) added" in out
    code, out, _ = run_main(capsys, "add", str(brought), "--results", str(results))
    assert code == 0 and f"0 new row(s) added, {len(rows)} already there" in out
    assert len(rowlib.load(results / "escalate.jsonl")) == len(rows)


def test_imported_rows_name_a_commit_that_holds_their_logs():
    """Imported rows say where the raw logs are: a commit of this repository's history (not in a shallow clone)."""
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("no full git history here")
    imported = [r for r in rowlib.load_all() if r["source"]["kind"] == "imported"]
    assert imported
    for commit in {r["source"]["commit"] for r in imported}:
        assert subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO).returncode == 0
    for r in imported:
        path = r["source"]["from"].split(",")[0].split(" ")[0]
        assert subprocess.run(["git", "cat-file", "-e", f"{r['source']['commit']}:{path}"], cwd=REPO).returncode == 0


def test_python_dash_m_benchmarks_runs_from_the_repository():
    done = subprocess.run([sys.executable, "-m", "benchmarks", "list"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0 and "workloads.b8s128" in done.stdout


def test_gate_rows_give_the_false_positive_rate_and_the_power(tmp_path, monkeypatch):
    """aa_gate.py's summary -> one row per comparison kind and statistic: A/A exit 1 is a false positive, a slowdown's
    exit 1 is the gate catching it."""
    spec = importlib.util.spec_from_file_location("aa_gate", REPO / "benchmarks" / "insights" / "aa_gate.py")
    assert spec is not None and spec.loader is not None
    aa_gate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(aa_gate)

    def fake_run(ctx, argv, name, env=None, check=True):
        out = Path(argv[argv.index("--out") + 1])
        out.mkdir(parents=True)
        results = {"aa_alternating_3_per_side": {"comparisons": 20, "exit_0": 19, "exit_1": 1, "exit_2": 0},
                   "slowdown_3_per_side": {"comparisons": 4, "exit_0": 1, "exit_1": 3, "exit_2": 0},
                   "aa_flagged": [["aa_alternating_3_per_side", []]]}
        summary = {"steps": 10, "results": {"median": results}}
        (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in aa_gate.rows(summary)))
        return 0, 1.0

    monkeypatch.setattr(cases, "run_script", fake_run)
    case = cases.Case("gate.t", "cpu", "", __file__, cases.gate)
    env = {"device": {"name": "CPU only (2 cores)"}, "versions": {}, "commit": "abc", "date": "2026-01-01"}
    aa, slow = cases.gate(case, cases.Context(2, 60, tmp_path, env, "python -m benchmarks run gate.t --rounds 2"))
    assert aa["variant"] == "aa_alternating_3_per_side, median"
    assert {"name": "false-positive rate", "unit": "%", "value": 5.0} in aa["figures"]
    assert {"name": "power: slowdown caught", "unit": "%", "value": 75.0} in slow["figures"]
    assert {"name": "gate failed (exit 1)", "unit": "comparisons", "value": "3 of 4"} in slow["figures"]


def test_cupti_write_rows_compare_the_c_writer_with_the_python_path(tmp_path, monkeypatch):
    """bench_write.py cupti-json prints one line per implementation a round: a row each, figures over the rounds,
    and whether the old path's CSVs equalled the new one's in every round."""
    def fake_run(ctx, argv, name, env=None, check=True):
        new = {"case": "cupti-json", "impl": "C", "records": 10, "kernels": 1, "api_calls": 9,
               "records_to_json_cpu_s": 0.1 * int(name[-1]), "records_per_s_cpu": 100}
        old = {"case": "cupti-json", "impl": "Python", "records": 10, "kernels": 1, "api_calls": 9,
               "dict_to_csv_cpu_s": 2.0, "identical_csvs": {"a.csv": True, "b.csv": name != "round2"}}
        ctx.out.mkdir(parents=True, exist_ok=True)
        (ctx.out / f"{name}.log").write_text('{"versions": {}}\n' + json.dumps(new) + "\n" + json.dumps(old) + "\n")
        return 0, 1.0

    monkeypatch.setattr(cases, "run_script", fake_run)
    case = cases.CASES["tracer.cupti-write"]
    env = {"device": {"name": "CPU only (2 cores)"}, "versions": {}, "commit": "abc", "date": "2026-01-01"}
    new, old = cases.cupti_write(case, cases.Context(3, 60, tmp_path, env, "python -m benchmarks run x"))
    figs = {f["name"]: f for f in new["figures"]}
    assert (new["variant"], old["variant"]) == ("C", "Python")
    seconds = figs["records to Chrome trace JSON, CPU"]
    assert (seconds["min"], seconds["median"], seconds["max"], seconds["n"]) == (0.1, 0.2, 0.30000000000000004, 3)
    assert figs["records (kernels, API calls)"]["value"] == "10 (1, 9)"
    assert {"name": "CSVs identical to the C writer's", "unit": "", "value": "NO"} in old["figures"]


def test_benchmarks_stays_a_suite_not_a_lab_notebook():
    """At most 80 files and no round, call or run folders (issue 27): results are rows, the history is in git."""
    import re

    files = [p.relative_to(REPO / "benchmarks") for p in (REPO / "benchmarks").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    assert len(files) <= 80, len(files)
    lab = re.compile(r"^(round\d+.*|.*_?call\d+.*|run\d+.*|cupti\d+)$")
    assert [str(f) for f in files if any(lab.match(part) for part in f.parts[:-1])] == []
    assert [str(f) for f in files if re.match(r"round\d+\.sh$", f.name)] == []


def test_add_converts_a_scripts_own_lines_from_a_gpu_machine(capsys, tmp_path):
    """product_path.py's results.jsonl, brought back from the device: rows keep the device, versions, commit and
    date the lines name (not this machine's); a line without them is refused."""
    line = {"area": "tracer", "case": "product_path/kernel_trace", "rounds": 4,
            "figures": {"step_ms": {"min": 22.8, "median": 23.5, "max": 24.6},
                        "overhead_pct": {"min": 12.0, "median": 14.0, "max": 16.0}},
            "checks": {"dropped_records": [0]}, "device": "NVIDIA H100 80GB HBM3, driver 580.159.04",
            "versions": {"python": "3.12.3", "torch": "2.11.0+cu130"}, "commit": "455f798",
            "command": "bash scripts/rocprof_wrapper.sh --profile lightweight --kernel-trace --stats ...",
            "benchmark": "python3 benchmarks/tracer/product_path.py --rounds 4 --steps 60 --out DIR",
            "date": "2026-11-25T23:00:00Z"}
    f = tmp_path / "results.jsonl"
    f.write_text(json.dumps(line) + "\n")
    results = tmp_path / "results"
    code, out, err = run_main(capsys, "add", "--case", "tracer.product-path", str(f), "--results", str(results))
    assert code == 0, err
    [row] = rowlib.load(results / "tracer.jsonl")
    assert (row["variant"], row["commit"], row["date"]) == ("kernel_trace", "455f798", "2026-11-25T23:00:00Z")
    assert row["device"] == {"name": "NVIDIA H100 80GB HBM3, driver 580.159.04"}
    assert row["versions"] == {"python": "3.12.3", "torch": "2.11.0+cu130"}
    assert row["command"] == "python -m benchmarks run tracer.product-path"
    assert row["details"]["argv"] == [line["benchmark"]]
    overhead = next(x for x in row["figures"] if x["name"] == "overhead_pct")
    assert (overhead["unit"], overhead["median"], overhead["n"]) == ("%", 14.0, 4)
    del line["commit"]
    f.write_text(json.dumps(line) + "\n")
    code, _, err = run_main(capsys, "add", "--case", "tracer.product-path", str(f), "--results", str(tmp_path / "r2"))
    assert code == 2 and "results.jsonl:1: the line names no commit" in err and not (tmp_path / "r2").exists()


ENV = {"device": {"name": "CPU only (2 cores)"}, "versions": {}, "commit": "abc", "date": "2026-01-01T00:00:00Z"}


def test_slurm_rows_time_the_restart_and_the_tests_each_round(tmp_path, monkeypatch):
    calls: list[list[str]] = []
    walls = iter([0.1, 5.0, 70.0, 0.1, 4.0, 80.0])

    def fake_run(ctx, argv, name, env=None, check=True):
        calls.append(argv)
        return 0, next(walls)

    monkeypatch.setattr(cases, "run_script", fake_run)
    case = cases.CASES["slurm.local-cluster"]
    [row] = cases.slurm(case, cases.Context(2, 60, tmp_path, ENV, "python -m benchmarks run slurm.local-cluster"))
    assert [c[-1] if c[0] == "bash" else c[3] for c in calls] == ["down", "up", "tests/slurm"] * 2
    up, tests = row["figures"]
    assert (up["min"], up["max"], tests["min"], tests["max"], tests["n"]) == (4.0, 5.0, 70.0, 80.0, 2)


def test_runner_rows_say_each_phases_exit_code(tmp_path, monkeypatch):
    def fake_run(ctx, argv, name, env=None, check=True):
        out = Path(env["OUT"])
        out.mkdir(parents=True)
        (out / "gpu_final_check.log").write_text("NVIDIA H100\nlightweight: exit 0\ncompute_bound: exit 1\n"
                                                 "report: exit 0\n")
        return 0, 1.0

    monkeypatch.setattr(cases, "run_script", fake_run)
    case = cases.CASES["runner.gpu-e2e"]
    [row] = cases.runner(case, cases.Context(1, 60, tmp_path, ENV, "python -m benchmarks run runner.gpu-e2e"))
    assert [(f["name"], f["value"]) for f in row["figures"]] == [
        ("lightweight exit code", 0), ("compute_bound exit code", 1), ("report exit code", 0)]


def test_two_rank_workload_cases_run_bench_under_torchrun(tmp_path, monkeypatch):
    """workloads.*-2ranks: the same bench.py, launched by torchrun on 2 processes, rows from rank 0's summary."""
    seen = []

    def fake_run(ctx, argv, name, env=None, check=True):
        seen.append(argv)
        out = Path(argv[argv.index("--out") + 1])
        out.mkdir(parents=True)
        result = {"metrics": {"tokens_per_second": 2e6, "step_time_ms": {"median": 2.0}}, "validation": {}}
        (out / "bench_results.json").write_text(json.dumps({"results": {"B8_S128/v4": {"rc": 0, "result": result}}}))
        return 0, 1.0

    monkeypatch.setattr(cases, "run_script", fake_run)
    case = cases.CASES["workloads.b8s128-2ranks"]
    assert case.needs == "gpu" and "workloads.b32s512-2ranks" in cases.CASES
    ctx = cases.Context(1, 0, tmp_path, environment.capture(), "python -m benchmarks run workloads.b8s128-2ranks")
    [row] = case.collect(case, ctx)
    assert seen[0][1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    assert seen[0][6].endswith("bench.py") and "--gates" in seen[0]
    assert row["case"] == "workloads.b8s128-2ranks" and row["variant"] == "v4"
    assert row["figures"][0]["median"] == 2e6
    one: list[list[str]] = []

    def fake_one(ctx, argv, name, env=None, check=True):
        one.append(argv)
        return fake_run(ctx, argv, name)

    monkeypatch.setattr(cases, "run_script", fake_one)
    cases.CASES["workloads.b32s512"].collect(cases.CASES["workloads.b32s512"],
                                             cases.Context(1, 0, tmp_path / "one", environment.capture(), "x"))
    assert "torch.distributed.run" not in one[0] and "--gates" not in one[0]
