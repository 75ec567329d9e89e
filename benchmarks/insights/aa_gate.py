"""A/A test of `compare --gate` on real repeated runs of TinyTransformer v1 under the embedded tracer (CPU or GPU).

Runs come in chunks of 6, made one after another:
- AA chunks: 6 identical runs of the tiny CPU config (A). Base and new alternate in time (base = runs 0, 2, 4;
  new = 1, 3, 5), as a CI job on a shared runner should make them; both directions are compared, with 3 and 2 runs
  per side (exit 1 is a false positive), 1 run per side (exit 2 expected: nothing can be judged), and one new run
  against the base's 3 (exit 2 expected since issue 33: a side needs 2 runs; before, the base's runs lent the single
  run their spread). For contrast, base = runs 0-2 and new = runs 3-5
  (consecutive blocks: a change of the machine's load between them is a real difference the gate sees).
- AB chunks: A and a bigger config B (larger batch and sequence: a real slowdown) alternating: A B A B A B. B as
  new must fail the gate (power); A as new must pass.
Each run is `madengine-rocprof wrap --kernel-trace --stats -d RUN/profiler -- python tt_harness.py --version v1
--device DEVICE ... --json-out RUN/workload_result.json`; every comparison runs `compare BASE NEW --gate` with
the default threshold (5%) and confidence (95%), for --statistic mean and median.
  --device cpu (default): A = the tiny CPU config at batch 4, seq 32; B = batch 8, seq 64 (4x the tokens).
  --device cuda: A = the product path's eager config, batch 8, seq 128; B = batch 32, seq 256 (8x the tokens).

    python benchmarks/insights/aa_gate.py --out runs/aa [--device cpu|cuda] [--aa-chunks 6] [--ab-chunks 4]
        [--steps 10] [--reuse]
Prints a summary; writes OUT/aa_summary.json and OUT/rows.jsonl (one benchmark row per comparison kind and
statistic: `python -m benchmarks add --case gate.false-positives-and-power OUT/rows.jsonl` for a GPU machine's).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from madengine_rocprof.cli import main

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "scripts" / "tinytransformer" / "tt_harness.py"
CONFIGS = {  # device: (A, B)
    "cpu": (["--tiny", "--batch-size", "4", "--seq-len", "32"],  # the harness's tiny CPU config
            ["--tiny", "--batch-size", "8", "--seq-len", "64"]),  # 4x the tokens per step
    "cuda": (["--batch-size", "8", "--seq-len", "128", "--cuda-graphs", "off"],  # the product path's config
             ["--batch-size", "32", "--seq-len", "256", "--cuda-graphs", "off"]),  # 8x the tokens per step
}


def make_run(run: Path, device: str, config: list[str], steps: int) -> float:
    """One profiled run; returns its wall time."""
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True)
    cmd = [
        sys.executable, "-m", "madengine_rocprof", "wrap", "--kernel-trace", "--stats", "-d", str(run / "profiler"),
        "--", sys.executable, str(HARNESS), "--version", "v1", "--device", device, *config,
        "--num-steps", str(steps), "--warmup-steps", "2", "--json-out", str(run / "workload_result.json"),
    ]
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=run)
    (run / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}): {run}/run.log")
    return time.monotonic() - start


def link_sides(base: list[Path], new: list[Path], scratch: Path) -> tuple[Path, Path]:
    """Two groups of runs as SCRATCH/base and SCRATCH/new (hard links: compare does not follow symbolic links into
    run directories)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    for side, runs in (("base", base), ("new", new)):
        for run in runs:
            shutil.copytree(run, scratch / side / run.name, copy_function=os.link)
    return scratch / "base", scratch / "new"


def gate(base: list[Path], new: list[Path], scratch: Path, extra: list[str]) -> tuple[int, dict | None]:
    """`compare --gate` of two groups of runs; the exit code and the JSON."""
    base_dir, new_dir = link_sides(base, new, scratch)
    out = scratch / "cmp.json"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["compare", str(base_dir), str(new_dir), "--gate", "-q", "--json", str(out), *extra])
    return code, json.loads(out.read_text()) if out.exists() else None


def tally(codes: list[int]) -> dict:
    return {"comparisons": len(codes), "exit_0": codes.count(0), "exit_1": codes.count(1), "exit_2": codes.count(2)}


def rows(summary: dict) -> list[dict]:
    """One benchmark row (the figures in `python -m benchmarks`' form) per statistic and comparison kind: how often
    the gate failed (exit 1), which is the false-positive rate for A/A and the power for a slowdown."""
    out = []
    for statistic, results in summary["results"].items():
        for kind, counts in results.items():
            if not isinstance(counts, dict) or not counts.get("comparisons"):
                continue
            what = "power: slowdown caught" if kind.startswith("slowdown") else "false-positive rate"
            failed = counts["exit_1"]
            figures = [{"name": "gate failed (exit 1)", "unit": "comparisons",
                        "value": f"{failed} of {counts['comparisons']}"},
                       {"name": what, "unit": "%", "value": round(100.0 * failed / counts["comparisons"], 1)},
                       {"name": "passed (exit 0)", "unit": "comparisons", "value": counts["exit_0"]},
                       {"name": "inconclusive or not judged (exit 2)", "unit": "comparisons",
                        "value": counts["exit_2"]}]
            out.append({"variant": f"{kind}, {statistic}", "figures": figures, "steps": summary.get("steps"),
                        **{k: summary[k] for k in ("device", "versions", "commit", "date") if k in summary}})
    return out


def environment(device: str, first_run: Path) -> dict:
    """device, versions, commit and date for the rows, as the first run's workload_result.json names its device and
    versions (runs made on a GPU machine can be compared here with --reuse; their rows are added with `add --case`)."""
    import datetime

    result = json.loads((first_run / "workload_result.json").read_text())
    name = result["device"]["name"] if device == "cuda" else f"CPU only ({os.cpu_count()} cores)"
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    return {"device": {"name": name}, "versions": dict(result.get("versions") or {}), "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def layout(out: Path, aa_chunks: int, ab_chunks: int) -> list[tuple[str, list[Path]]]:
    """The chunks' kinds and run directories, in the order they are made."""
    chunks: list[tuple[str, list[Path]]] = []
    for c in range(aa_chunks + ab_chunks):
        # alternate the chunk kinds so that a drift of the machine's load hits both
        kind = "AB" if c % 2 == 1 and c // 2 < ab_chunks else "AA"
        if kind == "AA" and sum(k == "AA" for k, _ in chunks) >= aa_chunks:
            kind = "AB"
        names = ["A", "B"] * 3 if kind == "AB" else ["A"] * 6
        chunks.append((kind, [out / f"c{c:02d}_{kind}" / f"r{i}_{n}" for i, n in enumerate(names)]))
    return chunks


def comparisons(chunks: list[tuple[str, list[Path]]]) -> Iterator[tuple[str, str, list[Path], list[Path]]]:
    """(kind of comparison, chunk, base runs, new runs) for every comparison the design makes."""
    for kind, r in chunks:
        chunk = r[0].parent.name
        if kind == "AA":
            for base, new in (([r[0], r[2], r[4]], [r[1], r[3], r[5]]), ([r[0], r[2]], [r[1], r[3]]),
                              ([r[0]], [r[1]])):
                yield f"aa_alternating_{len(base)}_per_side", chunk, base, new
                yield f"aa_alternating_{len(base)}_per_side", chunk, new, base
            yield "aa_consecutive_3_per_side", chunk, r[:3], r[3:]
            yield "aa_consecutive_3_per_side", chunk, r[3:], r[:3]
            yield "aa_base3_vs_single_run", chunk, [r[0], r[2], r[4]], [r[1]]
        else:
            a_runs, b_runs = [r[0], r[2], r[4]], [r[1], r[3], r[5]]
            yield "slowdown_3_per_side", chunk, a_runs, b_runs
            yield "slowdown_2_per_side", chunk, a_runs[:2], b_runs[:2]
            yield "slowdown_base3_vs_single_run", chunk, a_runs, b_runs[:1]
            yield "speedup_3_per_side", chunk, b_runs, a_runs


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--aa-chunks", type=int, default=6, help="chunks of 6 identical runs (default 6)")
    parser.add_argument("--ab-chunks", type=int, default=4, help="chunks of A B A B A B runs (default 4)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per run (default 10)")
    parser.add_argument("--device", choices=sorted(CONFIGS), default="cpu", help="where the runs run (default cpu)")
    parser.add_argument("--reuse", action="store_true", help="reuse the runs already in OUT (only re-compare)")
    args = parser.parse_args()
    out = args.out.resolve()
    chunks = layout(out, args.aa_chunks, args.ab_chunks)
    walls: dict[str, float] = {}
    if not args.reuse:
        for _, runs in chunks:
            for run in runs:
                config = CONFIGS[args.device][1 if run.name.endswith("_B") else 0]
                walls[f"{run.parent.name}/{run.name}"] = make_run(run, args.device, config, args.steps)
                print(f"{run.parent.name}/{run.name}: {walls[f'{run.parent.name}/{run.name}']:.1f} s", flush=True)
    scratch = out / "_compare"
    summary: dict = {
        "command": " ".join(["python benchmarks/insights/aa_gate.py", *sys.argv[1:]]),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "load_avg_at_compare": os.getloadavg()},
        "config_a": CONFIGS[args.device][0], "config_b": CONFIGS[args.device][1], "steps": args.steps,
        "run_wall_s": walls, "results": {}, **environment(args.device, chunks[0][1][0]),
    }
    for statistic in ("mean", "median"):
        extra = ["--statistic", statistic]
        codes: dict[str, list[int]] = {}
        flagged: list = []
        for key, chunk, base, new in comparisons(chunks):
            code, result = gate(base, new, scratch, extra)
            codes.setdefault(key, []).append(code)
            if code == 1 and result and key.startswith("aa"):
                flagged.append([key, chunk, result["gate"]["regressions"]])
        summary["results"][statistic] = {key: tally(v) for key, v in codes.items()} | {"aa_flagged": flagged}
    shutil.rmtree(scratch, ignore_errors=True)
    (out / "aa_summary.json").write_text(json.dumps(summary, indent=1, allow_nan=False) + "\n")
    (out / "rows.jsonl").write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in rows(summary)))
    print(json.dumps(summary["results"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
