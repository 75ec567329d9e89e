"""The named cases, per area. A case runs one benchmark script as its own process and turns what that script wrote
into result rows (benchmarks/rows.py). The scripts stay runnable on their own; this module only knows their command
lines and their output files.

needs: "cpu" runs anywhere (this development machine included); "gpu" needs a GPU, so here it runs on the device
machine (benchmarks/README.md says how, and how its rows come back); "docker" needs a Docker engine.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.rows import figure, fixed, make_row

REPO = Path(__file__).resolve().parents[1]


class NotAvailable(RuntimeError):
    """The case's script is not in this checkout (yet): nothing was run."""


class CaseFailed(RuntimeError):
    """The script failed or wrote nothing usable; its log is named in the message."""


@dataclass
class Context:
    rounds: int
    steps: int
    out: Path                     # this case's folder for logs and raw outputs
    env: dict[str, Any]           # environment.capture()
    command: str                  # the suite command that reproduces the row
    smoke: bool = False
    log: list[str] = field(default_factory=list)  # the commands run
    source: dict[str, Any] | None = None          # rows converted from earlier logs: {"kind": "imported", ...}


@dataclass(frozen=True)
class Case:
    name: str
    needs: str                    # cpu | gpu | docker
    about: str
    script: str                   # the script it runs, relative to the repository
    collect: Callable[[Case, Context], list[dict[str, Any]]]
    options: tuple[str, ...] = ()  # case-specific arguments

    @property
    def area(self) -> str:
        return self.name.split(".", 1)[0]

    def script_path(self) -> Path | None:
        """The script, or None where this checkout lacks it (the case is then not available)."""
        path = REPO / self.script
        return path if self.script and path.is_file() else None


def run_script(ctx: Context, argv: list[str], name: str, env: dict[str, str] | None = None,
               check: bool = True) -> tuple[int, float]:
    """Run one benchmark process from the repository root, its output into <out>/<name>.log; (exit code, wall s)."""
    ctx.out.mkdir(parents=True, exist_ok=True)
    log = ctx.out / f"{name}.log"
    ctx.log.append(shlex.join(argv))
    print(f"  $ {shlex.join(argv)}   (log: {log})", flush=True)
    start = time.perf_counter()
    with log.open("w") as fh:
        code = subprocess.run(argv, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                              env={**os.environ, **(env or {})}).returncode
    wall = time.perf_counter() - start
    if check and code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise CaseFailed(f"exit {code} after {wall:.0f} s; last lines of {log}:\n{tail}")
    return code, wall


def _row(case: Case, ctx: Context, variant: str, figures: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    row = make_row(case.area, case.name, variant, figures, ctx.env, ctx.command, note=extra.pop("note", None),
                   source=ctx.source)
    row["details"] = {"argv": ctx.log, "rounds": ctx.rounds, **extra}
    return row


# ------------------------------------------------------------------ workloads: TinyTransformer v1-v4
def workloads(case: Case, ctx: Context) -> list[dict[str, Any]]:
    """bench.py once per round (one process each, or one per rank under torchrun), every version of one config; the
    gates run at B8 S128."""
    config = case.options[0]
    nproc = int(case.options[1]) if len(case.options) > 1 else 1
    launch = [sys.executable] if nproc == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    summaries = []
    for i in range(ctx.rounds):
        out = ctx.out / f"round{i + 1}"
        argv = [*launch, str(case.script_path()), "--out", str(out), "--configs", config]
        argv += ["--gates"] if config == "B8_S128" else []
        argv += ["--smoke"] if ctx.smoke else []
        run_script(ctx, argv, f"round{i + 1}", check=False)  # a failed gate still leaves its numbers
        summary_file = out / "bench_results.json"
        if not summary_file.is_file():
            raise CaseFailed(f"bench.py wrote no {summary_file}: see {ctx.out / f'round{i + 1}.log'}")
        summaries.append(summary_file)
    return workload_rows(case, ctx, summaries)


def workload_rows(case: Case, ctx: Context, summaries: list[Path]) -> list[dict[str, Any]]:
    """One row per version from bench.py's bench_results.json files (one per process): min/median/max over them."""
    config = case.options[0]
    per_key: dict[str, list[dict[str, Any]]] = {}
    for summary_file in summaries:
        for key, result in json.loads(summary_file.read_text())["results"].items():
            if key.split("/", 1)[0] == config:
                per_key.setdefault(key.split("/", 1)[1], []).append(result)
    rows = []
    for variant, results in per_key.items():
        done = [r["result"] for r in results if r["result"]]
        if not done:
            raise CaseFailed(f"{variant}: no round produced a result (see the logs in {ctx.out})")
        metrics = [r["metrics"] for r in done]
        figs = [figure("tokens/s, device step", "tokens/s", [m["tokens_per_second"] for m in metrics])]
        if all(m.get("tokens_per_second_end_to_end") for m in metrics):  # older bench.py results lack it
            figs.append(figure("tokens/s, end to end", "tokens/s",
                               [m["tokens_per_second_end_to_end"] for m in metrics]))
        figs.append(figure("step time, median", "ms", [m["step_time_ms"]["median"] for m in metrics]))
        if all(m.get("mfu") is not None for m in metrics):
            figs.append(figure("MFU (bf16 dense peak)", "%", [100 * m["mfu"] for m in metrics]))
        if all(m.get("peak_memory_allocated_bytes") for m in metrics):
            figs.append(figure("peak memory allocated", "MiB",
                               [m["peak_memory_allocated_bytes"] / 2**20 for m in metrics]))
        gates = [r.get("validation") or {} for r in done]
        if any(gates):
            failed = sorted({k for g in gates for k, v in g.items() if not v["passed"]})
            figs.append(fixed("gates", "", "all pass" if not failed else "FAIL: " + ", ".join(failed)))
        rows.append(_row(case, ctx, variant, figs, failed_rounds=sum(1 for r in results if r["rc"] != 0)))
    return rows


# ------------------------------------------------------------------ JSON-lines scripts (tracer, Kineto, gate)
UNIT_SUFFIXES = {"_ms": "ms", "_s": "s", "_us": "us", "_ns": "ns", "_pct": "%", "_mib": "MiB", "_per_s": "/s"}


def _unit(key: str) -> str:
    ordered = sorted(UNIT_SUFFIXES.items(), key=lambda item: -len(item[0]))  # "_per_s" before "_s"
    return next((unit for suffix, unit in ordered if key.endswith(suffix)), "")


def _spread(name: str, unit: str, value: dict[str, Any], n: int | None) -> dict[str, Any]:
    out = {"name": name, "unit": unit, "min": value["min"], "median": value["median"], "max": value["max"]}
    return {**out, "n": n} if n else out


def _figures_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A script's figures: a list in the rows' form as it is; else every {"min", "median", "max"} object and plain
    number (of the line, or of its `figures` object), the unit from the key's suffix; `checks` as values."""
    if isinstance(data.get("figures"), list):
        return list(data["figures"])
    n = data.get("rounds") if isinstance(data.get("rounds"), int) else None
    source = data["figures"] if isinstance(data.get("figures"), dict) else data
    figs = []
    for key, value in source.items():
        if isinstance(value, dict) and {"min", "median", "max"} <= value.keys():
            figs.append(_spread(key, str(value.get("unit") or _unit(key)), value,
                                value["n"] if isinstance(value.get("n"), int) else n))
        elif isinstance(value, int | float) and not isinstance(value, bool) and key not in ("rounds", "steps"):
            figs.append(fixed(key, _unit(key), value))
    for key, values in (data.get("checks") or {}).items():  # e.g. dropped records, kernel rows: the same each round
        shown = values if not isinstance(values, list) else values[0] if len(values) == 1 else ", ".join(
            map(str, values))
        figs.append(fixed(key, "", shown if isinstance(shown, int | float | str) else json.dumps(shown)))
    return figs


def rows_from_lines(case: Case, ctx: Context, folder: Path) -> list[dict[str, Any]]:
    """One row per JSON line the script wrote (results.jsonl under `folder` when there is one, else every .jsonl
    there): one line per variant (rows_from_data)."""
    files = sorted(folder.rglob("results.jsonl")) or sorted(folder.rglob("*.jsonl"))
    lines = [json.loads(line) for path in files for line in path.read_text().splitlines() if line.strip()]
    if not lines:
        raise CaseFailed(f"{case.script} wrote no JSON lines under {folder}")
    return rows_from_data(case, ctx, lines)


def rows_from_data(case: Case, ctx: Context, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The variant is a line's `variant` (or `name`, or what follows the `/` of its `case`); figures as _figures_of
    reads them; a line's `device` and `versions` objects are kept beside the runner's."""
    rows = []
    for number, data in enumerate(lines, 1):
        variant = str(data.get("variant") or data.get("name") or str(data.get("case", "")).partition("/")[2]
                      or f"line {number}")
        figs = _figures_of(data)
        if not figs:
            raise CaseFailed(f"{case.script}: line {number} of its output has no figures")
        row = _row(case, ctx, variant, figs, script_output=data)
        for key in ("device", "versions"):
            if isinstance(data.get(key), dict):
                row[key] = {**row[key], **{k: v for k, v in data[key].items() if v is not None}}
        rows.append(row)
    return rows


def rows_from_script_output(case: Case, path: Path) -> list[dict[str, Any]]:
    """Rows from the JSON lines a case's script wrote on another machine (product_path.py's results.jsonl from the
    device), with the device, versions, commit and date each line names: `python -m benchmarks add --case CASE`."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        data = json.loads(line)
        missing = [k for k in ("device", "commit", "date") if not data.get(k)]
        if missing:
            raise CaseFailed(f"{path}:{number}: the line names no {', '.join(missing)}: a row needs them")
        device = data["device"] if isinstance(data["device"], dict) else {"name": str(data["device"])}
        env = {"device": device, "versions": data.get("versions") or {}, "commit": data["commit"],
               "date": data["date"]}
        ctx = Context(int(data.get("rounds") or 1), 0, path.parent, env, f"python -m benchmarks run {case.name}",
                      log=[str(data.get("benchmark") or data.get("command") or "")])
        rows += rows_from_data(case, ctx, [data])
    if not rows:
        raise CaseFailed(f"{path}: no JSON lines")
    return rows


def json_lines_script(case: Case, ctx: Context) -> list[dict[str, Any]]:
    script = case.script_path()
    if script is None:
        raise NotAvailable(f"{case.script or case.name} is not in this checkout: {case.about}")
    argv = [sys.executable, str(script), "--rounds", str(ctx.rounds), "--out", str(ctx.out / "raw")]
    argv += ["--steps", str(ctx.steps)] if "steps" in case.options else []
    code, _ = run_script(ctx, argv, "run", check=False)  # a failed process still leaves the others' rows
    rows = rows_from_lines(case, ctx, ctx.out / "raw")
    if code != 0:
        for row in rows:
            row["note"] = f"the script exited {code}: some process failed (see {ctx.out / 'run.log'})"
    return rows


# ------------------------------------------------------------------ tracer: the CUPTI backend's write, on the CPU
CUPTI_WRITE_FIGURES = {  # bench_write.py cupti-json keys -> (figure, unit)
    "records_per_s_cpu": ("records/s, records to CSVs (CPU time)", "records/s"),
    "records_per_s_json_cpu": ("records/s, records to Chrome trace JSON (CPU time)", "records/s"),
    "records_to_json_cpu_s": ("records to Chrome trace JSON, CPU", "s"),
    "json_to_csv_cpu_s": ("Chrome trace JSON to CSVs (convert.write_files(path)), CPU", "s"),
    "records_to_dict_cpu_s": ("records to Kineto-style dict, CPU", "s"),
    "dict_to_csv_cpu_s": ("dict to CSVs, CPU", "s"),
    "chrome_json_cpu_s": ("dict to Chrome trace JSON, CPU", "s"),
    "peak_rss_mb_so_far": ("peak RSS of the process so far", "MB"),
}


def cupti_write(case: Case, ctx: Context) -> list[dict[str, Any]]:
    """bench_write.py cupti-json once per round: a row for the C writer and one for the Python dict path before it,
    figures over the rounds; the CSVs of both must be identical."""
    records = 20_000 if ctx.smoke else int(case.options[0])
    per_impl: dict[str, list[dict[str, Any]]] = {}
    for i in range(ctx.rounds):
        run_script(ctx, [sys.executable, str(case.script_path()), "cupti-json", str(records)], f"round{i + 1}")
        for line in (ctx.out / f"round{i + 1}.log").read_text().splitlines():
            data = json.loads(line) if line.startswith("{") else {}
            if data.get("case") == "cupti-json":
                per_impl.setdefault(data["impl"], []).append(data)
    if len(per_impl) != 2:
        raise CaseFailed(f"bench_write.py printed {len(per_impl)} of its 2 results: see {ctx.out / 'round1.log'}")
    rows = []
    for impl, lines in per_impl.items():
        figs = [figure(name, unit, [d[key] for d in lines]) for key, (name, unit) in CUPTI_WRITE_FIGURES.items()
                if all(key in d for d in lines)]
        figs.append(fixed("records (kernels, API calls)", "", f"{lines[0]['records']} ({lines[0]['kernels']},"
                          f" {lines[0]['api_calls']})"))
        if "identical_csvs" in lines[0]:
            same = all(all(d["identical_csvs"].values()) for d in lines)
            figs.append(fixed("CSVs identical to the C writer's", "", "yes" if same else "NO"))
        rows.append(_row(case, ctx, impl, figs))
    return rows


# ------------------------------------------------------------------ gate: compare --gate on repeated CPU runs
def gate(case: Case, ctx: Context) -> list[dict[str, Any]]:
    """aa_gate.py: --rounds chunks of 6 identical runs (A/A) and as many of A B A B A B (a known slowdown); its
    rows.jsonl has a row per statistic and comparison kind with how often the gate failed (exit 1): false positives
    for A/A, power for B."""
    script = case.script_path()
    out = ctx.out / "raw"
    argv = [sys.executable, str(script), "--out", str(out), "--aa-chunks", str(ctx.rounds), "--ab-chunks",
            str(ctx.rounds)]
    run_script(ctx, argv, "aa_gate")
    lines = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines() if line.strip()]
    if not lines:
        raise CaseFailed(f"{case.script} made no comparisons (see {ctx.out / 'aa_gate.log'})")
    return rows_from_data(case, ctx, lines)


# ------------------------------------------------------------------ reports at scale
def reports(case: Case, ctx: Context) -> list[dict[str, Any]]:
    which = case.options[0]
    out = ctx.out / "bench_report.json"
    argv = [sys.executable, str(case.script_path()), "--cases", which, "--runs", str(ctx.rounds), "--json", str(out)]
    argv += case.options[1:]
    run_script(ctx, argv, "bench_report", check=False)  # exit 1 = a target missed: still a result
    if not out.is_file():
        raise CaseFailed(f"bench_report.py wrote no {out}: see {ctx.out / 'bench_report.log'}")
    return report_rows(case, ctx, out)


def report_rows(case: Case, ctx: Context, out: Path) -> list[dict[str, Any]]:
    """Rows from bench_report.py's --json file (the results of this case only)."""
    data = json.loads(out.read_text())
    rows = []
    for result in data["results"]:
        names = case.options[0].split(",")
        if result["case"] not in names or (result["sqlite_reader"] or "auto") != (
                "stdlib" if "stdlib" in case.options else "auto"):
            continue
        wall = result["wall_s"]
        figs = [figure("wall time", "s", [wall["min"], wall["median"], wall["max"]]),
                fixed("peak RSS", "MiB", round(result["peak_rss_mib"])),
                fixed("target met", "", "yes" if result["met"] else "NO",
                      note=f"{result['target_s']} s" + (f", {result['target_peak_mib']} MiB"
                                                        if result["target_peak_mib"] else ""))]
        if "cpu_s" in result:  # CPU time of the report process (user + system, every thread)
            cpu = result["cpu_s"]
            figs.insert(1, figure("CPU time", "s", [cpu["min"], cpu["median"], cpu["max"]]))
        if "baseline_cpu_s" in result:  # paired, alternating with the package as of baseline_ref
            base = result["baseline_cpu_s"]
            figs.insert(2, figure(f"CPU time, code at {result['baseline_ref']}", "s",
                                  [base["min"], base["median"], base["max"]]))
            figs.insert(3, fixed("CPU ratio (medians)", "x", round(result["cpu_ratio_of_medians"], 3),
                                 note=f"median of the pairs' ratios {result['cpu_ratio_median_of_pairs']:.3f}x"))
        variant = {None: "default", "auto": "ADBC reader", "stdlib": "stdlib sqlite3 fallback"}[result["sqlite_reader"]]
        if "baseline_ref" in result:
            variant = f"paired with the code at {result['baseline_ref']}"
        variant = result["case"] if len(names) > 1 else variant
        for fig in figs:  # min / median / max over the runs: n is the run count, not the three summary values
            if "n" in fig:
                fig["n"] = result["runs"]
        row = _row(case, ctx, variant, figs,
                   dispatches=result["dispatches"], input_mb=result["input_mb"],
                   load_average_1min=[data["load_average_1min_at_start"], result["load_average_1min_after"]])
        row["versions"] = {**row["versions"], **data["versions"]}
        rows.append(row)
    return rows


# ------------------------------------------------------------------ escalate with the real ncu
def escalate(case: Case, ctx: Context) -> list[dict[str, Any]]:
    out = ctx.out / "raw"
    run_script(ctx, ["bash", str(case.script_path())], "escalate_gpu", env={"OUT": str(out), "CAP_S": "75"},
               check=False)
    return escalate_rows(case, ctx, out)


def escalate_rows(case: Case, ctx: Context, out: Path) -> list[dict[str, Any]]:
    """A row from escalate_gpu.sh's times.txt and escalation.json."""
    times_file, report_file = out / "times.txt", out / "escalation.json"
    if not (times_file.is_file() and report_file.is_file()):
        raise CaseFailed(f"escalate_gpu.sh wrote no times.txt / escalation.json under {out}")
    times = {m[1]: (int(m[2]), float(m[3])) for m in
             (re.match(r"(\S+) rc=(\d+) wall_s=([\d.]+)", line) for line in times_file.read_text().splitlines()) if m}
    kernels = [k for k in json.loads(report_file.read_text())["kernels"] if k.get("profile")]
    with_counters = sum(1 for k in kernels if k.get("counters"))
    full = sum(times[f"every_kernel_{p}"][1] for p in ("compute_bound", "memory_bound"))
    capped = any(times[f"every_kernel_{p}"][0] == 124 for p in ("compute_bound", "memory_bound"))
    figs = [fixed("top kernels with counters", "kernels", f"{with_counters} of {len(kernels)}"),
            fixed("first pass", "s", times["first_pass"][1]),
            fixed("escalation (second pass)", "s", times["escalation"][1]),
            fixed("ncu over every kernel (compute_bound + memory_bound)", "s", full,
                  note="capped runs: a lower bound" if capped else None)]
    return [_row(case, ctx, "v1 top 5", figs)]


# ------------------------------------------------------------------ SLURM: the local cluster
def slurm(case: Case, ctx: Context) -> list[dict[str, Any]]:
    setup = str(REPO / "scripts" / "setup_slurm.sh")
    ups, tests = [], []
    for i in range(ctx.rounds):
        run_script(ctx, ["bash", setup, "down"], f"down{i + 1}", check=False)
        ups.append(run_script(ctx, ["bash", setup, "up"], f"up{i + 1}")[1])
        code, wall = run_script(ctx, [sys.executable, "-m", "pytest", "tests/slurm", "-q", "-p", "no:cacheprovider"],
                                f"tests{i + 1}", check=False)
        if code != 0:
            raise CaseFailed(f"the SLURM tests failed (exit {code}): see {ctx.out / f'tests{i + 1}.log'}")
        tests.append(wall)
    figs = [figure("cluster up (image cached: warm restart)", "s", ups),
            figure("the SLURM tests (cluster start, 2-node job, teardown included)", "s", tests)]
    return [_row(case, ctx, "local cluster", figs)]


# ------------------------------------------------------------------ runner: the profiled runs end to end
def runner(case: Case, ctx: Context) -> list[dict[str, Any]]:
    out = ctx.out / "raw"
    run_script(ctx, ["bash", str(case.script_path())], "gpu_final_check", env={"OUT": str(out)}, check=False)
    log = (out / "gpu_final_check.log").read_text(errors="replace") if (out / "gpu_final_check.log").is_file() else ""
    exits = dict(re.findall(r"^(lightweight|compute_bound|report): exit (\d+)$", log, re.M))
    if not exits:
        raise CaseFailed(f"gpu_final_check.sh printed no phase results: see {ctx.out / 'gpu_final_check.log'}")
    figs = [fixed(f"{phase} exit code", "", int(code)) for phase, code in exits.items()]
    return [_row(case, ctx, "v1, v4", figs)]


def _workload(config: str, label: str, nproc: int = 1) -> Case:
    if nproc == 1:
        return Case(f"workloads.{label}", "gpu", f"TinyTransformer v1-v4 (and v4-sdpa) at {config.replace('_', ' ')}, "
                    "one process per round" + (", with the validation gates" if config == "B8_S128" else ""),
                    "benchmarks/tinytransformer/bench.py", workloads, (config,))
    return Case(f"workloads.{label}-{nproc}ranks", "gpu", f"the same on {nproc} GPUs (torchrun, data parallel, "
                f"{config.replace('_', ' ')} per rank; tokens/s of all ranks)"
                + (", with the gates and the data-parallel gate" if config == "B8_S128" else ""),
                "benchmarks/tinytransformer/bench.py", workloads, (config, str(nproc)))


def _kineto() -> Case:
    """Kineto traces at scale: bench_report.py's kineto cases where it has them, else a script of its own."""
    bench_report = REPO / "benchmarks" / "reports" / "bench_report.py"
    source = bench_report.read_text() if bench_report.is_file() else ""
    names = sorted(set(re.findall(r'"(kineto[\w-]*)"\s*:', source)))
    about = "report on PyTorch profiler (Kineto) traces at scale"
    if names:
        return Case("reports.kineto", "cpu", f"{about} (bench_report.py: {', '.join(names)})",
                    "benchmarks/reports/bench_report.py", reports, (",".join(names),))
    return Case("reports.kineto", "cpu", f"{about}: copies of a real trace to 1M kernels (gzip), report CPU time and "
                "peak memory (targets 10 s CPU, 1 GiB), a baseline checkout ($MADENGINE_ROCPROF_BENCH_BASELINE) and "
                "HTA beside it where given (benchmarks/reports/bench_kineto.py)",
                "benchmarks/reports/bench_kineto.py", json_lines_script)


def _report(name: str, about: str, *extra: str, bench_case: str = "") -> Case:
    """A bench_report.py case; `bench_case` when its name there differs from ours."""
    return Case(f"reports.{name}", "cpu", about, "benchmarks/reports/bench_report.py", reports,
                (bench_case or name, *extra))


# ------------------------------------------------------------------ tracer on a GPU: the real write, ncu's counts
def gpu_write_rows(case: Case, ctx: Context, check: dict[str, Any]) -> list[dict[str, Any]]:
    """A row from cupti_write_check.py's JSON: a real lightweight run's window close -> files, and its checks."""
    records = sum(check["records"].values())
    figs = [fixed("window close -> files", "s", check["close_to_files_s"],
                  note=", ".join(f"{k} {v} s" for k, v in check["write_seconds"].items())),
            fixed("records written", "", records),
            fixed("records/s, close -> files (wall clock)", "records/s", check["records_per_s_trace_and_rows"]),
            fixed("dropped records", "", check["dropped_records"]),
            fixed("checks", "", "all pass" if all(check["checks"].values()) else
                  "FAILED: " + ", ".join(k for k, ok in check["checks"].items() if not ok))]
    return [_row(case, ctx, f"v1 B8 S128, {check['steps']} steps, --kernel-trace --hip-trace", figs,
                 trace_writer=check.get("trace_writer"), api_recorder=check.get("api_recorder"))]


def gpu_write(case: Case, ctx: Context) -> list[dict[str, Any]]:
    out = ctx.out / "raw"
    run_script(ctx, [sys.executable, str(case.script_path()), "--out", str(out), "--steps", str(ctx.steps)],
               "cupti_write_check", check=False)  # exit 1 = a check failed: the row says which
    return gpu_write_rows(case, ctx, json.loads((out / "cupti_write_check.json").read_text()))


def dispatch_count_rows(case: Case, ctx: Context, counts: dict[str, Any]) -> list[dict[str, Any]]:
    """A row from compare_counts.py's JSON (ncu_count.sh): dispatches and kernel functions, tracer against ncu."""
    figs = [fixed("dispatches, embedded / ncu", "", f"{counts['total_a']:,} / {counts['total_b']:,}"),
            fixed("kernel functions, embedded / ncu", "", f"{counts['functions_a']} / {counts['functions_b']}"),
            fixed("functions whose counts differ", "", len(counts["functions_differing"]))]
    return [_row(case, ctx, "embedded (CUPTI) vs ncu, eager v1 B8 S128", figs)]


def dispatch_count(case: Case, ctx: Context) -> list[dict[str, Any]]:
    out = ctx.out / "raw"
    run_script(ctx, ["bash", str(case.script_path()), str(out)], "ncu_count", check=False)
    return dispatch_count_rows(case, ctx, json.loads((out / "counts.json").read_text()))


CASES: dict[str, Case] = {c.name: c for c in [
    _workload("B8_S128", "b8s128"),
    _workload("B32_S512", "b32s512"),
    _workload("B8_S128", "b8s128", nproc=2),
    _workload("B32_S512", "b32s512", nproc=2),
    Case("tracer.product-path", "gpu", "tracing overhead through the wrapper as users run it (eager v1 B8 S128 and v4, "
         "whole-run window, alternating processes), one row per variant", "benchmarks/tracer/product_path.py",
         json_lines_script, ("steps",)),
    Case("tracer.write", "cpu", "the tracer's trace writing (issues 25 item 5, 26 item 5): a Kineto JSON of 1M CPU "
         "operators (and $MRT_TRACE_FILE, a real 400-step v1 trace) to kernel_trace.csv + kernel_stats.csv, native "
         "and Python paths; rows/s = rows / (read + write CPU seconds)", "benchmarks/tracer/bench_write.py",
         json_lines_script),
    Case("tracer.cupti-write", "cpu", "the CUPTI backend's trace write from raw records: 1M synthetic records (8% "
         "kernels, 91% interposed API calls) -> Chrome trace JSON -> CSVs, the C writer against the Python dict path",
         "benchmarks/tracer/bench_write.py", cupti_write, ("1000000",)),
    Case("tracer.gpu-write", "gpu", "the CUPTI backend's trace write on a real 60-step lightweight run (eager v1 B8 "
         "S128, --kernel-trace --hip-trace): window close -> files, rows, and checks that the JSON loads and matches",
         "benchmarks/tracer/cupti_write_check.py", gpu_write, ("steps",)),
    Case("tracer.dispatch-count", "gpu", "dispatch counts of the embedded tracer against ncu on the product path's "
         "workload (10 steps: ncu replays every kernel)", "benchmarks/tracer/ncu_count.sh", dispatch_count),
    _report("csv-1m", "report on one rocprofv3 kernel_trace.csv of 1M dispatches (target 1.5 s)"),
    _report("csv-1m-vs-before", "csv-1m, CPU time paired and alternating with the code before the input layer "
            "(0f60527^; issue 33: at most 1.05x)", "--baseline-ref", "0f60527^", bench_case="csv-1m"),
    _report("csv-10m", "report on 10M dispatches, 2 GB of CSV (targets 10 s, 1 GiB peak)"),
    _report("ranks-8x1m", "one merged report of 8 ranks x 1M dispatches (target 15 s)"),
    _report("rocpd-10m", "report on a rocpd database of 10M dispatches, ADBC reader (target 10 s)"),
    _report("rocpd-10m-stdlib", "the same with the stdlib sqlite3 fallback (an install without adbc-driver-sqlite)",
            "--sqlite-reader", "stdlib", bench_case="rocpd-10m"),
    _kineto(),
    Case("escalate.ncu-top5", "gpu", "escalate with the real ncu on TinyTransformer v1: top 5 kernels with counters, "
         "the second pass against ncu over every kernel", "benchmarks/insights/escalate_gpu.sh", escalate),
    Case("slurm.local-cluster", "docker", "the local SLURM cluster (1 controller + 2 nodes in Docker): start, and the "
         "SLURM tests with a 2-node TinyTransformer job", "scripts/setup_slurm.sh", slurm),
    Case("gate.false-positives-and-power", "cpu", "compare --gate on repeated CPU runs of TinyTransformer v1 under "
         "the tracer: the A/A false-positive rate and the power to catch a known slowdown (--rounds chunks of each)",
         "benchmarks/insights/aa_gate.py", gate),
    Case("runner.gpu-e2e", "gpu", "madengine-rocprof run (local runner) for v1 and v4 under lightweight and "
         "compute_bound, then report: every phase must exit 0", "benchmarks/runner/gpu_final_check.sh", runner),
]}
