"""Tracing overhead as users pay it: the wrapper, one window over the whole run, processes alternating.

Each variant is one process per round, started the way madengine starts a traced workload:

    bash scripts/rocprof_wrapper.sh --profile lightweight <trace flags> --output-format csv -d OUT -o %hostname%/%pid% \
        -- python3 scripts/tinytransformer/tt_harness.py --version v1 --batch-size 8 --seq-len 128 --cuda-graphs off ...

The harness times every step with CUDA events (tt_train.timed_run) and reports the median; nothing in the tracer
is told about the measurement. Rounds run every variant once, in an order rotated each round, so a drift of the
machine spreads over all variants; a variant's overhead in a round is its median step over the untraced run of the
same round. Per variant the result row holds the minimum, median and maximum over rounds of both figures.

Variants (`--variants`, default: all of them but the diagnostics):
  none / v4_none            the harness alone (eager v1; v4: one CUDA graph per step)
  kernel_trace / v4_kernel_trace   --kernel-trace --stats (the `lightweight` profile)
  lightweight_interpose     --kernel-trace --hip-trace --stats (the rocprofv3_lightweight tool; API calls recorded by
                            the libcudart interposer, the default recorder)
  torch                     --kernel-trace --stats with MADENGINE_ROCPROF_TRACER_BACKEND=torch (torch.profiler)
  cupti_floor_kernel_at_torch   no wrapper: CUPTI's kernel, memcpy and memset records enabled right after
                            `import torch` (the moment the tracer starts) with a consumer that discards every buffer
                            in C (floor/sitecustomize.py): what CUPTI itself costs
  cupti_floor_launchcb_at_torch the same plus a do-nothing CUPTI callback on the driver's launch/copy/set calls: the
                            floor under the interposer's kernel join
Diagnostics (named only): lightweight_activity (API calls as CUPTI activity records); cupti_floor_kernel and
  cupti_floor_api (enabled at interpreter start-up; the default set until call 5); cupti_floor_api_at_torch;
  cupti_floor_kernel_late (enabled at the first optimizer step, after the CUDA context exists); cupti_floor_kernel_off
  (enabled at start-up, disabled at the first optimizer step).

    python3 benchmarks/tracer/product_path.py --rounds 4 --steps 60 --out DIR [--variants a,b] [--deadline-s S]

Writes DIR/runs.jsonl (one line per process) and DIR/results.jsonl (one row per variant, the format of
`python -m benchmarks`), and prints a table. Needs a CUDA GPU with torch and cupti-python.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import glob
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(REPO, "scripts", "tinytransformer", "tt_harness.py")
KERNEL = ["--kernel-trace", "--stats"]
LIGHT = ["--kernel-trace", "--hip-trace", "--stats"]
MULTI = ["--kernel-trace", "--memory-copy-trace", "--rccl-trace", "--stats"]
RECORDER = "MADENGINE_ROCPROF_TRACER_API_RECORDER"

# name: (workload, wrapper trace flags or None for no wrapper, extra environment, baseline variant)
VARIANTS: dict[str, tuple[str, list[str] | None, dict[str, str], str]] = {
    "none": ("v1", None, {}, "none"),
    "kernel_trace": ("v1", KERNEL, {}, "none"),
    "lightweight_activity": ("v1", LIGHT, {RECORDER: "activity"}, "none"),
    "lightweight_interpose": ("v1", LIGHT, {RECORDER: "interpose"}, "none"),
    "torch": ("v1", KERNEL, {"MADENGINE_ROCPROF_TRACER_BACKEND": "torch"}, "none"),
    "cupti_floor_kernel": ("v1", None, {"MRT_FLOOR_KINDS": "kernel"}, "none"),
    "cupti_floor_api": ("v1", None, {"MRT_FLOOR_KINDS": "api"}, "none"),
    "v4_none": ("v4", None, {}, "v4_none"),
    "v4_kernel_trace": ("v4", KERNEL, {}, "v4_none"),
    "cupti_floor_kernel_late": ("v1", None, {"MRT_FLOOR_KINDS": "kernel", "MRT_FLOOR_WHEN": "step"}, "none"),
    "cupti_floor_kernel_off": ("v1", None, {"MRT_FLOOR_KINDS": "kernel", "MRT_FLOOR_WHEN": "off"}, "none"),
    "cupti_floor_kernel_at_torch": ("v1", None, {"MRT_FLOOR_KINDS": "kernel", "MRT_FLOOR_WHEN": "torch"}, "none"),
    "cupti_floor_api_at_torch": ("v1", None, {"MRT_FLOOR_KINDS": "api", "MRT_FLOOR_WHEN": "torch"}, "none"),
    "cupti_floor_launchcb_at_torch": ("v1", None, {"MRT_FLOOR_KINDS": "launchcb", "MRT_FLOOR_WHEN": "torch"},
                                      "none"),
    # 2 ranks (torchrun, 2 GPUs; the wrapper around torchrun, as madengine runs a multi-GPU context): v4 with its
    # captured step (all-reduce inside the graph), the multi-GPU trace set, and torch.profiler as the count reference
    "v4x2_none": ("v4x2", None, {}, "v4x2_none"),
    "v4x2_kernel_trace": ("v4x2", KERNEL, {}, "v4x2_none"),
    "v4x2_multi_gpu": ("v4x2", MULTI, {}, "v4x2_none"),
    "v4x2_torch": ("v4x2", KERNEL, {"MADENGINE_ROCPROF_TRACER_BACKEND": "torch"}, "v4x2_none"),
    "v1x2_none": ("v1x2", None, {}, "v1x2_none"),
    "v1x2_kernel_trace": ("v1x2", KERNEL, {}, "v1x2_none"),
}
RANKS = {"v4x2": 2, "v1x2": 2}  # workloads run under torchrun, and on how many ranks
DIAGNOSTICS = ("lightweight_activity", "cupti_floor_kernel", "cupti_floor_api", "cupti_floor_kernel_late",
               "cupti_floor_kernel_off", "cupti_floor_api_at_torch", *(v for v in VARIANTS if "x2" in v))
DEFAULT = [v for v in VARIANTS if v not in DIAGNOSTICS]
WORKLOAD = {"v1": ["--version", "v1", "--batch-size", "8", "--seq-len", "128", "--cuda-graphs", "off"],
            "v4": ["--version", "v4", "--batch-size", "8", "--seq-len", "128"]}
WORKLOAD["v4x2"], WORKLOAD["v1x2"] = WORKLOAD["v4"], WORKLOAD["v1"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="processes per variant, alternating (default 4)")
    p.add_argument("--steps", type=int, default=60, help="timed steps per process (default 60)")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps per process (default 5)")
    p.add_argument("--out", required=True, help="folder for runs.jsonl, results.jsonl and the traces")
    p.add_argument("--variants", default=",".join(DEFAULT), help=f"comma list of {', '.join(VARIANTS)}")
    p.add_argument("--deadline-s", type=float, default=0, help="start no round after this many seconds (0: none)")
    p.add_argument("--keep-traces", action="store_true", help="keep the trace folders (default: counted, deleted)")
    p.add_argument("--full-write", action="store_true", help="let every process write its trace (default: the last"
                   " round's only; other processes are stopped once the harness has written its result)")
    p.add_argument("--baseline-every", type=int, default=3, help="an untraced run after every N traced runs (3)")
    p.add_argument("--python", default=sys.executable, help="the Python that runs the harness")
    p.add_argument("--commit", default=os.environ.get("MRT_COMMIT", ""), help="commit measured (default: git)")
    p.add_argument("--pool", nargs="+", default=[], metavar="RUNS_JSONL",
                   help="run nothing: summarize saved runs.jsonl files of several calls on one kind of machine (each"
                   " with its results.jsonl beside it, named *_runs.jsonl / *_results.jsonl or runs/results.jsonl)")
    p.add_argument("--base-repo", default="", help="another checkout: a variant named NAME@base runs its wrapper"
                   " and tracer (before/after comparisons in the same rounds)")
    args = p.parse_args(argv)
    if args.pool:
        args.variants = []
        return args
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.variants
               if v.split("@")[0] not in VARIANTS or (v.endswith("@base") and not args.base_repo)]
    if unknown:
        p.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    for v in list(args.variants):  # every variant needs its baseline in the same rounds
        base = VARIANTS[v.split("@")[0]][3]
        if base not in args.variants:
            args.variants.insert(0, base)
    if args.rounds < 1 or args.steps < 1:
        p.error("--rounds and --steps must be at least 1")
    return args


def command(variant: str, args, trace_dir: str, json_out: str) -> tuple[list[str], dict[str, str]]:
    """The argument list and environment of one process of `variant`."""
    workload, flags, extra, _ = VARIANTS[variant.split("@")[0]]
    repo = os.path.abspath(args.base_repo) if variant.endswith("@base") else REPO
    launch = [args.python] if workload not in RANKS else [
        args.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(RANKS[workload])]
    harness = [*launch, HARNESS, *WORKLOAD[workload], "--num-steps", str(args.steps), "--warmup-steps",
               str(args.warmup), "--json-out", json_out]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env.pop("MADENGINE_ROCPROF_TRACER_OUT", None)
    if "MRT_FLOOR_KINDS" in extra:
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "floor"), repo, env.get("PYTHONPATH", "")])
    if flags is None:
        return harness, env
    wrapper = ["bash", os.path.join(repo, "scripts", "rocprof_wrapper.sh"), "--profile", "lightweight", *flags,
               "--output-format", "csv", "-d", trace_dir, "-o", "%hostname%/%pid%", "--", *harness]
    return wrapper, env


def trace_counts(trace_dir: str) -> dict:
    """Kernel and API rows, dropped records and the API recorder, from what the tracer wrote."""
    out: dict = {}
    kernels = glob.glob(os.path.join(trace_dir, "**", "*kernel_trace.csv"), recursive=True)
    apis = glob.glob(os.path.join(trace_dir, "**", "*hip_api_trace.csv"), recursive=True)
    summaries = glob.glob(os.path.join(trace_dir, "**", "*tracer_summary.json"), recursive=True)
    if kernels:
        out["kernel_rows"] = sum(_rows(p) for p in kernels)
        if len(kernels) > 1:  # one file per process: per rank under torchrun
            out["kernel_rows_per_file"] = {os.path.relpath(p, trace_dir): _rows(p) for p in sorted(kernels)}
            out["kernels_by_name_per_file"] = {os.path.relpath(p, trace_dir): _names(p) for p in sorted(kernels)}
    if apis:
        out["api_rows"] = sum(_rows(p) for p in apis)
    for path in summaries:
        with open(path, encoding="utf-8") as fh:
            s = json.load(fh)
        for key in ("backend", "dropped_records", "api_recorder", "api_records_lost", "buffers", "buffer_handling"):
            if key in s:
                out[key] = s[key]
    return out


def _names(path: str) -> dict[str, int]:
    """Dispatches per kernel name of one kernel_trace.csv."""
    counts: dict[str, int] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            name = row.get("Kernel_Name") or row.get("KernelName") or ""
            counts[name] = counts.get(name, 0) + 1
    return counts


def _rows(path: str) -> int:
    with open(path, newline="", encoding="utf-8") as fh:
        return max(0, sum(1 for _ in csv.reader(fh)) - 1)


def run_one(variant: str, rnd: int, seq: int, args, full_write: bool) -> dict:
    """One process. Unless full_write, it is stopped (with its wrapper) once the harness has written its result: the
    timed steps are over by then, and the trace the tracer writes at exit is counted in full-write rounds only."""
    name = f"{seq:03d}_{variant}_r{rnd}".replace("@", "-")
    trace_dir = os.path.join(args.out, "traces", name)
    json_out = os.path.join(args.out, "harness", name + ".json")
    os.makedirs(os.path.dirname(json_out), exist_ok=True)
    cmd, env = command(variant, args, trace_dir, json_out)
    t0 = time.monotonic()
    err_path = os.path.join(args.out, "harness", name + ".stderr")
    with open(err_path, "w", encoding="utf-8") as err:
        child = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
                                 start_new_session=True)
        stopped = False
        while child.poll() is None:
            if not full_write and os.path.exists(json_out):
                time.sleep(0.2)  # the harness renames its result into place; let it print and flush
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                stopped = True
                break
            time.sleep(0.1)
        rc = child.wait()
    with open(err_path, encoding="utf-8", errors="replace") as fh:
        stderr = fh.read()
    row: dict = {"variant": variant, "round": rnd, "seq": seq, "rc": 0 if stopped else rc,
                 "seconds": round(time.monotonic() - t0, 2), "full_write": not stopped}
    try:
        with open(json_out, encoding="utf-8") as fh:
            result = json.load(fh)
        step = result["metrics"]["step_time_ms"]
        row.update(step_ms=step["median"], step_p10_ms=step.get("p10"),
                   end_to_end_s=result["metrics"].get("end_to_end_seconds"))
        row["harness_versions"] = result.get("versions")
        row["harness_device"] = result.get("device")
    except (OSError, KeyError, ValueError) as exc:
        row["error"] = f"no harness result ({exc!r}); stderr: {stderr[-600:]}"
    if not stopped:
        row.update(trace_counts(trace_dir))
    notes = [line for line in stderr.splitlines() if "tracer" in line or "error" in line.lower()]
    if notes:
        row["stderr_notes"] = notes[-4:]
    if not args.keep_traces:
        shutil.rmtree(trace_dir, ignore_errors=True)
    return row


def workload_base(variant: str) -> str:
    return VARIANTS[variant.split("@")[0]][3]


def schedule(variants: list[str], rounds: int, every: int) -> list[tuple[str, int]]:
    """(variant, round) in running order. Each round runs every traced variant once, rotated by one each round; the
    v1 baseline runs after every `every` traced runs (and first), so each traced run has an untraced neighbour on
    both sides; the v4 pair runs mid-round, in alternating order."""
    v1 = [v for v in variants if workload_base(v) == "none" and v != "none"]
    v4 = [v for v in variants if workload_base(v) == "v4_none" and v != "v4_none"]
    seq: list[tuple[str, int]] = []
    for r in range(rounds):
        k = r % len(v1) if v1 else 0
        order = v1[k:] + v1[:k]
        pair = (["v4_none"] if "v4_none" in variants else []) + v4
        if r % 2:
            pair.reverse()
        half = (len(order) + 1) // 2
        chunks = [order[i:i + every] for i in range(0, len(order), every)] or [[]]
        if "none" in variants and (not seq or seq[-1][0] != "none"):
            seq.append(("none", r))
        done = 0
        for chunk in chunks:
            seq += [(v, r) for v in chunk]
            done += len(chunk)
            if pair and done >= half:
                seq += [(v, r) for v in pair]
                pair = []
            if "none" in variants and chunk:
                seq.append(("none", r))
        seq += [(v, r) for v in pair]
        for base in dict.fromkeys(workload_base(v) for v in variants):  # other workloads (2 ranks): their own block
            if base in ("none", "v4_none"):
                continue
            traced = [v for v in variants if workload_base(v) == base and v != base]
            k = r % len(traced) if traced else 0
            block = [base] + traced[k:] + traced[:k]
            seq += [(v, r) for v in (block if r % 2 == 0 else block[::-1])]
    return seq


def overheads(runs: list[dict]) -> None:
    """Adds overhead_pct to each traced run: its median step over the mean of the nearest successful untraced run
    of its workload before it and after it."""
    ok = [r for r in runs if "step_ms" in r]
    for i, r in enumerate(ok):
        base = workload_base(r["variant"])
        if r["variant"] == base:
            continue
        before = next((b for b in reversed(ok[:i]) if b["variant"] == base), None)
        after = next((b for b in ok[i + 1:] if b["variant"] == base), None)
        near = [b["step_ms"] for b in (before, after) if b is not None]
        if near:
            r["baseline_ms"] = statistics.mean(near)
            r["overhead_pct"] = 100.0 * (r["step_ms"] / r["baseline_ms"] - 1)


def best_over_best(runs: list[dict]) -> dict[str, float]:
    """{variant: percent of its fastest process over the fastest untraced process of its workload}, for the runs of
    one call. Interference on a shared machine only adds time, so each variant's fastest process is its least
    disturbed one: this figure repeats across calls where the neighbour ratio of `overheads` swings by 10-30 points
    (an untraced neighbour that ran slow makes a traced process look cheap)."""
    best: dict[str, float] = {}
    for r in runs:
        if "step_ms" in r:
            best[r["variant"]] = min(best.get(r["variant"], float("inf")), r["step_ms"])
    return {v: 100.0 * (ms / best[workload_base(v)] - 1) for v, ms in best.items()
            if v != workload_base(v) and workload_base(v) in best}


def spread(values: list[float]) -> dict:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3),
            "n": len(values)}


def summarize(runs: list[dict], args, meta: dict) -> list[dict]:
    rows = []
    for variant in args.variants:
        mine = [r for r in runs if r["variant"] == variant and "step_ms" in r]
        if not mine:
            continue
        base = workload_base(variant)
        over = [r["overhead_pct"] for r in mine if "overhead_pct" in r]
        calls = list(dict.fromkeys(r.get("call", 0) for r in runs))
        best = [b[variant] for b in (best_over_best([r for r in runs if r.get("call", 0) == c]) for c in calls)
                if variant in b]
        written = [r for r in mine if r.get("full_write")]
        checks = {key: sorted({json.dumps(r.get(key)) for r in written if key in r})
                  for key in ("kernel_rows", "api_rows", "dropped_records", "api_recorder", "backend",
                              "buffer_handling")}
        workload, flags, extra, _ = VARIANTS[variant.split("@")[0]]
        shown = ["bash", "scripts/rocprof_wrapper.sh", "--profile", "lightweight", *flags, "--output-format", "csv",
                 "-d", "OUT", "-o", "%hostname%/%pid%", "--"] if flags else []
        shown += ["python3", "scripts/tinytransformer/tt_harness.py", *WORKLOAD[workload], "--num-steps",
                  str(args.steps), "--warmup-steps", str(args.warmup)]
        env_text = " ".join(f"{k}={v}" for k, v in extra.items())
        if "MRT_FLOOR_KINDS" in extra:
            env_text = "PYTHONPATH=benchmarks/tracer/floor:. " + env_text
        rows.append({
            "area": "tracer", "case": f"product_path/{variant}",
            "figures": {"step_ms": spread([r["step_ms"] for r in mine]),
                        "overhead_pct": spread(over) if over else None,
                        "overhead_best_pct": spread(best) if best else None},
            "rounds": len(mine), "calls": len(calls), "baseline": base,
            "checks": {k: [json.loads(x) for x in v] for k, v in checks.items() if v},
            "device": meta["device"], "versions": meta["versions"], "commit": meta["commit"],
            "command": (env_text + " " if env_text else "") + " ".join(shown),
            "benchmark": meta.get("benchmark") or
                         f"python3 benchmarks/tracer/product_path.py --rounds {args.rounds} --steps {args.steps}"
                         f" --variants {','.join(args.variants)} --out DIR",
            "date": meta["date"]})
    return rows


def metadata(args, runs: list[dict]) -> dict:
    versions: dict = {"python": platform.python_version()}
    first = next((r for r in runs if r.get("harness_versions")), {})
    for key, value in (first.get("harness_versions") or {}).items():
        if isinstance(value, str | int | float):
            versions[key] = value
    try:
        from importlib import metadata as m

        versions["cupti-python"] = m.version("cupti-python")
        versions["nvidia-cuda-cupti"] = m.version("nvidia-cuda-cupti")
    except Exception:  # noqa: BLE001 - not installed: the row says so
        versions.setdefault("cupti-python", None)
    device = "unknown"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False, timeout=30)
        name, driver = (smi.stdout.strip().splitlines() or [""])[0].split(",", 1)
        device = f"{name.strip()}, driver {driver.strip()}"
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    commit = args.commit
    if not commit:
        git = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=False)
        commit = git.stdout.strip() or "unknown"
    return {"device": device, "versions": versions, "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def table(rows: list[dict]) -> str:
    lines = [f"{'variant':30s} {'rounds':>6s} {'step ms min/med/max':>24s} {'overhead % min/med/max':>24s}"
             f" {'best/best % min/med/max':>24s}  checks"]
    for r in rows:
        s, o, b = r["figures"]["step_ms"], r["figures"]["overhead_pct"], r["figures"].get("overhead_best_pct")
        otext, btext = (f"{x['min']:+.1f}/{x['median']:+.1f}/{x['max']:+.1f}" if x else "-" for x in (o, b))
        lines.append(f"{r['case'].split('/', 1)[1]:30s} {r['rounds']:6d} "
                     f"{s['min']:7.2f}/{s['median']:7.2f}/{s['max']:7.2f} {otext:>24s} {btext:>24s}"
                     f"  {json.dumps(r['checks'])}")
    return "\n".join(lines)


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


META_KEYS = ("device", "versions", "commit", "date")


def pool(args) -> int:
    """Rows over several calls' saved runs: per-process figures pooled, best/best once per call. A line names its
    call and machine (`call`, `device`, ...: the consolidated files in results/), or a runs.jsonl straight from a
    call has its results.jsonl beside it."""
    runs: list[dict] = []
    metas: dict[str, dict] = {}
    for path in args.pool:
        with open(path, encoding="utf-8") as fh:
            lines = [json.loads(line) for line in fh if line.strip()]
        if lines and not all(k in lines[0] for k in ("call", *META_KEYS)):
            with open(path[:-len("runs.jsonl")] + "results.jsonl", encoding="utf-8") as fh:
                first = json.loads(fh.readline())
            lines = [{"call": path, **{k: first[k] for k in META_KEYS}, **r} for r in lines]
        runs += lines
    for call in dict.fromkeys(r["call"] for r in runs):
        mine = [r for r in runs if r["call"] == call]
        overheads(mine)
        metas[call] = {k: mine[0].get(k) for k in META_KEYS}
    for r in runs:
        if r["variant"] not in args.variants:
            args.variants.append(r["variant"])
    devices = {json.dumps(r.get("device")) for r in runs}
    if len(devices) != 1:
        print(f"--pool: the calls ran on different machines ({'; '.join(sorted(map(str, devices)))}): pool one kind"
              " only", file=sys.stderr)
        return 2
    last = list(metas.values())[-1]
    meta = {**last, "commit": ", ".join(dict.fromkeys(str(m["commit"]) for m in metas.values())),
            "benchmark": "python3 benchmarks/tracer/product_path.py --pool " + " ".join(args.pool) + " --out DIR"}
    args.variants.sort(key=lambda v: (v != workload_base(v), v))
    rows = summarize(runs, args, meta)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.jsonl"), "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    print(table(rows))
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.pool:
        return pool(args)
    os.makedirs(args.out, exist_ok=True)
    plan = schedule(args.variants, args.rounds, args.baseline_every)
    runs: list[dict] = []
    t0 = time.monotonic()
    signal.signal(signal.SIGTERM, _interrupt)  # a time limit still leaves the rows of the runs made so far
    with contextlib.suppress(KeyboardInterrupt), \
            open(os.path.join(args.out, "runs.jsonl"), "a", encoding="utf-8") as log:
        for seq, (variant, rnd) in enumerate(plan):
            if args.deadline_s and time.monotonic() - t0 > args.deadline_s and (seq == 0 or plan[seq - 1][1] != rnd):
                print(f"deadline: stopped before round {rnd}", file=sys.stderr)
                break
            full = args.full_write or rnd == args.rounds - 1
            row = run_one(variant, rnd, seq, args, full)
            runs.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(f"round {rnd} {variant}: {row.get('step_ms', 'FAILED')} ms, rc {row['rc']},"
                  f" {row['seconds']} s", file=sys.stderr, flush=True)
    overheads(runs)
    with open(os.path.join(args.out, "runs.jsonl"), "w", encoding="utf-8") as log:
        for row in runs:
            log.write(json.dumps(row) + "\n")
    rows = summarize(runs, args, metadata(args, runs))
    with open(os.path.join(args.out, "results.jsonl"), "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    print(table(rows))
    return 0 if all(r["rc"] == 0 and "step_ms" in r for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
