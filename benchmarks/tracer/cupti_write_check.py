"""GPU check of the CUPTI backend's trace writing (issues 25/26 item 5): one traced run through the wrapper, then the
time from the window's close to the files written, the rows, and checks that the Chrome trace loads and matches.

    python3 benchmarks/tracer/cupti_write_check.py [--steps 60] [--out DIR] [--timeout-s 240]

Runs, as benchmarks/tracer/product_path.py's lightweight_interpose variant does (eager v1 B8 S128):
    bash scripts/rocprof_wrapper.sh --profile lightweight --kernel-trace --hip-trace --stats --output-format csv \
        -d OUT -o %hostname%/%pid% -- python3 scripts/tinytransformer/tt_harness.py --version v1 --batch-size 8 \
        --seq-len 128 --cuda-graphs off --num-steps 60
then reads what the tracer wrote: tracer_summary.json's write_seconds (measured in the process: stop, Chrome
trace, rows), the CSV row counts, and <pid>_perfetto_trace.json through json.load (its events per category must
equal the CSV rows) and through convert's fast reader (which must accept it without falling back to json).
Also measured from outside: seconds from the harness's result file to the process's exit (the tracer writes at
exit). Prints a summary and one JSON line; writes OUT/cupti_write_check.json. Exit 0 when every check passes,
1 when one fails, 2 when the run produced no trace. Needs a CUDA GPU with torch and cupti-python.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from madengine_rocprof.tracer import convert  # noqa: E402

API_CATS = ("cuda_runtime", "cuda_driver")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=60, help="optimizer steps of the harness (default 60)")
    p.add_argument("--out", default="", help="output folder (default: a new temporary folder, kept)")
    p.add_argument("--timeout-s", type=float, default=240, help="give up on the run after this (default 240)")
    p.add_argument("--python", default=sys.executable, help="Python for the harness (default: this one)")
    return p.parse_args(argv)


def rows(path: str) -> int:
    with open(path, newline="", encoding="utf-8") as fh:
        return max(0, sum(1 for _ in csv.reader(fh)) - 1)


def run(args, out: str) -> dict:
    trace_dir = os.path.join(out, "trace")
    result = os.path.join(out, "harness.json")
    cmd = ["bash", os.path.join(REPO, "scripts", "rocprof_wrapper.sh"), "--profile", "lightweight", "--kernel-trace",
           "--hip-trace", "--stats", "--output-format", "csv", "-d", trace_dir, "-o", "%hostname%/%pid%", "--",
           args.python, os.path.join(REPO, "scripts", "tinytransformer", "tt_harness.py"), "--version", "v1",
           "--batch-size", "8", "--seq-len", "128", "--cuda-graphs", "off", "--num-steps", str(args.steps),
           "--json-out", result]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("MADENGINE_ROCPROF_TRACER_OUT", None)
    t0 = time.time()
    with open(os.path.join(out, "run.stderr"), "w", encoding="utf-8") as err:
        child = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
                                 start_new_session=True)  # its own group: a time-out stops the harness too
        try:
            rc: int | str = child.wait(timeout=args.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            rc = "timeout"
    t_exit = time.time()
    info: dict = {"rc": rc, "run_s": round(t_exit - t0, 2), "trace_dir": trace_dir}
    if os.path.exists(result):
        info["result_to_exit_s"] = round(t_exit - os.path.getmtime(result), 2)
        try:
            with open(result, encoding="utf-8") as fh:
                info["step_ms"] = json.load(fh)["metrics"]["step_time_ms"]["median"]
        except (OSError, KeyError, ValueError):
            pass
    return info


def fast_reader_accepts(path: str) -> bool:
    """True when convert's regex reader reads the file without falling back to the JSON parser."""
    fell_back = []
    real = convert._read_generic

    def generic(p, cpu):
        fell_back.append(p)
        return real(p, cpu)

    convert._read_generic = generic
    try:
        convert.read_kineto(path, cpu=False)
    finally:
        convert._read_generic = real
    return not fell_back


def check(trace_dir: str) -> dict:
    summaries = glob.glob(os.path.join(trace_dir, "**", "*_tracer_summary.json"), recursive=True)
    if not summaries:
        return {}
    summary_path = max(summaries, key=os.path.getsize)  # the training process (a launcher writes none)
    prefix = summary_path[: -len("tracer_summary.json")]
    with open(summary_path, encoding="utf-8") as fh:
        summary = json.load(fh)
    out: dict = {k: summary.get(k) for k in ("backend", "trace_writer", "api_recorder", "buffer_handling",
                                             "dropped_records", "records", "write_seconds", "kernel_rows")}
    out["kernel_csv_rows"] = rows(prefix + "kernel_trace.csv") if os.path.exists(prefix + "kernel_trace.csv") else 0
    out["api_csv_rows"] = rows(prefix + "hip_api_trace.csv") if os.path.exists(prefix + "hip_api_trace.csv") else 0
    chrome = prefix + "perfetto_trace.json"
    out["json_mb"] = round(os.path.getsize(chrome) / 1e6, 1) if os.path.exists(chrome) else None
    checks: dict[str, bool] = {"backend_cupti": summary.get("backend") == "cupti",
                               "chrome_trace_exists": os.path.exists(chrome)}
    if checks["chrome_trace_exists"]:
        t = time.perf_counter()
        try:
            with open(chrome, encoding="utf-8") as fh:
                trace = json.load(fh)
            checks["json_loads"] = True
        except ValueError as exc:
            trace, checks["json_loads"] = {}, False
            out["json_error"] = str(exc)[:300]
        out["json_load_s"] = round(time.perf_counter() - t, 2)
        cats: dict[str, int] = {}
        for e in trace.get("traceEvents", []):
            cats[e.get("cat")] = cats.get(e.get("cat"), 0) + 1
        out["events"] = cats
        checks["kernel_events_equal_rows"] = cats.get("kernel", 0) == out["kernel_csv_rows"] > 0
        checks["api_events_equal_rows"] = sum(cats.get(c, 0) for c in API_CATS) == out["api_csv_rows"] > 0
        t = time.perf_counter()
        checks["fast_reader_accepts"] = fast_reader_accepts(chrome)
        out["fast_read_s"] = round(time.perf_counter() - t, 2)
    checks["no_dropped_records"] = summary.get("dropped_records") == 0
    checks["native_writer"] = summary.get("trace_writer") == "native (C)"
    out["checks"] = checks
    seconds = summary.get("write_seconds") or {}
    records = sum((summary.get("records") or {}).values())
    if seconds:
        out["close_to_files_s"] = round(sum(seconds.values()), 3)
        out["records_per_s_chrome_trace"] = round(records / max(seconds.get("chrome_trace", 0), 1e-3))
        out["records_per_s_trace_and_rows"] = round(
            records / max(seconds.get("chrome_trace", 0) + seconds.get("rows", 0), 1e-3))
    return out


def preflight(python: str) -> str:
    """Why the run cannot trace with CUPTI here ("" when it can): checked before the minute the run takes."""
    code = ("import torch, sys\n"
            "if not torch.cuda.is_available(): sys.exit('torch sees no CUDA GPU')\n"
            "try:\n    from cupti import cupti\n"
            "except Exception as exc: sys.exit(f'cupti-python does not import ({exc!r}): pip install --no-index '"
            "'--find-links .whl cupti-python')\n")
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot start {python}: {exc}"
    return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def main(argv=None) -> int:
    args = parse_args(argv)
    why = preflight(args.python)
    if why:
        print(f"cupti_write_check: cannot run here: {why}", file=sys.stderr)
        return 2
    out = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="cupti_write_check_")
    os.makedirs(out, exist_ok=True)
    info = run(args, out)
    found = check(info["trace_dir"])
    report = {"check": "cupti_write", "steps": args.steps, **info, **found}
    try:
        report["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20, check=False).stdout.strip()
        report["commit"] = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                          text=True, timeout=20, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    with open(os.path.join(out, "cupti_write_check.json"), "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
    if not found:
        print(f"cupti_write_check: no tracer summary under {info['trace_dir']} (rc {info['rc']}); stderr:",
              file=sys.stderr)
        with open(os.path.join(out, "run.stderr"), encoding="utf-8", errors="replace") as fh:
            print(fh.read()[-3000:], file=sys.stderr)
        print(json.dumps(report))
        return 2
    checks = found.get("checks", {})
    w = found.get("write_seconds") or {}
    print(f"run: rc {info['rc']}, {info['run_s']} s, median step {info.get('step_ms')} ms, harness result to exit"
          f" {info.get('result_to_exit_s')} s")
    print(f"backend {found['backend']}, trace writer {found['trace_writer']}, API recorder {found['api_recorder']}")
    print(f"records {found['records']}, dropped {found['dropped_records']}")
    print(f"window close -> files: {found.get('close_to_files_s')} s (stop {w.get('stop')}, chrome trace"
          f" {w.get('chrome_trace')}, rows {w.get('rows')})")
    print(f"records/s: chrome trace {found.get('records_per_s_chrome_trace')}, chrome trace + rows"
          f" {found.get('records_per_s_trace_and_rows')}")
    print(f"rows: kernel {found['kernel_csv_rows']}, API {found['api_csv_rows']}; JSON {found.get('json_mb')} MB,"
          f" json.load {found.get('json_load_s')} s, events {found.get('events')}")
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'} {name}")
    print(json.dumps(report))
    print(f"files: {out}")
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
