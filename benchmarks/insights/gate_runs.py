"""Real repeated runs for the gate's tests: TinyTransformer v1 on the CPU under the embedded tracer, base = the tiny
config (2 layers), new = the same with 3x the layers (6), alternating A B A B A B (3 runs a side) per chunk.

- `loaded` chunks: K busy-loop processes run beside the workload (on top of whatever else loads the machine), so
  the step times spread widely within and between runs: the gate must not say passed.
- `quiet` chunks: no added load: the slowdown must be caught (regression) in every chunk.

    PYTHONPATH=. python benchmarks/insights/gate_runs.py --out /tmp/gate/runs [--loaded 1] [--quiet 3] [--busy 3]
        [--steps 10] [--threads N] [--nice N] [--first N]

On a machine that others load, `--threads 1 --nice -5` (one torch thread, a higher priority: root only) gives the
`quiet` chunks the low load they are meant to have; `--first` numbers the chunks (to add chunks to an OUT).

Each run is aa_gate.make_run (`madengine-rocprof wrap --kernel-trace --stats -- python tt_harness.py --version v1
--device cpu ...`). `--trim DEST` copies what `compare` needs into a fixture tree: workload_result.json (the step times)
and the top 15 rows by total time of the per-operator statistics CSV (the 4 MB per-dispatch trace, the Perfetto
file, the manifest and the tracer summary are left out). Each chunk's runs_log_*.json names the load average seen by
each run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_gate import make_run  # type: ignore[import-not-found]  # noqa: E402

A = ["--tiny"]
B = ["--tiny", "--num-layers", "6"]  # 3x the tiny config's 2 layers
KEEP_STATS_ROWS = 15  # --trim: compare's default picks the base's top 10 (the rest would only dilute the shares)


def chunk(out: Path, name: str, busy: int, steps: int, log: dict) -> None:
    loaders = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        for i, kind in enumerate("ABABAB"):
            run = out / name / ("base" if kind == "A" else "new") / f"r{i}"
            wall = make_run(run, "cpu", A if kind == "A" else B, steps)
            log[f"{name}/{run.parent.name}/{run.name}"] = {"wall_s": round(wall, 2), "busy_loops": busy,
                                                            "loadavg_1min": os.getloadavg()[0]}
            print(f"{name} {kind} r{i}: {wall:.1f} s load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for p in loaders:
            p.kill()
            p.wait()


def trim(src: Path, dest: Path) -> None:
    for wr in sorted(src.rglob("workload_result.json")):
        run = wr.parent
        target = dest / run.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(wr, target / "workload_result.json")
        (target / "workload_result.json").chmod(0o644)
        for f in run.glob("profiler/**/*_kernel_stats.csv"):  # the top rows by total time: what compare picks
            lines = f.read_text().splitlines(keepends=True)
            rows = sorted(lines[1:], key=lambda line: -float(next(csv.reader([line]))[2]))[:KEEP_STATS_ROWS]
            (target / f.relative_to(run)).parent.mkdir(parents=True, exist_ok=True)
            (target / f.relative_to(run)).write_text(lines[0] + "".join(rows))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--loaded", type=int, default=1)
    p.add_argument("--quiet", type=int, default=3)
    p.add_argument("--busy", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, help="OMP_NUM_THREADS for the workload (default: torch's own)")
    p.add_argument("--nice", type=int, default=0, help="added to this process's niceness (runs inherit it)")
    p.add_argument("--first", type=int, default=0, help="number of the first chunk of each kind")
    p.add_argument("--trim", type=Path, help="copy the runs of OUT, trimmed, to this fixture directory and stop")
    args = p.parse_args()
    if args.trim:
        trim(args.out, args.trim)
        return 0
    log: dict = {"command": " ".join(["python benchmarks/insights/gate_runs.py", *sys.argv[1:]]),
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": {}}
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.nice:
        os.nice(args.nice)
    log.update(threads=args.threads, nice=args.nice)
    names = ([f"loaded{c}" for c in range(args.first, args.first + args.loaded)]
             + [f"quiet{c}" for c in range(args.first, args.first + args.quiet)])
    for name in names:
        chunk(args.out, name, args.busy if name.startswith("loaded") else 0, args.steps, log["runs"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"runs_log_{names[0]}.json").write_text(json.dumps(log, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
