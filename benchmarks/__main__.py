"""python -m benchmarks list | run CASE... | add FILE... | render [--check]  (see benchmarks/README.md)."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from benchmarks import environment, render
from benchmarks import rows as rowlib
from benchmarks.cases import CASES, Case, CaseFailed, Context, NotAvailable, rows_from_script_output

EXIT_BAD_INPUT = 2
NEEDS_TEXT = {"cpu": "any machine", "gpu": "a GPU (here: the device machine)", "docker": "a Docker engine"}


def list_cases(_args: argparse.Namespace) -> int:
    width = max(len(name) for name in CASES)
    for area in rowlib.AREAS:
        print(f"{area}:")
        for case in (c for c in CASES.values() if c.area == area):
            state = "" if case.script_path() else "  [not available: script missing]"
            print(f"  {case.name:<{width}}  needs {case.needs:<6}  {case.about}{state}")
    return 0


def select(names: list[str]) -> list[Case]:
    """Case names, or area names for every case of the area (those without their script are left out)."""
    chosen: list[Case] = []
    for name in names:
        if name in CASES:
            chosen.append(CASES[name])
        elif name in rowlib.AREAS:
            chosen += [c for c in CASES.values() if c.area == name and c.script_path()]
        else:
            raise SystemExit(f"benchmarks run: unknown case {name!r}; `python -m benchmarks list` shows the cases "
                             f"(areas: {', '.join(rowlib.AREAS)})")
    return list(dict.fromkeys(chosen))


def docker_answers() -> bool:
    import subprocess

    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def refusal(case: Case, smoke: bool) -> str | None:
    """Why `case` cannot run here (checked for every case before any runs), or None."""
    if case.script_path() is None:
        return f"{case.name}: not available in this checkout ({case.script or 'no script'} is missing). {case.about}"
    if case.needs == "gpu" and not smoke and not (environment.gpus() or environment.amd_gpu()):
        return (f"{case.name} needs {NEEDS_TEXT['gpu']}: no nvidia-smi and no /dev/kfd here. Run it there with the "
                "device tool (benchmarks/README.md, 'GPU cases') and bring the rows back with `python -m benchmarks "
                "add`.")
    if case.needs == "docker" and not docker_answers():
        return f"{case.name} needs {NEEDS_TEXT['docker']}: `docker info` fails (sudo bash scripts/setup.sh --docker)"
    return None


def suite_command(case: Case, args: argparse.Namespace) -> str:
    argv = ["python", "-m", "benchmarks", "run", case.name, "--rounds", str(args.rounds)]
    argv += ["--steps", str(args.steps)] if "steps" in case.options else []
    return shlex.join(argv)


def run_cases(args: argparse.Namespace) -> int:
    if args.rounds < 1 or args.steps < 1:
        print("benchmarks run: --rounds and --steps must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        cases = select(args.cases)
    except SystemExit as err:
        print(err, file=sys.stderr)
        return EXIT_BAD_INPUT
    refused = [why for why in (refusal(c, args.smoke) for c in cases) if why]
    if refused or not cases:
        print("\n".join(refused) or "benchmarks run: no case to run", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = Path(args.out)
    # a measurement dirties no tracked file unless asked: --record (the tracked results) or --results DIR
    results = Path(args.results) if args.results else rowlib.RESULTS_DIR if args.record else None
    failed = []
    for case in cases:
        print(f"== {case.name} ({args.rounds} round{'s' * (args.rounds > 1)})", flush=True)
        ctx = Context(args.rounds, args.steps, out / case.name, environment.capture(), suite_command(case, args),
                      smoke=args.smoke)
        try:
            new = case.collect(case, ctx)
        except (CaseFailed, NotAvailable) as err:
            print(f"{case.name}: FAILED: {err}", file=sys.stderr)
            failed.append(case.name)
            continue
        with (ctx.out / "rows.jsonl").open("w") as fh:
            fh.writelines(json.dumps(r, sort_keys=True) + "\n" for r in new)
        if args.smoke:
            print(f"{case.name}: smoke run, {len(new)} row(s) in {ctx.out / 'rows.jsonl'} (not recorded)")
        elif results is None:
            print(f"{case.name}: {len(new)} row(s) in {ctx.out / 'rows.jsonl'} (not recorded: --record appends them "
                  f"to {rowlib.RESULTS_DIR.relative_to(rowlib.RESULTS_DIR.parents[1])}/{case.area}.jsonl)")
        else:
            written = rowlib.append(new, results)
            print(f"{case.name}: {len(new)} row(s) appended to {', '.join(map(str, written))}")
        for r in new:
            print(f"  {r['variant']}: " + "; ".join(render.show_figure(f) for f in r["figures"]))
    if results is not None and results.resolve() == rowlib.RESULTS_DIR and not args.smoke:
        for path in render.write():  # the tracked rows changed: RESULTS.md and the README table follow them
            print(f"wrote {path}")
    return 1 if failed else 0


def add_rows(args: argparse.Namespace) -> int:
    """Append rows from files (what a device run left under $OUT) to benchmarks/results, skipping rows present."""
    try:
        if args.case:
            if args.case not in CASES:
                raise rowlib.BadRow(f"--case: unknown case {args.case!r} (python -m benchmarks list)")
            new = [row for f in args.files for row in rows_from_script_output(CASES[args.case], Path(f))]
        else:
            new = [row for f in args.files for row in rowlib.load(Path(f))]
    except (OSError, ValueError, rowlib.BadRow, CaseFailed) as err:
        print(f"benchmarks add: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    have = {json.dumps(r, sort_keys=True) for r in rowlib.load_all(Path(args.results))}
    fresh = [r for r in new if json.dumps(r, sort_keys=True) not in have]
    if fresh:
        rowlib.append(fresh, Path(args.results))
    print(f"{len(fresh)} new row(s) added, {len(new) - len(fresh)} already there")
    return 0


def render_results(args: argparse.Namespace) -> int:
    try:
        if args.check:
            stale = render.stale()
            for path in stale:
                print(f"{path} is stale: run `python -m benchmarks render`", file=sys.stderr)
            return 1 if stale else 0
        for path in render.write():
            print(f"wrote {path}")
    except (rowlib.BadRow, ValueError) as err:
        print(f"benchmarks render: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every case, per area, with what it needs").set_defaults(func=list_cases)
    run = sub.add_parser("run", help="run cases (or every case of an area); --record keeps their rows")
    run.add_argument("cases", nargs="+", metavar="CASE")
    run.add_argument("--rounds", type=int, default=3, help="repetitions (separate processes where the case allows)")
    run.add_argument("--steps", type=int, default=60, help="training steps per process, for cases that take it")
    run.add_argument("--out", default="bench_out", help="logs and raw outputs, one folder per case")
    run.add_argument("--record", action="store_true",
                     help="append the rows to benchmarks/results/<area>.jsonl and re-render RESULTS.md and the README "
                     "table (without it the rows are printed and written to --out/CASE/rows.jsonl only)")
    run.add_argument("--results", metavar="DIR",
                     help="append the rows to DIR/<area>.jsonl instead (implies recording; on the device machine: "
                     "$OUT/rows)")
    run.add_argument("--smoke", action="store_true",
                     help="tiny sizes where the script has them (GPU cases then run on a CPU); rows are not recorded")
    run.set_defaults(func=run_cases)
    add = sub.add_parser("add", help="append rows brought back from the device machine (<area>.jsonl files)")
    add.add_argument("files", nargs="+", metavar="FILE")
    add.add_argument("--case", help="FILEs are the JSON lines this case's script wrote (e.g. product_path.py's "
                     "results.jsonl from a GPU machine), not rows: convert them, keeping the device and versions "
                     "each line names")
    add.add_argument("--results", default=str(rowlib.RESULTS_DIR))
    add.set_defaults(func=add_rows)
    ren = sub.add_parser("render", help="write benchmarks/RESULTS.md and the README's measured table")
    ren.add_argument("--check", action="store_true", help="write nothing; exit 1 when either file is stale")
    ren.set_defaults(func=render_results)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
