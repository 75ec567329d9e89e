"""What one traced run through the wrapper produced, as JSON: the manifest's outcome and dispatch count, API and
kernel rows, how many kernels join an API row by correlation id, and the tracer's summaries.

    python3 benchmarks/wrapper/wrapper_run_summary.py OUTPUT_DIR > summary.json
"""
from __future__ import annotations

import csv
import glob
import json
import os
import sys


def rows(folder: str, suffix: str) -> list[dict]:
    out: list[dict] = []
    for path in glob.glob(f"{folder}/**/*{suffix}", recursive=True):
        with open(path, newline="") as fh:
            out += list(csv.DictReader(fh))
    return out


def main(folder: str) -> int:
    with open(os.path.join(folder, "manifest.json")) as fh:
        manifest = json.load(fh)
    api, kernels = rows(folder, "_hip_api_trace.csv"), rows(folder, "_kernel_trace.csv")
    summaries = []
    for path in glob.glob(f"{folder}/**/*_tracer_summary.json", recursive=True):
        with open(path) as fh:
            summaries.append(json.load(fh))
    ids = {r["Correlation_Id"] for r in api}
    print(json.dumps({"outcome": manifest["outcome"], "dispatch_count": manifest["dispatch_count"],
                      "api_rows": len(api), "kernel_rows": len(kernels),
                      "kernels_joined_to_an_api_row": sum(r["Correlation_Id"] in ids for r in kernels),
                      "summary": summaries, "files": sorted(o["path"] for o in manifest["outputs"])}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
