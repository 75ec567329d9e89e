"""Compare kernel dispatch counts of two wrapper outputs (e.g. the embedded tracer vs Nsight Compute) per kernel name.

    python3 compare_counts.py EMBEDDED_OUT NCU_OUT > counts.json
Reads every *_kernel_trace.csv (one row per dispatch) and every *_counter_collection.csv (distinct Dispatch_Id per
file) below each directory. Standard library only."""
from __future__ import annotations

import collections
import csv
import glob
import json
import os
import sys

from madengine_rocprof.wrapper.rocprof_csv import truncate_name


def counts(out: str) -> collections.Counter:
    per_name: collections.Counter[str] = collections.Counter()
    for path in glob.glob(os.path.join(out, "**", "*_kernel_trace.csv"), recursive=True):
        with open(path, newline="") as fh:
            per_name.update(row["Kernel_Name"] for row in csv.DictReader(fh))
    for path in glob.glob(os.path.join(out, "**", "*_counter_collection.csv"), recursive=True):
        seen: dict[str, str] = {}
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                seen[row["Dispatch_Id"]] = row["Kernel_Name"]
        per_name.update(seen.values())
    return per_name


def main() -> int:
    a, b = counts(sys.argv[1]), counts(sys.argv[2])
    names = sorted(set(a) | set(b))
    diff = {n: {"a": a[n], "b": b[n]} for n in names if a[n] != b[n]}
    # CUPTI and ncu spell template arguments differently: compare by function name too (rocprofv3 -T rule).
    fa: collections.Counter[str] = collections.Counter()
    fb: collections.Counter[str] = collections.Counter()
    for counter, target in ((a, fa), (b, fb)):
        for name, n in counter.items():
            target[truncate_name(name)] += n
    fdiff = {n: {"a": fa[n], "b": fb[n]} for n in sorted(set(fa) | set(fb)) if fa[n] != fb[n]}
    print(json.dumps({"a": sys.argv[1], "b": sys.argv[2], "total_a": sum(a.values()), "total_b": sum(b.values()),
                      "unique_a": len(a), "unique_b": len(b), "names_differing": len(diff),
                      "functions_a": len(fa), "functions_b": len(fb), "functions_differing": fdiff,
                      "differences": dict(list(diff.items())[:40])}, indent=2))
    return 0 if sum(a.values()) == sum(b.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
