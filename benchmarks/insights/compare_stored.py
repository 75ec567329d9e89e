"""`compare` on real step times: the stored H100 and H200 TinyTransformer results
(tests/fixtures/gpu_runs/tinytransformer_{h100,h200}.json: bench.py outputs of real GPU runs).

Writes one run directory per (device, config, version) holding that run's workload_result.json, then compares
H100 against H200 per version and v3 against v4 on each device. No GPU needed: the step times were measured there.
    python benchmarks/insights/compare_stored.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from madengine_rocprof.cli import main

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1] / "tests" / "fixtures" / "gpu_runs"


def write_runs(root: Path) -> dict[tuple[str, str], Path]:
    runs = {}
    for device in ("h100", "h200"):
        data = json.loads((RESULTS / f"tinytransformer_{device}.json").read_text())
        for key, entry in data["results"].items():
            result = entry.get("result")
            if not result or not result.get("step_times_ms"):
                continue
            run = root / device / key.replace("/", "__")
            run.mkdir(parents=True)
            (run / "workload_result.json").write_text(json.dumps(result))
            runs[(device, key)] = run
    return runs


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, help="keep each comparison's Markdown and JSON here (default: not kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = write_runs(Path(tmp) / "runs")
        out = args.out or Path(tmp) / "out"
        out.mkdir(parents=True, exist_ok=True)
        pairs = [(("h100", k), ("h200", k)) for d, k in runs if d == "h100" and ("h200", k) in runs]
        pairs += [((d, k), (d, k.replace("/v3", "/v4"))) for d, k in runs if k.endswith("/v3")]
        for base, new in pairs:
            name = f"{base[0]}_{base[1].replace('/', '_')}__vs__{new[0]}_{new[1].replace('/', '_')}"
            code = main(
                [
                    "compare",
                    str(runs[base]),
                    str(runs[new]),
                    "-q",
                    "--markdown",
                    str(out / f"{name}.md"),
                    "--json",
                    str(out / f"{name}.json"),
                ]
            )
            step = json.loads((out / f"{name}.json").read_text())["metrics"][0]
            print(f"{name}: speedup {step['speedup']:.3f}x {step['verdict']} (exit {code})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
