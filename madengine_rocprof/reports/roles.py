"""Kernel time per role, so runs from different GPUs (or libraries) compare by what kernels do, not by their names.

A GEMM is `Cijk_*` on AMD and `nvjet_*` on NVIDIA; both are a `GEMM large tile (>=128x128)` when the tile says so.
Roles come from reports/categories.py (built-in rules plus the user's rules file).
"""

from __future__ import annotations

from typing import Any

from madengine_rocprof.reports.categories import CATEGORIES
from madengine_rocprof.wrapper.contracts import ReportRun


def roles_of(kernel_rows: list[dict[str, Any]], gpu_time_ns: float | None) -> list[dict[str, Any]]:
    """[{role, category, kernels, calls, total_ns, share}] in category order, then by time (largest first)."""
    by_role: dict[str, dict[str, Any]] = {}
    for row in kernel_rows:
        entry = by_role.setdefault(
            row["role"],
            {
                "role": row["role"],
                "category": row["category"],
                "kernels": 0,
                "calls": 0,
                "total_ns": 0 if row["total_ns"] is not None else None,
            },
        )
        entry["kernels"] += 1
        entry["calls"] += row["calls"]
        if entry["total_ns"] is not None and row["total_ns"] is not None:
            entry["total_ns"] += row["total_ns"]
    for entry in by_role.values():
        entry["share"] = entry["total_ns"] / gpu_time_ns if gpu_time_ns and entry["total_ns"] is not None else None
    return sorted(by_role.values(), key=lambda e: (CATEGORIES.index(e["category"]), -(e["total_ns"] or 0), e["role"]))


def role_table(runs: list[ReportRun], baseline: str) -> tuple[list[str], list[list]]:
    """Rows (role, category, then per run its time in ns and its speedup, baseline / run time) for every role any run
    has: above 1 is faster, as every ratio of the report."""
    base = next((r for r in runs if r["label"] == baseline), runs[0])
    per_run = [{e["role"]: e for e in r["roles"]} for r in runs]
    seen: dict[str, str] = {}
    for r in runs:
        for e in r["roles"]:
            seen.setdefault(e["role"], e["category"])
    order = sorted(
        seen,
        key=lambda role: (
            CATEGORIES.index(seen[role]),
            -max((t.get(role) or {}).get("total_ns") or 0 for t in per_run),
            role,
        ),
    )
    base_roles = {e["role"]: e for e in base["roles"]}
    rows = []
    for role in order:
        row: list = [role, seen[role]]
        base_ns = (base_roles.get(role) or {}).get("total_ns")
        for times in per_run:
            ns = (times.get(role) or {}).get("total_ns")
            row += [ns, base_ns / ns if ns and base_ns is not None else None]
        rows.append(row)
    return [r["label"] for r in runs], rows
