"""Results: madengine's `performance:` line and its perf.csv, written atomically (run.json: atomic.write_json)."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from madengine_rocprof.atomic import atomic_write

# madengine takes the first match in the whole log.
PERFORMANCE = re.compile(r"performance:\s+([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s+([^\s,]+)")

PERF_COLUMNS = (
    "model", "n_gpus", "nnodes", "gpus_per_node", "training_precision", "pipeline", "args", "tags",
    "docker_file", "base_docker", "docker_sha", "docker_image", "git_commit", "machine_name",
    "deployment_type", "launcher", "gpu_architecture", "performance", "metric", "relative_change",
    "status", "build_duration", "test_duration", "dataname", "data_provider_type", "data_size",
    "data_download_duration", "build_number", "additional_docker_run_options",
)
# ours, after madengine's columns: the run directory a row describes. A rerun replaces its run directory, so its
# row replaces the earlier one: perf.csv and the reports then show the same (latest) run.
RUN_DIR_COLUMN = "run_dir"


CHUNK = 1 << 20   # logs are read in pieces: memory stays flat whatever the workload printed
OVERLAP = 512     # a match is only taken this far from a piece's end: one cut in two is seen whole next time


def parse_performance(log_text: str) -> tuple[float, str] | None:
    m = PERFORMANCE.search(log_text)
    return (float(m.group(1)), m.group(2)) if m else None


def find_performance(path: Path) -> tuple[float, str] | None:
    """madengine's first `performance:` match in a log of any size, read piece by piece."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            carry = ""
            while True:
                piece = fh.read(CHUNK)
                text = carry + piece
                m = PERFORMANCE.search(text)
                if m and (not piece or m.end() <= len(text) - OVERLAP):
                    return float(m.group(1)), m.group(2)
                if not piece:
                    return None
                carry = text[m.start():] if m else text[-OVERLAP:]
    except FileNotFoundError:
        return None


def count_lines(path: Path) -> int:
    """Lines in a file of any size (a last line without a newline counts), read piece by piece."""
    lines, last = 0, b"\n"
    with open(path, "rb") as fh:
        for piece in iter(lambda: fh.read(CHUNK), b""):
            lines += piece.count(b"\n")
            last = piece[-1:]
    return lines + (last != b"\n")


def append_perf_row(path: Path, row: dict[str, Any]) -> None:
    """Append one row, keeping existing rows (and any extra columns they have): read, add, rename into place.
    A row naming a run directory (`run_dir`) replaces the earlier rows of that directory (a rerun)."""
    rows: list[dict[str, str]] = []
    columns = [*PERF_COLUMNS, RUN_DIR_COLUMN]
    if path.exists():
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            columns += [c for c in (reader.fieldnames or []) if c not in columns]
            rows = list(reader)
    unknown = [k for k in row if k not in columns]
    if unknown:
        raise ValueError(f"perf.csv row has unknown columns {unknown}")
    if row.get(RUN_DIR_COLUMN):
        rows = [r for r in rows if r.get(RUN_DIR_COLUMN) != str(row[RUN_DIR_COLUMN])]
    rows.append({k: "" if v is None else str(v) for k, v in row.items()})
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, out.getvalue())
